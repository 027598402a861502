"""Streaming job: copy a topic into another, each message once, surviving driver crashes.

    python -m tidemq.analytics.relay --namesrv 127.0.0.1:9876 --source orders \
        --sink orders-copy --checkpoint /data/relay-ck [--master local[*]] [--exactly-once]

Reads `--source` with readStream.format("tidemq") and writes every message (body, tag, keys,
user properties) to `--sink` with writeStream.format("tidemq"). Spark's checkpoint holds the
source offsets, so a restarted job resumes with the first micro-batch not committed; the
batch it was in the middle of is replayed with the same row unique ids, and with
`--exactly-once` the broker drops what the first attempt already stored (docs/idempotence.md).
The source message's position travels in the properties `src_broker`, `src_queue` and
`src_offset`. Its progress shows as the lag of consumer group `spark-relay-<source>-<sink>`
(`tidemq group describe`). Runs until stopped (SIGTERM/SIGINT stop the query).
"""

from __future__ import annotations

import argparse
import sys

from tidemq.analytics.jobs import job_parser, job_session, run_until_stopped
from tidemq.client.message import SYSTEM_PROPERTIES
from tidemq.common import record

# The SDK's system properties are the sink's or the brokers' to set (ids, tags, keys, retry
# and transaction bookkeeping): not copied from the source message. The trace context is: the
# relayed message's journey goes on in the sink topic, in the same trace.
NOT_COPIED = tuple(sorted(SYSTEM_PROPERTIES - {record.PROP_TRACE_CONTEXT}))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = job_parser("relay", "Copy one TideMQ topic into another with Structured "
                        "Streaming.")
    parser.add_argument("--source", required=True, help="topic to read")
    parser.add_argument("--sink", required=True, help="topic to write")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=256, help="records per send")
    parser.add_argument("--exactly-once", action="store_true",
                        help="idempotent sends: a replayed micro-batch stores nothing twice")
    return parser.parse_args(argv)


def relay_frame(spark, args: argparse.Namespace):
    from pyspark.sql import functions as F

    source = (spark.readStream.format("tidemq").option("namesrv", args.namesrv)
              .option("topic", args.source).option("startingOffsets", args.starting_offsets)
              .option("maxOffsetsPerTrigger", str(args.max_offsets_per_trigger))
              .option("progressGroup", f"spark-relay-{args.source}-{args.sink}").load())
    user = F.map_filter("properties",
                        lambda k, _: ~k.isin(*NOT_COPIED))
    position = F.create_map(F.lit("src_broker"), F.col("broker"),
                            F.lit("src_queue"), F.col("queue_id").cast("string"),
                            F.lit("src_offset"), F.col("queue_offset").cast("string"))
    return source.select(F.col("body").alias("value"), F.col("tag"),
                         F.array_join("keys", " ").alias("key"),
                         F.map_concat(user, position).alias("properties"))


def start(spark, args: argparse.Namespace):
    return (relay_frame(spark, args).writeStream.format("tidemq")
            .option("namesrv", args.namesrv).option("topic", args.sink)
            .option("exactlyOnce", str(args.exactly_once).lower())
            .option("batchSize", str(args.batch_size))
            .option("checkpointLocation", args.checkpoint)
            .queryName(f"relay-{args.source}-{args.sink}").start())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = job_session(f"tidemq-relay-{args.source}", args, {"spark.ui.enabled": "false"})
    query = start(spark, args)
    print(f"relay: query {query.id} {args.source} -> {args.sink} "
          f"(exactly once: {args.exactly_once})", flush=True)
    return run_until_stopped("relay", spark, [query])


if __name__ == "__main__":
    sys.exit(main())
