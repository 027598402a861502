"""The `analytics` profile: a Spark standalone cluster (master, workers) and its job submitter.

Spark is the distributed engine, run as is: the master and the workers are Spark's own
`org.apache.spark.deploy.master.Master` / `...worker.Worker` started with `spark-class` from
the pip pyspark distribution the lock file pins (locally the workspace venv's, in compose the
`spark` image's, which adds Debian's Java). The submitter (`tidemq.analytics.submitter`) is
the driver host jobs are submitted from. See docs/analytics.md.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from tidemq.analytics.standalone import MASTER_CLASS, WORKER_CLASS

from deploy.topology import Placement, Service, Topology, expand

PROFILE = "analytics"
SPARK_PROGRAMS = ("spark-master", "spark-worker", "spark-submit")
# The master and the workers listen where the topology says or not at all: by default Spark
# moves a taken port's service to the next port (up to 16 times), where the health check, the
# workers and the console never look (a CI run's master UI did, when an outgoing connection
# held its port: 180 s of "connection refused"). Failing instead lets supervisord start it
# again, on its own port. The master's REST submission server is off: it would take a fixed
# port (6066) on every host and accepts jobs from anyone who reaches it, unauthenticated.
DAEMON_OPTS = "-Dspark.port.maxRetries=0 -Dspark.master.rest.enabled=false"
JAVA_MISSING = ("Java is not installed (Spark needs a JVM): `apt-get install "
                "openjdk-17-jre-headless` (Debian/Ubuntu) and run `make up ANALYTICS=1` again")


def spark_argv(service: Service, topology: Topology, placement: Placement, *, data_dir: str,
               python: str = "python", bin_dir: str = "") -> list[str]:
    """The command line of a spark-* program. `bin_dir` holds spark-class (the venv's bin
    locally; on PATH in the image)."""
    host = placement.host(service)
    args = [expand(arg, service, topology, placement) for arg in service.args]
    port = placement.port(service, service.main_port)
    spark_class = str(Path(bin_dir) / "spark-class") if bin_dir else "spark-class"
    if service.program == "spark-master":
        return [spark_class, MASTER_CLASS, "--host", host,
                "--webui-port", str(placement.port(service, "http")), *args]
    if service.program == "spark-worker":
        return [spark_class, WORKER_CLASS, *args, "--host", host, "--webui-port", str(port),
                "--work-dir", data_dir]
    bind = "0.0.0.0" if placement.compose else "127.0.0.1"
    cut = args.index("--") if "--" in args else len(args)  # after `--`: the job to run once
    own, job = args[:cut], args[cut:]
    return [python, "-m", "tidemq.analytics.submitter", *own, "--host", bind,
            "--port", str(port), *job]


def environment(service: Service, placement: Placement, *, python: str = sys.executable
                ) -> dict[str, str]:
    """What Spark's processes need: the name they are reached by, the executors' Python, and
    DAEMON_OPTS."""
    env = {"SPARK_LOCAL_HOSTNAME": placement.host(service), "SPARK_NO_DAEMONIZE": "1",
           "SPARK_DAEMON_JAVA_OPTS": DAEMON_OPTS}
    if placement.compose:
        return {**env, "PYSPARK_PYTHON": "python", "HOME": "/data"}
    from tidemq.analytics.standalone import spark_home

    # locally everything is on loopback: bind there rather than guess an interface
    return {**env, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
            "PYSPARK_PYTHON": python}


def local_unavailable(topology: Topology) -> dict[str, str]:
    """Spark services `make up` cannot run here (no Java), with the reason to print."""
    if shutil.which("java"):
        return {}
    return {s.name: JAVA_MISSING for s in topology.services.values()
            if s.program in SPARK_PROGRAMS}
