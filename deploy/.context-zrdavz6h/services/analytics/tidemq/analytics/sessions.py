"""Streaming job: sessionise a click stream per user (event-time session windows).

    python -m tidemq.analytics.sessions --namesrv 127.0.0.1:9876 --clicks clicks \
        --output-topic sessions --checkpoint /data/sessions-ck [--master local[*]] \
        [--gap "5 minutes"] [--watermark "1 minute"]

A click is a JSON body `{"user": "u-1", "page": "/cart", "ts": 1767225600000}` (`ts`: event
time, epoch ms). A user's session is a run of clicks with gaps shorter than `--gap`
(Spark's `session_window`); once the watermark passes a session's end it is written once
(append mode, exactly once through idempotent sends) to the output topic: key and
message_group = the user (so one user's sessions stay in order on one queue), JSON body with
user, session_start, session_end, clicks, pages (distinct, sorted).
"""

from __future__ import annotations

import argparse
import sys

from tidemq.analytics.jobs import job_parser, job_session, run_until_stopped

CLICK_SCHEMA = "user string, page string, ts long"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = job_parser("sessions", "Per-user click sessions (Structured Streaming).")
    parser.add_argument("--clicks", default="clicks", help="topic of click events")
    parser.add_argument("--output-topic", required=True, help="topic the sessions go to")
    parser.add_argument("--gap", default="5 minutes", help="inactivity that ends a session")
    parser.add_argument("--watermark", default="1 minute",
                        help="how late a click may arrive and still count")
    return parser.parse_args(argv)


def sessions_frame(spark, args: argparse.Namespace):
    from pyspark.sql import functions as F

    clicks = (spark.readStream.format("tidemq").option("namesrv", args.namesrv)
              .option("topic", args.clicks).option("startingOffsets", args.starting_offsets)
              .load()
              .select(F.from_json(F.col("body").cast("string"), CLICK_SCHEMA).alias("c"))
              .select("c.*").where(F.col("user").isNotNull() & F.col("ts").isNotNull())
              .withColumn("event_time", F.timestamp_millis("ts")))
    return (clicks.withWatermark("event_time", args.watermark)
            .groupBy(F.session_window("event_time", args.gap), "user")
            .agg(F.count(F.lit(1)).alias("clicks"),
                 F.array_sort(F.collect_set("page")).alias("pages"))
            .select("user", F.col("session_window.start").alias("session_start"),
                    F.col("session_window.end").alias("session_end"), "clicks", "pages"))


def start(spark, args: argparse.Namespace):
    from pyspark.sql import functions as F

    stamp = "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"
    body = F.to_json(F.struct("user", F.date_format("session_start", stamp).alias("session_start"),
                              F.date_format("session_end", stamp).alias("session_end"),
                              "clicks", "pages"))
    return (sessions_frame(spark, args)
            .select(F.col("user").alias("key"), F.col("user").alias("message_group"),
                    body.alias("value"))
            .writeStream.format("tidemq").outputMode("append")
            .option("namesrv", args.namesrv).option("topic", args.output_topic)
            .option("exactlyOnce", "true").option("checkpointLocation", args.checkpoint)
            .queryName("sessions").start())


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = job_session("tidemq-sessions", args)
    query = start(spark, args)
    print(f"sessions: {args.clicks} -> {args.output_topic}", flush=True)
    return run_until_stopped("sessions", spark, [query])


if __name__ == "__main__":
    sys.exit(main())
