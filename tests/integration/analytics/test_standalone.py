"""The tag-count job on a Spark standalone cluster: a master and two workers as separate
processes (spark-class from the pyspark distribution, tidemq.analytics.standalone), the job
as its own driver with `--master spark://…`. Spark's own JSON says where things ran: the
master's /json/ lists both workers alive, and the job's event log ties every finished task to
an executor whose log URLs name its worker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from tests.integration.analytics.cluster import tagged
from tests.support.processes import free_port, wait_until

# Five JVMs (master, two workers, driver, two executors): over a minute even on an idle
# 2-core machine, so outside the default run; `make analytics-cluster-test` runs it.
pytestmark = [pytest.mark.spark, pytest.mark.slow,
              pytest.mark.skipif(not os.environ.get("TIDEMQ_SPARK_CLUSTER_TESTS"),
                                 reason="set TIDEMQ_SPARK_CLUSTER_TESTS=1 "
                                        "(make analytics-cluster-test)")]

REPO = Path(__file__).resolve().parents[3]
TOPIC = "standalone-tags"


def master_json(layout) -> dict:
    with urllib.request.urlopen(f"{layout.ui_url}/json/", timeout=5) as reply:
        return json.load(reply)


def alive_workers(layout) -> int:
    try:
        return sum(1 for w in master_json(layout)["workers"] if w["state"] == "ALIVE")
    except OSError:
        return 0


def task_workers(event_dir: Path, layout) -> Counter:
    """Finished tasks per worker index, from the event log (executor → its worker's UI port)."""
    events = [json.loads(line) for path in event_dir.rglob("*")
              if path.is_file() and not path.name.startswith(".")  # not the .crc files
              for line in path.read_text().splitlines() if line.strip()]
    worker_of = {}
    for event in events:
        if event["Event"] == "SparkListenerExecutorAdded":
            urls = " ".join(event["Executor Info"].get("Log Urls", {}).values())
            for index in range(layout.workers):
                if f":{layout.worker_ui_port(index)}/" in urls:
                    worker_of[event["Executor ID"]] = index
    return Counter(worker_of.get(e["Task Info"]["Executor ID"], "?") for e in events
                   if e["Event"] == "SparkListenerTaskEnd")


def test_tag_counts_runs_on_both_workers(cluster, tmp_path):
    from tidemq.analytics import standalone

    cluster.create_topic(TOPIC, 4)
    cluster.send(TOPIC, {q: [tagged(TOPIC, f"W{n % 2}", n) for n in range(q, 400, 4)]
                         for q in range(4)})
    ui = free_port()
    layout = standalone.ClusterLayout(port=free_port(), webui_port=ui, workers=2,
                                      worker_memory="512m", work_dir=tmp_path / "spark")
    # worker UIs are ui + 1 and ui + 2: taken only if free, else Spark picks another port and
    # the executor → worker match below would find nothing (the test then fails loudly)
    processes = standalone.start(layout, tmp_path / "spark" / "logs")
    try:
        wait_until(lambda: alive_workers(layout) == 2, 180, interval=0.5,
                   message="two workers registered with the master")
        conf_dir, events = tmp_path / "conf", tmp_path / "events"
        conf_dir.mkdir()
        events.mkdir()
        (conf_dir / "spark-defaults.conf").write_text(
            f"spark.eventLog.enabled true\nspark.eventLog.dir file://{events}\n"
            "spark.eventLog.compress false\n"
            # schedule only once both executors are up, one core each
            "spark.scheduler.minRegisteredResourcesRatio 1.0\n"
            "spark.scheduler.maxRegisteredResourcesWaitingTime 120s\n"
            "spark.executor.memory 512m\nspark.executor.cores 1\n")
        output = tmp_path / "tags.csv"
        env = {**standalone.spark_env("127.0.0.1"), "SPARK_CONF_DIR": str(conf_dir)}
        job = subprocess.run(
            [sys.executable, "-m", "tidemq.analytics.tag_counts", "--master",
             layout.master_url, "--namesrv", cluster.namesrv.addr, "--topic", TOPIC,
             "--output", str(output), "--shuffle-partitions", "4"],
            cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
        assert job.returncode == 0, job.stdout[-2000:] + job.stderr[-4000:]
        assert output.read_text().splitlines() == ["tag,count", "W0,200", "W1,200"]
        per_worker = task_workers(events, layout)
        assert set(per_worker) == {0, 1}, per_worker
        assert master_json(layout)["completedapps"], "the master saw the application"
    finally:
        standalone.stop(processes)
    assert all(p.returncode is not None for p in processes)
