"""Pop/ack throughput (client and HTTP) against the same run's offset pull consumer.

    uv run --frozen python bench/consumption/run.py --quick
    uv run --frozen python bench/consumption/run.py --messages 20000

Starts Redis, the config center, two name servers, one broker group and the HTTP gateway
(temporary dirs, loopback). Sends the messages once, then reads them all three ways, each as
its own group so every reader sees all of them: `PullConsumer` (the baseline: one Pull per 32
messages, nothing written back), `SimpleConsumer` (one Pop per 32, then one Ack RPC per message:
each pop and ack appends a revive-log record), the same with `ack_many` (one batch Ack per pop:
one revive-log append for the 32 ACK records), and the gateway (one HTTP pop per 32, then one
HTTP ack per message, or one batch ack of "receipt_handles"). Printed, not asserted: the gap to
pull is the ack round trips and the revive-log writes, which is what pop buys its per-message
invisibility with; the batch rows show how much of it was per-message round trips.
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


def pop_all(cluster, count: int, *, batch: bool = False) -> float:
    group = "bench-pop-batch" if batch else "bench-pop"
    started, seen = time.perf_counter(), 0
    with SimpleConsumer(cluster.namesrv_addrs, group, TOPIC) as consumer:
        while seen < count:
            received = consumer.receive(32, wait_s=1)
            if batch:
                failed = [r for r in consumer.ack_many(received) if not r.ok]
                if failed:
                    raise SystemExit(f"batch ack failed: {failed[0].error}")
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
        popped_batch = pop_all(cluster, count, batch=True)
        over_http = http_pop_all(cluster, min(http_count, count))
        over_http_batch = http_pop_all(cluster, min(http_count, count), batch=True)
    print(f"{'reader':<48}{'msgs/s':>10}")
    print(f"{'PullConsumer, 32 per pull (same run)':<48}{pulled:>10.0f}")
    for name, rate, per_message in (
            ("SimpleConsumer pop 32 + ack each", popped, None),
            ("SimpleConsumer pop 32 + ack_many (one batch)", popped_batch, popped),
            ("HTTP pop 32 + ack each (gateway, 2 workers)", over_http, None),
            ("HTTP pop 32 + one batch ack (gateway)", over_http_batch, over_http)):
        versus = f", {rate / per_message:.1f}x ack each" if per_message else ""
        print(f"{name:<48}{rate:>10.0f}  ({rate / pulled:.0%} of pull{versus})")
    print(f"({count} messages of 256 B; {min(http_count, count)} over HTTP; one broker group)")


if __name__ == "__main__":
    main()
