"""Produce and receive throughput through gateway-grpc with the official RocketMQ 5 Python
client, against the same run's native TideMQ client figures (the proxy's cost as a ratio).

    uv run --frozen python bench/rocketmq_compat/run.py --quick
    uv run --frozen python bench/rocketmq_compat/run.py --messages 5000

Starts etcd, Redis, the config center, two name servers, one broker group and gateway-grpc
(temporary dirs, loopback). Produce: one thread of synchronous sends, then `--window` asynchronous sends kept
in flight (a sliding window), each way. Receive: pop 32 then ack each message, each way in its own
consumer group (each reads half of what was stored). Then the latency from a transaction's commit
until a waiting SimpleConsumer holds its message (target: p99 < 1 s), beside the same run's latency
from a plain send's answer to its receipt. Printed, not asserted. What bounds the gateway: every
call is one more gRPC hop and the gateway re-encodes protobuf messages into CommitLog records (and
back), all in one Python process; the official client adds its own asyncio loop thread and per-call
signing.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: tests.support

import rocketmq  # noqa: E402
from tidemq.client import (  # noqa: E402
    Message,
    Producer,
    SimpleConsumer,
    TransactionProducer,
    TransactionResolution,
)

from bench.rocketmq_compat.ceiling import CeilingServer  # noqa: E402
from bench.rocketmq_compat.floor import GATEWAY_WORKERS, FloorServer  # noqa: E402
from tests.support.cluster import running_cluster, wait_for_route  # noqa: E402

TOPIC = "BenchRmq"
VIS_TOPIC = "BenchVisibility"
QUEUES = 4
BODY = b"x" * 256


def rmq_message() -> rocketmq.Message:
    message = rocketmq.Message()
    message.topic, message.body = TOPIC, BODY
    return message


def rate(count: int, started: float) -> float:
    return count / (time.perf_counter() - started)


def in_flight(send_async, count: int, window: int) -> None:
    """`count` sends with `window` of them on the wire at all times: a send starts as soon as
    one completes (a sliding window, as a producer with max in-flight requests runs), not in
    lock-step rounds of `window` that leave the pipe half empty on average."""
    slots = threading.Semaphore(window)
    futures = []
    for _ in range(count):
        slots.acquire()
        future = send_async()
        future.add_done_callback(lambda _: slots.release())
        futures.append(future)
    for future in futures:
        future.result(timeout=30)


def native_produce(namesrv: str, count: int, window: int) -> tuple[float, float, float]:
    """Sync, async (the default: one batch per broker group on the wire, a second once a full
    batch waits), async with one batch on the wire for the whole producer (`async_workers=1`,
    the bound the default should reach on one group)."""
    with Producer(namesrv) as producer:
        started = time.perf_counter()
        for _ in range(count):
            producer.send(Message(TOPIC, BODY))
        sync = rate(count, started)
        started = time.perf_counter()
        in_flight(lambda: producer.send_async(Message(TOPIC, BODY)), count, window)
        default_async = rate(count, started)
    with Producer(namesrv, async_workers=1) as producer:
        started = time.perf_counter()
        in_flight(lambda: producer.send_async(Message(TOPIC, BODY)), count, window)
        return sync, default_async, rate(count, started)


def rmq_produce(config, count: int, window: int) -> tuple[float, float]:
    producer = rocketmq.Producer(config, (TOPIC,))
    producer.startup()
    try:
        started = time.perf_counter()
        for _ in range(count):
            producer.send(rmq_message())
        sync = rate(count, started)
        started = time.perf_counter()
        in_flight(lambda: producer.send_async(rmq_message()), count, window)
        return sync, rate(count, started)
    finally:
        producer.shutdown()


def native_receive(namesrv: str, count: int) -> float:
    seen = 0
    with SimpleConsumer(namesrv, "bench-native", TOPIC) as consumer:
        started = time.perf_counter()
        while seen < count:
            for received in consumer.receive(32, wait_s=1):
                consumer.ack(received)
                seen += 1
        return rate(seen, started)


def rmq_receive(config, count: int) -> float:
    consumer = rocketmq.SimpleConsumer(config, "bench-rmq", {TOPIC: rocketmq.FilterExpression()},
                                       1)
    consumer.startup()
    seen = 0
    try:
        started = time.perf_counter()
        while seen < count:
            for received in consumer.receive(32, 30) or []:
                consumer.ack(received)
                seen += 1
        return rate(seen, started)
    finally:
        consumer.shutdown()


def visibility_ms(namesrv: str, count: int) -> tuple[list[float], list[float]]:
    """(commit -> received, send answered -> received) in ms, one message at a time, with a
    SimpleConsumer long-polling the whole time (topic VIS_TOPIC)."""
    received: dict[bytes, float] = {}
    stop = threading.Event()

    def consume() -> None:
        with SimpleConsumer(namesrv, "bench-visibility", VIS_TOPIC) as consumer:
            while not stop.is_set():
                for message in consumer.receive(32, wait_s=1):
                    received[message.body] = time.perf_counter()
                    consumer.ack(message)

    reader = threading.Thread(target=consume, daemon=True)
    reader.start()

    def wait_for(body: bytes, since: float) -> float:
        deadline = time.perf_counter() + 30
        while body not in received:
            if time.perf_counter() > deadline:
                raise TimeoutError(f"{body!r} not received within 30 s")
            time.sleep(0.0005)   # a poll interval of this measuring loop, far below its figures
        return (received[body] - since) * 1000

    committed, plain = [], []
    with TransactionProducer(namesrv, producer_group="bench-visibility") as txn, \
            Producer(namesrv) as producer:
        producer.send(Message(VIS_TOPIC, b"warm-up"))
        wait_for(b"warm-up", time.perf_counter())
        for i in range(count):
            prepared = txn.prepare(Message(VIS_TOPIC, f"t{i}".encode()))
            started = time.perf_counter()
            txn.end(prepared, TransactionResolution.COMMIT)
            committed.append(wait_for(f"t{i}".encode(), started))
            producer.send(Message(VIS_TOPIC, f"p{i}".encode()))
            plain.append(wait_for(f"p{i}".encode(), time.perf_counter()))
    stop.set()
    reader.join(5)
    return committed, plain


def p99(values: list[float]) -> float:
    return sorted(values)[min(len(values) - 1, int(len(values) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=5_000, help="per way and per mode")
    parser.add_argument("--window", type=int, default=64, help="async sends in flight")
    parser.add_argument("--quick", action="store_true", help="500 messages per way and mode")
    parser.add_argument("--gateway-only", action="store_true",
                        help="the official client and the floor only (no native figures, no "
                        "visibility latency): for profiling gateway-grpc")
    args = parser.parse_args()
    count = 500 if args.quick else args.messages
    logging.getLogger("rocketmq-python-client").setLevel(logging.WARNING)
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-rmq-"))
        cluster = stack.enter_context(running_cluster(Path(tmp), broker_names=("broker-a",)))
        from tidemq.configclient.client import ConfigClient
        from tidemq.configclient.topics import TopicDefinitions

        with ConfigClient(cluster.config_center.addr) as config_client:
            TopicDefinitions(config_client).create(TOPIC, QUEUES)
            TopicDefinitions(config_client).create(VIS_TOPIC, QUEUES)
        wait_for_route(cluster, TOPIC, 1)
        wait_for_route(cluster, VIS_TOPIC, 1)
        gateway = cluster.start("tidemq.gatewaygrpc", ["--namesrv-addrs", cluster.namesrv_addrs])
        config = rocketmq.ClientConfiguration(gateway.addr, rocketmq.Credentials(),
                                              request_timeout=10)
        floor = stack.enter_context(FloorServer())
        ceiling = rocketmq.ClientConfiguration(stack.enter_context(CeilingServer()).addr,
                                               rocketmq.Credentials(), request_timeout=10)
        ceilings = [rmq_produce(ceiling, count, args.window)[0]]
        floors = [(floor.sync_rate(count), floor.aio_threadsafe_rate(count))]
        total = 2 * count  # of the 5 * count stored: each group reads 2 * count of them
        if args.gateway_only:
            native_sync = native_async = native_one_batch = native_recv = None
            rmq_produce(config, total, args.window)   # what the receive reads
        else:
            native_sync, native_async, native_one_batch = native_produce(
                cluster.namesrv_addrs, count, args.window)
        rmq_sync, rmq_async = rmq_produce(config, count, args.window)
        floors.append((floor.sync_rate(count), floor.aio_threadsafe_rate(count)))
        if not args.gateway_only:
            native_recv = native_receive(cluster.namesrv_addrs, total)
        rmq_recv = rmq_receive(config, total)
        floors.append((floor.sync_rate(count), floor.aio_threadsafe_rate(count)))
        ceilings.append(rmq_receive(ceiling, total))
        if not args.gateway_only:
            committed, plain = visibility_ms(cluster.namesrv_addrs, 50 if args.quick else 500)
    floor_sync = statistics.median(f[0] for f in floors)
    floor_aio = statistics.median(f[1] for f in floors)
    rows = [("produce, sync, 1 thread", native_sync, rmq_sync),
            (f"produce, async, {args.window} in flight", native_async, rmq_async),
            ("  the same, 1 batch on the wire", native_one_batch, None),
            ("receive, pop 32 + ack each", native_recv, rmq_recv)]
    print(f"{'':<36}{'native TideMQ':>15}{'RocketMQ client':>17}{'ratio':>8}")
    print(f"{'':<36}{'(same run)':>15}{'via gateway-grpc':>17}")
    for name, native, rmq in rows:
        if native is None:
            if rmq is not None:
                print(f"{name:<36}{'-':>15}{rmq:>15.0f}/s")
        elif rmq is None:  # native only
            print(f"{name:<36}{native:>13.0f}/s{'-':>17}   (Producer(async_workers=1): one "
                  "batch on the wire for the whole producer; the default has one per group)")
        else:
            print(f"{name:<36}{native:>13.0f}/s{rmq:>15.0f}/s{rmq / native:>8.2f}")
    print(f"({count} messages of {len(BODY)} B per way and produce mode, {total} received per "
          "way; one broker group; ratio = gateway-grpc / native)")
    print(f"same-run floor, a bare Python grpc.server (ThreadPoolExecutor({GATEWAY_WORKERS}), "
          "the services' options) answering an empty unary call, 1 call in flight (the official "
          "client's concurrency for a sync send and an ack each), median of 3 between the "
          "phases above:")
    print(f"  sync client {floor_sync:,.0f}/s; grpc.aio on a loop thread (the official "
          f"client's stack) {floor_aio:,.0f}/s  "
          f"[{', '.join(f'{a:.0f}/{b:.0f}' for a, b in floors)}]")
    print("the official client against gateway-grpc's servicer over a proxy that answers at "
          "once (ceiling.py: no broker; the client's own limit): produce, sync "
          f"{ceilings[0]:,.0f}/s, receive, pop 32 + ack each {ceilings[1]:,.0f}/s")
    for name, value, top in (("produce, sync", rmq_sync, ceilings[0]),
                             ("receive, pop 32 + ack each", rmq_recv, ceilings[1])):
        print(f"  {name:<28} {value:>7,.0f}/s = {value / floor_sync:.2f}x the sync floor, "
              f"{value / floor_aio:.2f}x the aio floor (target >= 0.6x), "
              f"{value / top:.2f}x the client's ceiling")
    if args.gateway_only:
        return
    print(f"committed transaction visible to a waiting SimpleConsumer: median "
          f"{statistics.median(committed):.1f} ms, p99 {p99(committed):.1f} ms (target p99 < "
          f"1000 ms); same run, plain send answered -> received: median "
          f"{statistics.median(plain):.1f} ms, p99 {p99(plain):.1f} ms ({len(committed)} each)")


if __name__ == "__main__":
    main()
