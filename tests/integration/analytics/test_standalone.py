"""The tag-count job on the deployment's Spark standalone cluster: the `analytics` profile of
deploy/topology.yaml (master, two workers from pyspark's spark-class, the submitter) run under
supervisord as `make up ANALYTICS=1` runs it, on shifted ports; the job submitted through a
`tidemq.analytics.submitter` as its own driver with `--master spark://…`. Spark's own JSON
says where things ran: the master's /json/ lists both workers alive, and the job's event log
ties every finished task to an executor whose log URLs name its worker."""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

from deploy.analytics import PROFILE
from deploy.local import LocalDeployment, free_port_offset
from deploy.topology import Placement, load
from tests.integration.analytics.cluster import tagged
from tests.support.processes import free_port, wait_until

# Five JVMs (master, two workers, driver, two executors): 111 s and 145 s on the shared 2-core
# machine (load average 5-7 and 7-9; the cluster is healthy after ~33 s, the job takes the
# rest). Part of `make test`: the suite stays well inside CI's budget with it.
pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]
TOPIC = "standalone-tags"


def get_json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as reply:
        return json.load(reply)


def finished_runs(submitter_url: str) -> list[dict]:
    try:
        runs = get_json(f"{submitter_url}/jobs")["runs"]
    except OSError:
        return []
    return [run for run in runs if run["returncode"] is not None]


def task_workers(event_dir: Path, worker_ui_ports: list[int]) -> Counter:
    """Finished tasks per worker index, from the event log (executor → its worker's UI port)."""
    events = [json.loads(line) for path in event_dir.rglob("*")
              if path.is_file() and not path.name.startswith(".")  # not the .crc files
              for line in path.read_text().splitlines() if line.strip()]
    worker_of = {}
    for event in events:
        if event["Event"] == "SparkListenerExecutorAdded":
            urls = " ".join(event["Executor Info"].get("Log Urls", {}).values())
            for index, port in enumerate(worker_ui_ports):
                if f":{port}/" in urls:
                    worker_of[event["Executor ID"]] = index
    return Counter(worker_of.get(e["Task Info"]["Executor ID"], "?") for e in events
                   if e["Event"] == "SparkListenerTaskEnd")


def spark_deployment(data_dir: Path) -> LocalDeployment:
    """Only the `analytics` profile's services, supervised as `make up ANALYTICS=1` runs them."""
    topology = load(profiles=(PROFILE,))
    topology = dataclasses.replace(topology, services={
        name: s for name, s in topology.services.items() if s.profile == PROFILE})
    return LocalDeployment(data_dir=data_dir, port_offset=free_port_offset(topology),
                           topology=topology)


def test_tag_counts_runs_on_both_workers(cluster, tmp_path):
    from tidemq.analytics import standalone

    cluster.create_topic(TOPIC, 4)
    cluster.send(TOPIC, {q: [tagged(TOPIC, f"W{n % 2}", n) for n in range(q, 400, 4)]
                         for q in range(4)})
    deployment = spark_deployment(tmp_path / "deploy")
    services, placement = deployment.topology.services, deployment.placement
    master_url = f"spark://{placement.addr(services['spark-master'], 'spark')}"
    master_ui = f"http://{placement.addr(services['spark-master'], 'http')}"
    worker_ui_ports = [placement.port(services[f"spark-worker-{i}"], "http") for i in (1, 2)]
    try:
        # tier by tier; the deployment's submitter is healthy once both workers are ALIVE
        deployment.up(timeout=180, progress=print)
        assert get_json(f"{master_ui}/json/")["aliveworkers"] == 2
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
        output, log = tmp_path / "tags.csv", tmp_path / "submitter.log"
        env = {**standalone.spark_env("127.0.0.1"), "SPARK_CONF_DIR": str(conf_dir)}
        submitter_url = f"http://127.0.0.1:{(port := free_port())}"
        with log.open("wb") as out:
            submitter = subprocess.Popen(
                [sys.executable, "-m", "tidemq.analytics.submitter", "--master", master_url,
                 "--master-ui", master_ui, "--workers", "2", "--port", str(port), "--",
                 sys.executable, "-m", "tidemq.analytics.tag_counts", "--master", "{master}",
                 "--namesrv", cluster.namesrv.addr, "--topic", TOPIC, "--output", str(output),
                 "--shuffle-partitions", "4",
                 # a read task per queue (400 messages would otherwise be packed into one)
                 "--max-records-per-partition", "100"],
                cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            runs = wait_until(lambda: finished_runs(submitter_url), 240, interval=0.5,
                              message="the submitter ran the job")
        finally:
            submitter.terminate()
            submitter.wait(20)
        assert [run["returncode"] for run in runs] == [0], log.read_text()[-4000:]
        assert runs[0]["argv"][runs[0]["argv"].index("--master") + 1] == master_url
        assert output.read_text().splitlines() == ["tag,count", "W0,200", "W1,200"]
        per_worker = task_workers(events, worker_ui_ports)
        assert set(per_worker) == {0, 1}, per_worker
        assert get_json(f"{master_ui}/json/")["completedapps"], "the master saw the application"
        pids = [deployment.pid(name) for name in services]
        assert all(pids), pids
    finally:
        deployment.down()
    assert deployment.supervisord_pid() is None


def test_a_master_whose_ui_port_is_taken_fails_rather_than_serving_on_another(tmp_path):
    """Spark's default moves the UI to the next port, where the health check, the workers and
    the console never look; with the deployment's options the master exits, so supervisord
    starts it again on its own port. The port is held the way a CI run found it held: by an
    outgoing connection's local end, which no bind probe beforehand can rule out."""
    from deploy import analytics

    topology = load(profiles=(PROFILE,))
    master = topology.services["spark-master"]
    listener = socket.create_server(("127.0.0.1", 0))
    outgoing = socket.socket()
    with listener, outgoing:
        outgoing.bind(("127.0.0.1", 0))
        outgoing.connect(listener.getsockname())
        ui_port = outgoing.getsockname()[1]
        placement = Placement(port_overrides={"spark-master.http": ui_port,
                                              "spark-master.spark": free_port()})
        argv = analytics.spark_argv(master, topology, placement, data_dir=str(tmp_path),
                                    bin_dir=str(Path(sys.executable).parent))
        env = {**os.environ, **analytics.environment(master, placement)}
        log = tmp_path / "master.log"
        with log.open("wb") as out:
            process = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
        try:
            assert process.wait(120) != 0, log.read_text()[-3000:]
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    text = log.read_text()
    assert f"Failed to bind to /127.0.0.1:{ui_port}" in text, text[-3000:]
    assert "Successfully started service 'MasterUI'" not in text
    assert "REST server" not in text
