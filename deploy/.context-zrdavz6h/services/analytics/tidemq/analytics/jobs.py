"""What the streaming jobs (revenue, sessions, relay) share: their common options and the
loop that runs their queries until a signal or a failure."""

from __future__ import annotations

import argparse
import signal
import sys
import threading


def job_parser(module: str, description: str) -> argparse.ArgumentParser:
    """--namesrv, --checkpoint, --master and --starting-offsets; the job adds its own."""
    parser = argparse.ArgumentParser(prog=f"python -m tidemq.analytics.{module}",
                                     description=description)
    parser.add_argument("--namesrv", required=True, help="name servers, host:port[;host:port]")
    parser.add_argument("--checkpoint", required=True,
                        help="Spark checkpoint directory (keep it: a restart resumes from it)")
    parser.add_argument("--master", default="local[*]",
                        help="Spark master (default local[*]; 'none' = as spark-submit says)")
    parser.add_argument("--starting-offsets", default="earliest")
    return parser


def job_session(app_name: str, args: argparse.Namespace, conf: dict[str, str] | None = None):
    from tidemq.analytics.session import build_session

    spark = build_session(app_name, None if args.master == "none" else args.master, conf)
    spark.sparkContext.setLogLevel("WARN")
    return spark


def run_until_stopped(job: str, spark, queries: list) -> int:
    """Run until SIGTERM/SIGINT or until a query ends; stop every query and the session.
    Exit status 2 when a query failed (its error on stderr), else 0."""
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    while not stop.is_set() and all(q.isActive for q in queries):
        stop.wait(0.5)
    failed = [q for q in queries if not q.isActive and q.exception() is not None]
    for query in queries:
        query.stop()
    spark.stop()
    for query in failed:
        print(f"{job}: query {query.name} failed: {query.exception()}", file=sys.stderr)
    return 2 if failed else 0
