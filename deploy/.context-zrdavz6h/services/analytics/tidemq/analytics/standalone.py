"""A Spark standalone cluster from the pyspark distribution: one master, N workers.

    python -m tidemq.analytics.standalone --workers 2 [--host 127.0.0.1] [--port 7077]
        [--webui-port 8090] [--work-dir .data/spark]

Spark is the distributed engine; nothing here is home-made. The pip pyspark package carries
Spark's jars and `bin/spark-class`, so the master (`org.apache.spark.deploy.master.Master`)
and the workers (`org.apache.spark.deploy.worker.Worker`) run from the same distribution the
lock file pins, with the workspace interpreter as every executor's Python. A job reaches the
cluster with `--master spark://host:port` (every job here takes `--master`). Processes stay
in the foreground; SIGTERM/SIGINT stops the workers, then the master.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def spark_env(host: str) -> dict[str, str]:
    """What every master, worker and executor process needs: the distribution, this Python."""
    return {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": host,
            "PYSPARK_PYTHON": os.environ.get("PYSPARK_PYTHON", sys.executable),
            "SPARK_NO_DAEMONIZE": "1"}


@dataclass(frozen=True)
class ClusterLayout:
    host: str = "127.0.0.1"
    port: int = 7077
    webui_port: int = 8090
    workers: int = 2
    worker_cores: int = 1
    worker_memory: str = "1g"
    work_dir: Path = Path(".data/spark")

    @property
    def master_url(self) -> str:
        return f"spark://{self.host}:{self.port}"

    @property
    def ui_url(self) -> str:
        return f"http://{self.host}:{self.webui_port}"

    def worker_ui_port(self, index: int) -> int:
        return self.webui_port + 1 + index

    def master_command(self) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), MASTER_CLASS, "--host", self.host,
                "--port", str(self.port), "--webui-port", str(self.webui_port)]

    def worker_command(self, index: int) -> list[str]:
        return [str(spark_home() / "bin" / "spark-class"), WORKER_CLASS, self.master_url,
                "--host", self.host, "--cores", str(self.worker_cores),
                "--memory", self.worker_memory,
                "--webui-port", str(self.worker_ui_port(index)),
                "--work-dir", str(self.work_dir / f"worker-{index}")]


def start(layout: ClusterLayout, log_dir: Path) -> list[subprocess.Popen]:
    """Master first, then the workers (they retry registering until the master is up)."""
    log_dir.mkdir(parents=True, exist_ok=True)
    env = spark_env(layout.host)
    commands = [("master", layout.master_command())] + [
        (f"worker-{i}", layout.worker_command(i)) for i in range(layout.workers)]
    processes = []
    for name, command in commands:
        with open(log_dir / f"{name}.log", "ab") as log:
            processes.append(subprocess.Popen(command, env=env, stdout=log, stderr=log,
                                              start_new_session=True))
    return processes


def stop(processes: list[subprocess.Popen], timeout: float = 20.0) -> None:
    """Workers first, then the master; SIGTERM, then SIGKILL after `timeout`."""
    for process in reversed(processes):
        if process.poll() is None:
            process.terminate()
        try:
            process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tidemq.analytics.standalone",
                                     description="Run a Spark standalone master and workers.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=7077)
    parser.add_argument("--webui-port", type=int, default=8090,
                        help="master UI; worker i uses this + 1 + i")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-cores", type=int, default=1)
    parser.add_argument("--worker-memory", default="1g")
    parser.add_argument("--work-dir", type=Path, default=Path(".data/spark"))
    args = parser.parse_args(argv)
    layout = ClusterLayout(args.host, args.port, args.webui_port, args.workers,
                           args.worker_cores, args.worker_memory, args.work_dir)
    processes = start(layout, args.work_dir / "logs")
    print(f"spark master {layout.master_url}, UI {layout.ui_url} "
          f"({layout.workers} workers; logs in {args.work_dir / 'logs'})", flush=True)
    stopped = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stopped.set())
    while not stopped.is_set() and all(p.poll() is None for p in processes):
        stopped.wait(1.0)
    stop(processes)
    return 0


if __name__ == "__main__":
    sys.exit(main())
