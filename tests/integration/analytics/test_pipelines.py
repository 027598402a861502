"""The windowed revenue pipeline (tidemq.analytics.revenue) on the real cluster: its topic and
Parquet outputs equal a pandas computation over the same orders."""

from __future__ import annotations

import json
import random
from argparse import Namespace

import pandas as pd
import pytest
from tidemq.common import record as rec

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ORDERS, OUTPUT = "orders-revenue", "revenue-windows"
BASE_MS = 1_767_225_600_000           # 2026-01-01T00:00:00Z, a window boundary
REGIONS = ("eu", "us", "ap")


def make_orders(seed: int = 7, count: int = 300) -> list[dict]:
    rng = random.Random(seed)
    return [{"order_id": f"o-{i}", "region": rng.choice(REGIONS),
             "amount": rng.randrange(1, 4000) / 4,      # quarters: sums are exact in binary
             "ts": BASE_MS + rng.randrange(0, 5 * 60_000)} for i in range(count)]


def send_orders(cluster, orders: list[dict]) -> None:
    per_queue: dict[int, list[bytes]] = {0: [], 1: []}
    for i, order in enumerate(orders):
        per_queue[i % 2].append(rec.encode_message(rec.OutgoingMessage(
            ORDERS, json.dumps(order).encode(), tags=order["region"]))[0])
    cluster.send(ORDERS, {q: r for q, r in per_queue.items() if r})


def expected_windows(orders: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(orders)
    frame["window_start"] = pd.to_datetime(frame["ts"] // 60_000 * 60_000, unit="ms")
    out = (frame.groupby(["window_start", "region"])
           .agg(revenue=("amount", "sum"), orders=("amount", "size")).reset_index())
    return out.sort_values(["window_start", "region"]).reset_index(drop=True)


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    frame = frame[["window_start", "region", "revenue", "orders"]].copy()
    frame["window_start"] = pd.to_datetime(frame["window_start"]).dt.tz_localize(None) \
        if getattr(frame["window_start"].dtype, "tz", None) else \
        pd.to_datetime(frame["window_start"])
    frame["window_start"] = frame["window_start"].astype("datetime64[ns]")
    frame["orders"] = frame["orders"].astype("int64")
    return frame.sort_values(["window_start", "region"]).reset_index(drop=True)


def test_windowed_revenue_matches_pandas(spark, cluster, tmp_path):
    from tidemq.analytics import revenue

    cluster.create_topic(ORDERS, 2)
    cluster.create_topic(OUTPUT, 1)
    orders = make_orders()
    send_orders(cluster, orders)
    args = Namespace(namesrv=cluster.namesrv.addr, orders=ORDERS, output_topic=OUTPUT,
                     output_parquet=str(tmp_path / "parquet"),
                     checkpoint=str(tmp_path / "checkpoint"), window="1 minute",
                     watermark="30 seconds", starting_offsets="earliest")
    queries = revenue.start(spark, args)
    try:
        for query in queries:
            query.processAllAvailable()
        # an order an hour later moves the watermark past every window above: they close
        send_orders(cluster, [{"order_id": "tick", "region": "zz", "amount": 0.0,
                               "ts": BASE_MS + 3_600_000}])
        for query in queries:
            query.processAllAvailable()
    finally:
        for query in queries:
            query.stop()

    expected = expected_windows(orders)
    parquet = normalise(spark.read.parquet(args.output_parquet).toPandas())
    pd.testing.assert_frame_equal(parquet, expected, check_dtype=False)

    topic_rows = [json.loads(bytes(row["body"])) for row in
                  spark.read.format("tidemq").option("namesrv", cluster.namesrv.addr)
                  .option("topic", OUTPUT).load().collect()]
    from_topic = pd.DataFrame(topic_rows)
    from_topic["window_start"] = pd.to_datetime(from_topic["window_start"]).dt.tz_localize(None)
    pd.testing.assert_frame_equal(normalise(from_topic), expected, check_dtype=False)


def test_source_parity_options(spark, cluster, tmp_path):
    """startingOffsetsByTimestamp, minPartitions, and progressGroup's commits."""
    from tidemq.v1 import broker_pb2

    topic = "parity"
    cluster.create_topic(topic, 2)
    send_orders_to = [rec.encode_message(rec.OutgoingMessage(topic, b"early-%d" % i))[0]
                      for i in range(6)]
    cluster.send(topic, {0: send_orders_to[:3], 1: send_orders_to[3:]})
    ends = cluster.queue_ends(topic)
    rows = (spark.read.format("tidemq").option("namesrv", cluster.namesrv.addr)
            .option("topic", topic).load().collect())
    cut = max(row["store_timestamp"] for row in rows)
    cut_ms = int(cut.timestamp() * 1000) + 1
    wait_ms = cut_ms + 5
    import time

    from tests.support.processes import wait_until
    wait_until(lambda: time.time() * 1000 > wait_ms, 5, message="the clock past the cut")
    late = [rec.encode_message(rec.OutgoingMessage(topic, b"late-%d" % i))[0] for i in range(4)]
    cluster.send(topic, {0: late[:2], 1: late[2:]})

    frame = (spark.read.format("tidemq").option("namesrv", cluster.namesrv.addr)
             .option("topic", topic).option("startingOffsetsByTimestamp", str(cut_ms))
             .option("minPartitions", "4").load())
    assert sorted(bytes(r["body"]) for r in frame.collect()) == [b"late-%d" % i for i in range(4)]
    assert frame.rdd.getNumPartitions() >= 4

    query = (spark.readStream.format("tidemq").option("namesrv", cluster.namesrv.addr)
             .option("topic", topic).option("startingOffsets", "earliest")
             .option("progressGroup", "spark-parity").load()
             .writeStream.format("noop").option("checkpointLocation", str(tmp_path / "ck"))
             .start())
    try:
        query.processAllAvailable()
        # Spark commits a batch's source offsets when it plans the next batch: one more
        # message makes batch 1, which commits batch 0's end. One message to one queue: a send
        # to each queue could be split over batches 1 and 2, and batch 2 commits batch 1's end
        cluster.send(topic, {0: [rec.encode_message(rec.OutgoingMessage(topic, b"next"))[0]]})
        query.processAllAvailable()
    finally:
        query.stop()
    reply = cluster.broker_client().call("QueryOffsets", broker_pb2.QueryOffsetsRequest(
        consumer_group="spark-parity", topic=topic))
    committed = {o.queue_id: o.offset for o in reply.offsets}
    assert committed == {q: ends[q] + 2 for q in ends}


def expected_sessions(clicks: list[dict], gap_ms: int) -> list[tuple]:
    """(user, start ms, end ms, clicks, pages): a gap of `gap_ms` or more ends a session."""
    sessions = []
    for user in sorted({c["user"] for c in clicks}):
        mine = sorted((c for c in clicks if c["user"] == user), key=lambda c: c["ts"])
        run = [mine[0]]
        for click in mine[1:] + [None]:
            if click is not None and click["ts"] - run[-1]["ts"] < gap_ms:
                run.append(click)
                continue
            sessions.append((user, run[0]["ts"], run[-1]["ts"] + gap_ms, len(run),
                             sorted({c["page"] for c in run})))
            if click is not None:
                run = [click]
    return sessions


def test_sessions_match_a_plain_computation(spark, cluster, tmp_path):
    from tidemq.analytics import sessions

    clicks_topic, output = "clicks", "click-sessions"
    cluster.create_topic(clicks_topic, 2)
    cluster.create_topic(output, 2)
    rng = random.Random(3)
    clicks, now = [], {u: BASE_MS for u in ("u1", "u2", "u3")}
    for _ in range(120):
        user = rng.choice(sorted(now))
        now[user] += rng.choice([5_000, 20_000, 40_000, 400_000])   # 400 s > the 5 min gap
        clicks.append({"user": user, "page": rng.choice(["/", "/a", "/b"]), "ts": now[user]})
    tick = {"user": "zz", "page": "/", "ts": max(now.values()) + 3_600_000}

    def send(items):
        cluster.send(clicks_topic, {0: [rec.encode_message(rec.OutgoingMessage(
            clicks_topic, json.dumps(c).encode()))[0] for c in items]})

    send(clicks)
    args = sessions.parse_args(["--namesrv", cluster.namesrv.addr, "--clicks", clicks_topic,
                                "--output-topic", output, "--checkpoint",
                                str(tmp_path / "ck"), "--gap", "5 minutes",
                                "--watermark", "1 minute"])
    query = sessions.start(spark, args)
    try:
        query.processAllAvailable()
        send([tick])
        query.processAllAvailable()
    finally:
        query.stop()
    rows = (spark.read.format("tidemq").option("namesrv", cluster.namesrv.addr)
            .option("topic", output).load().collect())
    got = sorted((s["user"], int(pd.Timestamp(s["session_start"]).timestamp() * 1000),
                  int(pd.Timestamp(s["session_end"]).timestamp() * 1000), s["clicks"],
                  s["pages"]) for s in (json.loads(bytes(r["body"])) for r in rows))
    assert got == expected_sessions(clicks, 300_000)
    by_user = {}
    for row in rows:   # message_group = user: one user's sessions share one queue
        by_user.setdefault(row["keys"][0], set()).add(row["queue_id"])
    assert all(len(queues) == 1 for queues in by_user.values())
