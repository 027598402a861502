"""The job submitter of the `analytics` profile: the driver host of the Spark cluster.

    python -m tidemq.analytics.submitter --master spark://spark-master:7077 \
        --master-ui http://spark-master:8090 --workers 2 --port 4050 [-- JOB ARGV...]

It waits until the master reports `--workers` ALIVE workers, then runs the job given after
`--` once (`{master}` in it becomes the master URL), e.g.
`-- python -m tidemq.analytics.tag_counts --master {master} --namesrv … --topic orders
--output /data/orders.csv`, and stays up as the place further jobs are submitted from on
demand (`docker-compose exec spark-submit python -m tidemq.analytics.revenue --master
spark://spark-master:7077 …`): its container has Java, pyspark and the jobs, and executors can
reach it by name. `GET /healthz` answers 200 while the master has the workers (so the
deployment's health check covers the whole cluster); `GET /jobs` lists the runs.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

POLL_S = 1.0


def alive_workers(master_ui: str, timeout: float = 3.0) -> int:
    """ALIVE workers in the master's own JSON (`/json/` of its web UI); 0 if it is not up."""
    try:
        with urllib.request.urlopen(f"{master_ui}/json/", timeout=timeout) as reply:  # noqa: S310
            return sum(1 for w in json.load(reply)["workers"] if w["state"] == "ALIVE")
    except (OSError, ValueError, KeyError):
        return 0


class Submitter:
    """Runs the configured job once the cluster is complete and keeps the runs' outcomes."""

    def __init__(self, master: str, master_ui: str, workers: int, job: list[str]):
        self.master, self.master_ui, self.workers = master, master_ui, workers
        self.job = [arg.replace("{master}", master) for arg in job]
        self.runs: list[dict] = []

    def healthy(self) -> bool:
        return alive_workers(self.master_ui) >= self.workers

    def run_job(self, stop: threading.Event) -> None:
        while not stop.is_set() and not self.healthy():
            stop.wait(POLL_S)
        if stop.is_set() or not self.job:
            return
        run = {"argv": self.job, "started": time.time(), "returncode": None}
        self.runs.append(run)
        print(f"submitter: running {' '.join(self.job)}", flush=True)
        run["returncode"] = subprocess.run(self.job).returncode  # output into our log
        run["finished"] = time.time()
        print(f"submitter: job exited with status {run['returncode']}", flush=True)


def _handler(submitter: Submitter) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/healthz":
                ok = submitter.healthy()
                status, body = (200 if ok else 503), {"workers_alive": ok}
            elif self.path == "/jobs":
                status, body = 200, {"master": submitter.master, "runs": submitter.runs}
            else:
                status, body = 404, {"error": "GET /healthz or /jobs"}
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args) -> None:  # health probes every few seconds: not logged
            pass

    return Handler


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    job = argv[argv.index("--") + 1:] if "--" in argv else []
    own = argv[:argv.index("--")] if "--" in argv else argv
    parser = argparse.ArgumentParser(prog="python -m tidemq.analytics.submitter",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--master", required=True, help="spark://host:port")
    parser.add_argument("--master-ui", required=True, help="http://host:port of the master UI")
    parser.add_argument("--workers", type=int, default=2, help="workers the cluster must have")
    parser.add_argument("--host", default="127.0.0.1", help="address of /healthz and /jobs")
    parser.add_argument("--port", type=int, default=4050)
    args = parser.parse_args(own)
    submitter = Submitter(args.master, args.master_ui, args.workers, job)
    server = ThreadingHTTPServer((args.host, args.port), _handler(submitter))
    stop = threading.Event()
    threading.Thread(target=submitter.run_job, args=(stop,), daemon=True).start()
    print(f"submitter: {args.master}, status on http://{args.host}:{args.port}/jobs", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stop.set()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
