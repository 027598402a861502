"""The `analytics` profile: a Spark standalone master, two workers and the job submitter, in the
supervisord config (`make up ANALYTICS=1`) and in docker-compose.yml, from one description."""

from __future__ import annotations

import configparser
import subprocess
from pathlib import Path

import yaml

from deploy import analytics, observability
from deploy.images import _built_images
from deploy.local import local_topology
from deploy.render import COMPOSE_FILE, render_compose, render_dockerfiles, render_supervisor
from deploy.topology import (
    ALL_PROFILES,
    REPO_ROOT,
    Placement,
    enabled_profiles,
    load,
    published_urls,
)
from tests.support.tools import needs_tool

SPARK = ("spark-master", "spark-worker-1", "spark-worker-2", "spark-submit")
BIN = Path("/venv/bin")


def test_spark_services_run_only_with_the_analytics_profile():
    assert not set(SPARK) & set(load().services)
    assert not set(SPARK) & set(load(profiles=(observability.PROFILE,)).services)
    assert set(SPARK) <= set(load(profiles=(analytics.PROFILE,)).services)
    assert load(profiles=ALL_PROFILES).profiles() == [analytics.PROFILE, observability.PROFILE]
    assert enabled_profiles({"TIDEMQ_ANALYTICS": "1"}) == (analytics.PROFILE,)
    assert enabled_profiles({"TIDEMQ_ANALYTICS": "0", "TIDEMQ_OBSERVABILITY": ""}) == ()


def test_the_compose_test_topology_builds_no_spark_image():
    """tests/compose runs the observability profile: pyspark stays out of its wheelhouse."""
    built = {image.name for image in _built_images(load(profiles=(observability.PROFILE,)))}
    assert "spark" not in built and "broker" in built
    assert "spark" in {i.name for i in _built_images(load(profiles=(analytics.PROFILE,)))}


def _supervisor(tmp_path: Path, offset: int = 500) -> configparser.RawConfigParser:
    config = configparser.RawConfigParser()
    config.read_string(render_supervisor(load(profiles=(analytics.PROFILE,)),
                                         Placement(port_offset=offset), run_dir=tmp_path,
                                         data_dir=tmp_path, python=str(BIN / "python")))
    return config


def test_make_up_runs_spark_master_and_workers_with_spark_class(tmp_path: Path):
    config = _supervisor(tmp_path)
    master = config["program:spark-master"]["command"].split()
    assert master[:2] == [str(BIN / "spark-class"), "org.apache.spark.deploy.master.Master"]
    assert master[master.index("--port") + 1] == "7577"          # 7077 + offset
    assert master[master.index("--webui-port") + 1] == "8590"    # 8090 + offset
    assert master[master.index("--host") + 1] == "127.0.0.1"
    for index, ui in ((1, "8591"), (2, "8592")):
        section = config[f"program:spark-worker-{index}"]
        worker = section["command"].split()
        assert worker[1] == "org.apache.spark.deploy.worker.Worker"
        assert worker[2] == "spark://127.0.0.1:7577"
        assert worker[worker.index("--webui-port") + 1] == ui
        assert worker[worker.index("--work-dir") + 1] == str(tmp_path / f"spark-worker-{index}")
        assert 'SPARK_LOCAL_IP="127.0.0.1"' in section["environment"]
        assert f'SPARK_DAEMON_JAVA_OPTS="{analytics.DAEMON_OPTS}"' in section["environment"]
        assert f'PYSPARK_PYTHON="{BIN / "python"}"' in section["environment"]
        assert int(section["priority"]) > int(config["program:spark-master"]["priority"])
    submit = config["program:spark-submit"]["command"]
    assert submit.startswith(f"{BIN / 'python'} -m tidemq.analytics.submitter ")
    assert "--master spark://127.0.0.1:7577 --master-ui http://127.0.0.1:8590" in submit
    assert int(config["program:spark-submit"]["priority"]) > \
        int(config["program:spark-worker-1"]["priority"])


def test_compose_spark_services(tmp_path: Path):
    services = yaml.safe_load(render_compose(load(profiles=ALL_PROFILES)))["services"]
    master, worker, submit = (services[n] for n in ("spark-master", "spark-worker-2",
                                                    "spark-submit"))
    for name in SPARK:
        assert services[name]["profiles"] == [analytics.PROFILE], name
        assert services[name]["image"] == "localhost/tidemq-spark:dev"
        assert services[name]["build"]["dockerfile"] == "services/analytics/Dockerfile"
        assert services[name]["environment"]["SPARK_LOCAL_HOSTNAME"] == name
        assert services[name]["environment"]["SPARK_DAEMON_JAVA_OPTS"] == analytics.DAEMON_OPTS
    assert master["command"][:4] == ["spark-class", "org.apache.spark.deploy.master.Master",
                                     "--host", "spark-master"]
    assert master["ports"] == ["127.0.0.1:${TIDEMQ_SPARK_MASTER_PORT:-7077}:7077",
                               "127.0.0.1:${TIDEMQ_SPARK_MASTER_HTTP_PORT:-8090}:8090"]
    assert worker["command"][2] == "spark://spark-master:7077"
    assert worker["depends_on"] == {"spark-master": {"condition": "service_healthy"}}
    assert "http://spark-master:8090" in submit["command"]
    assert set(submit["depends_on"]) == {"spark-worker-1", "spark-worker-2"}
    assert submit["healthcheck"]["test"][-1] == "http://127.0.0.1:4050/healthz"


def test_spark_image_installs_java_from_apt_and_the_locked_pyspark():
    dockerfile = render_dockerfiles(load(profiles=ALL_PROFILES))[
        REPO_ROOT / "services/analytics/Dockerfile"]
    assert "apt-get install -y --no-install-recommends openjdk-17-jre-headless" in dockerfile
    assert "COPY deploy/.wheelhouse/images/tidemq-analytics/ /wheels/" in dockerfile  # + pyspark
    assert dockerfile.index("openjdk") < dockerfile.index("USER tidemq")
    broker = render_dockerfiles(load())[REPO_ROOT / "services/broker/Dockerfile"]
    assert "apt-get" not in broker and 'CMD ["python", "-m", "tidemq.broker"]' in broker


def test_urls_print_the_master_and_the_uis():
    lines = published_urls(load(profiles=(analytics.PROFILE,)), Placement())
    text = "\n".join(lines)
    assert "spark://127.0.0.1:7077" in text and "http://127.0.0.1:8090" in text
    assert "http://127.0.0.1:8091" in text and "http://127.0.0.1:8092" in text


def test_make_up_says_why_spark_is_not_started_without_java(monkeypatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    topology, skipped = local_topology(profiles=(analytics.PROFILE,))
    assert set(skipped) == set(SPARK)
    assert "openjdk-17-jre-headless" in skipped["spark-master"]
    assert not set(SPARK) & set(topology.services)


@needs_tool("docker-compose")
def test_docker_compose_accepts_the_analytics_profile():
    env = {"PATH": "/usr/bin:/bin:/usr/local/bin", "COMPOSE_PROFILES": analytics.PROFILE}
    listed = subprocess.run(["docker-compose", "-f", str(COMPOSE_FILE), "config", "--services"],
                            capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    assert listed.returncode == 0, listed.stderr
    assert set(SPARK) <= set(listed.stdout.split())
    quiet = subprocess.run(["docker-compose", "-f", str(COMPOSE_FILE), "config", "-q"],
                           capture_output=True, text=True, env=env, cwd=REPO_ROOT)
    assert quiet.returncode == 0, quiet.stderr
