"""Batch job: count a topic's messages per tag and write (tag, count) as one CSV file.

    python -m tidemq.analytics.tag_counts --namesrv 127.0.0.1:9876 --topic orders \
        --output /tmp/orders-tags.csv [--master local[*]]

The output is a single CSV file with a header line `tag,count`, sorted by count (descending)
then tag; messages without a tag count under the empty tag "". The counts are small (one row
per distinct tag), so they are collected to the driver and written atomically (temp + rename)
instead of as a Spark output directory.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import sys
import tempfile
import time
from pathlib import Path

from py4j.protocol import Py4JJavaError
from pyspark.errors import PySparkException
from tidemq.common.errors import TideMQError


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tidemq.analytics.tag_counts",
        description="Count a TideMQ topic's messages per tag (Spark batch job).",
    )
    parser.add_argument("--namesrv", required=True, help="name servers, host:port[;host:port]")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True, type=Path, help="CSV file to write")
    parser.add_argument("--master", default="local[*]",
                        help="Spark master (default local[*]; 'none' = as spark-submit says)")
    parser.add_argument("--starting-offsets", default="earliest")
    parser.add_argument("--ending-offsets", default="latest")
    parser.add_argument("--max-records-per-partition", type=int, default=0)
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    return parser.parse_args(argv)


def count_tags(spark, args: argparse.Namespace) -> list[tuple[str, int]]:
    frame = (
        spark.read.format("tidemq")
        .option("namesrv", args.namesrv)
        .option("topic", args.topic)
        .option("startingOffsets", args.starting_offsets)
        .option("endingOffsets", args.ending_offsets)
        .option("maxRecordsPerPartition", str(args.max_records_per_partition))
        .load()
    )
    rows = frame.groupBy("tag").count().orderBy("count", "tag", ascending=[False, True]).collect()
    return [(row["tag"], row["count"]) for row in rows]


def write_csv(path: Path, counts: list[tuple[str, int]]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", newline="") as out:
            writer = csv.writer(out)
            writer.writerow(["tag", "count"])
            writer.writerows(counts)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


_ERROR_LINE = re.compile(r"tidemq\.common\.errors\.\w+: (.+)")


def explain(exc: BaseException) -> str:
    """The TideMQ error inside a Spark failure (raised in a Python worker), else its summary."""
    if isinstance(exc, TideMQError):
        return str(exc)
    found = _ERROR_LINE.findall(str(exc))
    if found:
        return found[-1].strip()
    lines = [line for line in str(exc).splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__


def check_topic(namesrv: str, topic: str, timeout: float = 10.0) -> int:
    """The topic's readable queue count, asked of the name servers before Spark starts: a
    typo'd topic fails in a second with its code, not after the JVM's start-up."""
    from tidemq.analytics import brokers

    groups = brokers.fetch_route(brokers.parse_addrs(namesrv), topic, timeout)
    return sum(group.read_queues for group in groups)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from tidemq.analytics.session import build_session

    began = time.monotonic()
    print(f"tag_counts: checking topic {args.topic!r} via {args.namesrv}", flush=True)
    try:
        queues = check_topic(args.namesrv, args.topic)
    except TideMQError as exc:
        print(f"tag_counts: failed: {explain(exc)}", file=sys.stderr)
        return 2
    print(f"tag_counts: starting Spark ({args.master}) for {queues} queue(s)", flush=True)
    spark = build_session(
        "tidemq-tag-counts",
        None if args.master == "none" else args.master,
        {"spark.sql.shuffle.partitions": str(args.shuffle_partitions),
         "spark.ui.enabled": "false"},
    )
    spark.sparkContext.setLogLevel("WARN")
    try:
        print(f"tag_counts: reading topic {args.topic!r} via {args.namesrv}", flush=True)
        read_began = time.monotonic()
        counts = count_tags(spark, args)
        print(f"tag_counts: read and counted in {time.monotonic() - read_began:.1f} s",
              flush=True)
    except (TideMQError, PySparkException, Py4JJavaError) as exc:
        print(f"tag_counts: failed: {explain(exc)}", file=sys.stderr)
        return 2
    finally:
        spark.stop()
    write_csv(args.output, counts)
    total = sum(count for _, count in counts)
    print(f"tag_counts: {total} messages, {len(counts)} tags -> {args.output} "
          f"({time.monotonic() - began:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
