"""Pop/ack throughput (client and HTTP) against the same run's offset pull consumer.

    uv run --frozen python bench/consumption/run.py --quick
    uv run --frozen python bench/consumption/run.py --messages 20000

Starts etcd, Redis, the config center, two name servers, one broker group and the HTTP gateway
(temporary dirs, loopback). Sends the messages once, then reads them all three ways, each as
its own group so every reader sees all of them: `PullConsumer` (the baseline: one Pull per 32
messages, nothing written back), `SimpleConsumer` (one Pop per 32, then one Ack RPC per message:
each pop and ack appends a revive-log record), the same with `ack_many` (one batch Ack per pop:
one revive-log append for the 32 ACK records), and the gateway (one HTTP pop per 32, then one
HTTP ack per message, or one batch ack of "receipt_handles"). Printed, not asserted: the gap to
pull is the ack round trips and the revive-log writes, which is what pop buys its per-message
invisibility with; the batch rows show how much of it was per-message round trips. `ack_async` acks message by
message without waiting for each answer (the SDK coalesces what is acked while a call is on the
wire). The peer, in the same run on the same Redis: a Redis Streams consumer group read 32 at a
time with redis-py, XACK per entry and one XACK per read; the ratios are printed last. Beside
them, the physical limits of the transports (transport_floor.py): the rate of empty calls, one
thread, same run, over unary gRPC and over the wire protocol the SDK's pops, acks, sends and
pulls take (tidemq.common.wire).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: tests.support

from tidemq.client import (  # noqa: E402
    Message,
    MessageQueue,
    Producer,
    PullConsumer,
    SimpleConsumer,
)

from tests.support.cluster import running_cluster, wait_for_route  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
import transport_floor  # noqa: E402

TOPIC = "BenchPop"
QUEUES = 4


def pull_all(cluster, count: int) -> float:
    started, seen = time.perf_counter(), 0
    with PullConsumer(cluster.namesrv_addrs, consumer_group="bench-pull") as consumer:
        offsets = dict.fromkeys(range(QUEUES), 0)
        while seen < count:
            for q in range(QUEUES):
                result = consumer.pull(MessageQueue(TOPIC, "broker-a", q), offsets[q], 32)
                seen += len(result.messages)
                offsets[q] = result.next_offset
    return seen / (time.perf_counter() - started)


def pop_all(cluster, count: int, *, batch: bool = False, ack_async: bool = False) -> float:
    group = "bench-pop-batch" if batch else "bench-pop-async" if ack_async else "bench-pop"
    started, seen = time.perf_counter(), 0
    with SimpleConsumer(cluster.namesrv_addrs, group, TOPIC) as consumer:
        while seen < count:
            received = consumer.receive(32, wait_s=1)
            if batch:
                failed = [r for r in consumer.ack_many(received) if not r.ok]
                if failed:
                    raise SystemExit(f"batch ack failed: {failed[0].error}")
            elif ack_async:  # one ack per message, all answered before the next pop
                for acked in [consumer.ack_async(message) for message in received]:
                    acked.result()
            else:
                for message in received:
                    consumer.ack(message)
            seen += len(received)
    return seen / (time.perf_counter() - started)


def http_pop_all(cluster, count: int, *, batch: bool = False) -> float:
    base = f"{cluster.gateway_url}/v1/groups/bench-http{'-batch' if batch else ''}/topics/{TOPIC}"
    started, seen = time.perf_counter(), 0
    with requests.Session() as http:
        while seen < count:
            popped = http.post(f"{base}/pop", json={"max": 32, "wait_ms": 1000}, timeout=30)
            popped.raise_for_status()
            handles = [message["receipt_handle"] for message in popped.json()["messages"]]
            if batch and handles:
                acked = http.post(f"{base}/ack", json={"receipt_handles": handles}, timeout=30)
                acked.raise_for_status()
                if not all(r["acked"] for r in acked.json()["results"]):
                    raise SystemExit(f"batch ack failed: {acked.json()}")
            for handle in [] if batch else handles:
                http.post(f"{base}/ack", json={"receipt_handle": handle},
                          timeout=30).raise_for_status()
            seen += len(handles)
    return seen / (time.perf_counter() - started)


def redis_streams_groups(url: str, count: int) -> tuple[float, float]:
    """The peer: a Redis Streams consumer group doing the same work with redis-py on the
    Redis this run started (XREADGROUP 32, then XACK each entry / one XACK per read)."""
    import redis

    client = redis.Redis.from_url(url)
    client.delete("bench-pop")
    for start in range(0, count, 256):
        pipe = client.pipeline(transaction=False)
        for _ in range(min(256, count - start)):
            pipe.xadd("bench-pop", {"b": b"x" * 256})
        pipe.execute()
    rates = []
    for group, each in (("each", True), ("batch", False)):
        client.xgroup_create("bench-pop", group, id="0")
        started, seen = time.perf_counter(), 0
        while seen < count:
            reply = client.xreadgroup(group, "c1", {"bench-pop": ">"}, count=32, block=1000)
            ids = [entry_id for entry_id, _ in reply[0][1]] if reply else []
            if each:
                for entry_id in ids:
                    client.xack("bench-pop", group, entry_id)
            elif ids:
                client.xack("bench-pop", group, *ids)
            seen += len(ids)
        rates.append(seen / (time.perf_counter() - started))
    client.delete("bench-pop")
    return rates[0], rates[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=20_000)
    parser.add_argument("--http-messages", type=int, default=3_000)
    parser.add_argument("--quick", action="store_true", help="2000 messages, 500 over HTTP")
    args = parser.parse_args()
    count, http_count = (2_000, 500) if args.quick else (args.messages, args.http_messages)
    with tempfile.TemporaryDirectory(prefix="bench-pop-") as tmp, \
            running_cluster(Path(tmp), broker_names=("broker-a",)) as cluster:
        from tidemq.configclient.client import ConfigClient
        from tidemq.configclient.topics import TopicDefinitions

        with ConfigClient(cluster.config_center.addr) as config:
            TopicDefinitions(config).create(TOPIC, QUEUES)
        wait_for_route(cluster, TOPIC, 1)
        cluster.start_gateway(workers=2)
        with Producer(cluster.namesrv_addrs) as producer:
            for start in range(0, count, 256):
                producer.send_many([Message(TOPIC, b"x" * 256)
                                    for _ in range(min(256, count - start))])
        pulled = pull_all(cluster, count)
        popped = pop_all(cluster, count)
        popped_async = pop_all(cluster, count, ack_async=True)
        popped_batch = pop_all(cluster, count, batch=True)
        over_http = http_pop_all(cluster, min(http_count, count))
        over_http_batch = http_pop_all(cluster, min(http_count, count), batch=True)
        redis_each, redis_batch = redis_streams_groups(cluster.redis.url, count)
        floor = transport_floor.unary_calls_per_s()
        wire_floor = transport_floor.wire_calls_per_s()
    print(f"{'reader':<48}{'msgs/s':>10}")
    print(f"{'PullConsumer, 32 per pull (same run)':<48}{pulled:>10.0f}")
    for name, rate, per_message in (
            ("SimpleConsumer pop 32 + ack each", popped, None),
            ("SimpleConsumer pop 32 + ack_many (one batch)", popped_batch, popped),
            ("HTTP pop 32 + ack each (gateway, 2 workers)", over_http, None),
            ("HTTP pop 32 + one batch ack (gateway)", over_http_batch, over_http)):
        versus = f", {rate / per_message:.1f}x ack each" if per_message else ""
        print(f"{name:<48}{rate:>10.0f}  ({rate / pulled:.0%} of pull{versus})")
    print(f"{'SimpleConsumer pop 32 + ack_async each':<48}{popped_async:>10.0f}  "
          f"({popped_async / pulled:.0%} of pull, {popped_async / popped:.1f}x ack each)")
    print(f"{'Redis Streams XREADGROUP 32 + XACK each':<48}{redis_each:>10.0f}")
    print(f"{'Redis Streams XREADGROUP 32 + one XACK':<48}{redis_batch:>10.0f}")
    print(f"{'empty unary gRPC call, one thread (same run)':<48}{floor:>10.0f}  calls/s "
          f"(the SDK's pops and acks take the wire protocol, next line)")
    print(f"{'empty wire-protocol call, one thread (same run)':<48}{wire_floor:>10.0f}  calls/s: "
          f"pop 32 + batch ack cannot pass {16 * wire_floor:.0f} msgs/s, a blocking ack each "
          f"{wire_floor:.0f}")
    for name, ours, peer in (
            ("ack each (blocking) / XACK each", popped, redis_each),
            ("ack_async each / XACK each", popped_async, redis_each),
            ("ack_many / one XACK", popped_batch, redis_batch),
            ("HTTP batch ack / SDK ack_many", over_http_batch, popped_batch)):
        print(f"ratio {name:<42}{ours / peer:>9.2f}x")
    print(f"({count} messages of 256 B; {min(http_count, count)} over HTTP; one broker group)")


if __name__ == "__main__":
    main()
