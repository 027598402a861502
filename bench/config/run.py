"""Config-center benchmark: puts/s, gets/s and watch latency against a raw redis-py baseline.

    uv run --frozen python bench/config/run.py --quick
    uv run --frozen python bench/config/run.py --ops 5000 --threads 4

It starts its own redis-server (append-only, ephemeral port, temp dir) and one config-center
process unless --redis-url / --config-center point at running ones. The baseline performs the
same operations straight on Redis in the same run: SET for put, GET for get, XADD + XREAD
BLOCK for watch delivery, so the table shows what the service layer (gRPC, Lua, event log)
costs on top of Redis itself.
"""

from __future__ import annotations

import argparse
import queue
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import redis

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: tests.support

from tidemq.configclient.client import ConfigClient  # noqa: E402

from tests.support.processes import start_redis, start_service  # noqa: E402


def rate(ops: int, threads: int, operation: Callable[[int], object]) -> float:
    """Operations per second doing `operation(i)` for i < ops on `threads` threads."""
    started = time.perf_counter()
    if threads == 1:
        for i in range(ops):
            operation(i)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(operation, range(ops)))
    return ops / (time.perf_counter() - started)


RECEIVE_TIMEOUT_S = 10.0  # a change not delivered by then is counted as lost


def latencies(count: int, send: Callable[[int], object],
              receive: Callable[[int], bool]) -> tuple[list[float], int]:
    """Send `count` stamped changes one at a time: (send→delivery times in ms, changes lost).

    `receive(i)` answers whether change i arrived within RECEIVE_TIMEOUT_S; a lost change is
    counted, not timed (it would be a meaningless 10 s sample and hide the loss).
    """
    results: list[float] = []
    lost = 0
    for i in range(count):
        started = time.perf_counter_ns()
        send(i)
        if receive(i):
            results.append((time.perf_counter_ns() - started) / 1e6)
        else:
            lost += 1
    return results, lost


def _await(stamp: int, take: Callable[[float], str | None]) -> bool:
    """Take deliveries until the one stamped `stamp` (later than any before it) or time out."""
    deadline = time.monotonic() + RECEIVE_TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0:
        if take(left) == str(stamp):
            return True
    return False


def config_center_latency(client: ConfigClient, count: int) -> tuple[list[float], int]:
    with client.watch("/bench/watch/") as watch:
        if not watch.wait_established(RECEIVE_TIMEOUT_S):
            raise TimeoutError("watch not established within 10 s")

        def take(timeout: float) -> str | None:
            event = watch.poll(timeout)
            return None if event is None else event.kv.text

        return latencies(count, lambda i: client.put("/bench/watch/k", str(i)),
                         lambda i: _await(i, take))


def redis_latency(redis_url: str, count: int) -> tuple[list[float], int]:
    """Baseline: XADD on one connection, XREAD BLOCK on another, as the store's watch does."""
    raw, reader = redis.Redis.from_url(redis_url), redis.Redis.from_url(redis_url)
    stream = "bench:stream"
    raw.delete(stream)
    last = [raw.xadd(stream, {"start": "1"})]
    delivered: queue.Queue[str] = queue.Queue()

    def tail() -> None:
        while True:
            reply = reader.xread({stream: last[0]}, block=10_000, count=100)
            for entry_id, fields in reply[0][1] if reply else []:
                last[0] = entry_id
                if fields.get(b"stop"):
                    return
                delivered.put(fields[b"v"].decode())

    def take(timeout: float) -> str | None:
        try:
            return delivered.get(timeout=timeout)
        except queue.Empty:
            return None

    thread = threading.Thread(target=tail, daemon=True)
    thread.start()
    result = latencies(count, lambda i: raw.xadd(stream, {"v": str(i)}),
                       lambda i: _await(i, take))
    raw.xadd(stream, {"stop": "1"})
    thread.join(10)
    return result


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small run (a few seconds)")
    parser.add_argument("--ops", type=int, default=3000, help="puts and gets per measurement")
    parser.add_argument("--threads", type=int, default=4, help="concurrent callers")
    parser.add_argument("--watch-events", type=int, default=500)
    parser.add_argument("--redis-url", default="", help="use this Redis instead of starting one")
    parser.add_argument("--config-center", default="", help="use this config center (same Redis)")
    args = parser.parse_args()
    if args.quick:
        args.ops, args.watch_events = 400, 100
    with tempfile.TemporaryDirectory(prefix="tidemq-bench-") as tmp:
        redis_server = service = None
        redis_url = args.redis_url
        if not redis_url:
            redis_server = start_redis(Path(tmp))
            redis_url = redis_server.url
        addr = args.config_center
        if not addr:
            service = start_service("tidemq.configcenter",
                                    ["--redis-url", redis_url, "--log-level", "warning"], Path(tmp))
            addr = service.addr
        try:
            run(args, redis_url, addr)
        finally:
            if service is not None:
                service.stop()
            if redis_server is not None:
                redis_server.stop()


def run(args: argparse.Namespace, redis_url: str, addr: str) -> None:
    raw = redis.Redis.from_url(redis_url)
    value = b"x" * 100
    rows = []
    with ConfigClient(addr, timeout=10) as client:
        client.put("/bench/warmup", value)
        for threads in sorted({1, args.threads}):
            cc_put = rate(args.ops, threads, lambda i: client.put(f"/bench/k{i % 100}", value))
            raw_put = rate(args.ops, threads, lambda i: raw.set(f"bench:k{i % 100}", value))
            cc_get = rate(args.ops, threads, lambda i: client.get(f"/bench/k{i % 100}"))
            raw_get = rate(args.ops, threads, lambda i: raw.get(f"bench:k{i % 100}"))
            rows += [(f"put/s ({threads} thr)", cc_put, raw_put),
                     (f"get/s ({threads} thr)", cc_get, raw_get)]
        cc_lat, cc_lost = config_center_latency(client, args.watch_events)
    raw_lat, raw_lost = redis_latency(redis_url, args.watch_events)
    print(f"config center {addr}  redis {redis_url}  ops={args.ops} "
          f"watch_events={args.watch_events}")
    print(f"{'measure':<24}{'config-center':>16}{'raw redis-py':>16}{'ratio':>8}")
    for name, ours, baseline in rows:
        print(f"{name:<24}{ours:>16,.0f}{baseline:>16,.0f}{ours / baseline:>8.2f}")
    print(f"{'watch events lost':<24}{cc_lost:>16}{raw_lost:>16}")
    if not cc_lat or not raw_lat:
        print("watch latency: no delivered events to time")
        return
    for label, fraction in (("p50", 0.5), ("p99", 0.99)):
        ours, baseline = percentile(cc_lat, fraction), percentile(raw_lat, fraction)
        print(f"{'watch latency ' + label + ' ms':<24}{ours:>16.2f}{baseline:>16.2f}"
              f"{ours / baseline:>8.1f}")
    print(f"{'watch latency mean ms':<24}{statistics.mean(cc_lat):>16.2f}"
          f"{statistics.mean(raw_lat):>16.2f}")


if __name__ == "__main__":
    main()
