"""Streaming job: windowed revenue per region from an `orders` topic, with a watermark.

    python -m tidemq.analytics.revenue --namesrv 127.0.0.1:9876 --orders orders \
        --output-topic revenue --output-parquet /data/revenue --checkpoint /data/revenue-ck \
        [--master local[*]] [--window "1 minute"] [--watermark "30 seconds"]

An order is a JSON body `{"order_id": "o-1", "region": "eu", "amount": 12.5,
"ts": 1767225600000}` (`ts`: event time, epoch milliseconds). Revenue is summed per region
and tumbling event-time window; the watermark (`--watermark` behind the newest event time
seen) closes a window, which is then emitted once (append mode) — an order arriving after
its window closed is dropped, as in any Structured Streaming aggregation. Results go to a
topic (key = region, tag = region, JSON body with window_start, window_end, region,
revenue, orders; exactly once through idempotent sends) and to Parquet (Spark's file sink,
exactly once through its own log), as two queries over the same source, each with its own
checkpoint under `--checkpoint`.
"""

from __future__ import annotations

import argparse
import sys

from tidemq.analytics.jobs import job_parser, job_session, run_until_stopped

ORDER_SCHEMA = "order_id string, region string, amount double, ts long"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = job_parser(
        "revenue", "Windowed revenue per region from an orders topic (Structured Streaming).")
    parser.add_argument("--orders", default="orders", help="topic of order events")
    parser.add_argument("--output-topic", required=True, help="topic the windows go to")
    parser.add_argument("--output-parquet", required=True, help="Parquet directory")
    parser.add_argument("--window", default="1 minute", help="tumbling window length")
    parser.add_argument("--watermark", default="30 seconds",
                        help="how late an order may arrive and still count")
    return parser.parse_args(argv)


def revenue_frame(spark, args: argparse.Namespace):
    """The windowed aggregation: (window_start, window_end, region, revenue, orders)."""
    from pyspark.sql import functions as F

    orders = (spark.readStream.format("tidemq").option("namesrv", args.namesrv)
              .option("topic", args.orders).option("startingOffsets", args.starting_offsets)
              .load()
              .select(F.from_json(F.col("body").cast("string"), ORDER_SCHEMA).alias("o"))
              .select("o.*")
              .where(F.col("region").isNotNull() & F.col("amount").isNotNull()
                     & F.col("ts").isNotNull())
              .withColumn("event_time", F.timestamp_millis("ts")))
    return (orders.withWatermark("event_time", args.watermark)
            .groupBy(F.window("event_time", args.window), "region")
            .agg(F.sum("amount").alias("revenue"), F.count(F.lit(1)).alias("orders"))
            .select(F.col("window.start").alias("window_start"),
                    F.col("window.end").alias("window_end"), "region", "revenue", "orders"))


def start(spark, args: argparse.Namespace) -> list:
    """Start the topic query and the Parquet query; both append closed windows only."""
    from pyspark.sql import functions as F

    windows = revenue_frame(spark, args)
    to_topic = (windows.select(F.col("region").alias("key"), F.col("region").alias("tag"),
                               F.to_json(F.struct(
                                   F.date_format("window_start", "yyyy-MM-dd'T'HH:mm:ss'Z'")
                                   .alias("window_start"),
                                   F.date_format("window_end", "yyyy-MM-dd'T'HH:mm:ss'Z'")
                                   .alias("window_end"),
                                   "region", "revenue", "orders")).alias("value"))
                .writeStream.format("tidemq").outputMode("append")
                .option("namesrv", args.namesrv).option("topic", args.output_topic)
                .option("exactlyOnce", "true")
                .option("checkpointLocation", f"{args.checkpoint}/topic")
                .queryName("revenue-topic").start())
    to_parquet = (windows.writeStream.format("parquet").outputMode("append")
                  .option("path", args.output_parquet)
                  .option("checkpointLocation", f"{args.checkpoint}/parquet")
                  .queryName("revenue-parquet").start())
    return [to_topic, to_parquet]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    spark = job_session("tidemq-revenue", args)
    queries = start(spark, args)
    print(f"revenue: {args.orders} -> topic {args.output_topic} and {args.output_parquet}",
          flush=True)
    return run_until_stopped("revenue", spark, queries)


if __name__ == "__main__":
    sys.exit(main())
