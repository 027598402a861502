"""Config-center benchmark: puts/s, gets/s and watch latency against a raw redis-py baseline.

    uv run --frozen python bench/config/run.py --quick
    uv run --frozen python bench/config/run.py --ops 5000 --threads 4
    uv run --frozen python bench/config/run.py --quick --replicated

It starts its own redis-server (append-only, ephemeral port, temp dir) and one config-center
process unless --redis-url / --config-center point at running ones. The baseline performs the
same operations straight on Redis in the same run: SET for put, GET for get, XADD + XREAD
BLOCK for watch delivery, so the table shows what the service layer (gRPC, Lua, event log)
costs on top of Redis itself.

`--replicated` measures what a replica's acknowledgement costs instead: it starts a master
with two replicas (no Sentinel: nothing fails over during a run) and, in the same run, puts/s
through a config center that waits for one replica (`--redis-write-replicas 1`) and through
one that does not (a plain redis:// URL: 0), beside raw redis-py SET and
SET + `WAIT 1 1000` (one pipelined round trip) on the same master.
"""

from __future__ import annotations

import argparse
import os
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
from tests.support.small_redis_tier import small_tier  # noqa: E402

WAIT_TIMEOUT_MS = 1000  # the replicated baseline's WAIT 1 <ms>


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
    parser.add_argument("--replicated", action="store_true",
                        help="puts/s with and without a replica's acknowledgement, on a "
                             "master with two replicas it starts")
    args = parser.parse_args()
    if args.quick:
        args.ops, args.watch_events = 400, 100
    if args.replicated:
        with tempfile.TemporaryDirectory(prefix="tidemq-bench-") as tmp:
            run_replicated(args, Path(tmp))
        return
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



# -- --replicated --------------------------------------------------------------------------

def run_replicated(args: argparse.Namespace, tmp: Path) -> None:
    started = []

    def config_center(*extra: str):
        started.append(start_service("tidemq.configcenter", [
            "--redis-url", tier.master.url, "--log-level", "warning", *extra], tmp))
        return started[-1].addr

    with small_tier(tmp / "tier", replicas=2, sentinel=False) as tier:
        try:
            plain = config_center()
            acked = config_center("--redis-write-replicas", "1")
            rows, missed = replicated_rates(args, tier.master.url, plain, acked)
        finally:
            for service in started:
                service.stop()
        replicas = ", ".join(str(r.port) for r in tier.replicas)
        print(f"replicated tier: master 127.0.0.1:{tier.master.port} + replicas on ports "
              f"{replicas} (same run)  ops={args.ops}"
              + ("  (--quick: figures vary by a third from run to run)" if args.quick else ""))
    print_replicated(rows, missed)


def replicated_rates(args: argparse.Namespace, redis_url: str, plain_addr: str,
                     acked_addr: str) -> tuple[list, int]:
    raw = redis.Redis.from_url(redis_url)
    value = b"x" * 100
    missed: list[int] = []   # WAITs that timed out: no replica acknowledged in time

    def set_wait(i: int) -> None:
        pipe = raw.pipeline(transaction=False)
        pipe.set(f"bench:k{i % 100}", value)
        pipe.wait(1, WAIT_TIMEOUT_MS)
        if pipe.execute()[1] < 1:
            missed.append(i)

    clients = [ConfigClient(plain_addr, timeout=10), ConfigClient(acked_addr, timeout=10)]
    rows = []
    try:
        for client in clients:
            client.put("/bench/warmup", value)
        for threads in sorted({1, args.threads}):
            plain = rate(args.ops, threads,
                         lambda i: clients[0].put(f"/bench/k{i % 100}", value))
            raw_set = rate(args.ops, threads, lambda i: raw.set(f"bench:k{i % 100}", value))
            acked = rate(args.ops, threads, lambda i: clients[1].put(
                f"/bench/k{i % 100}", value))
            raw_wait = rate(args.ops, threads, set_wait)
            rows += [(f"put/s unreplicated ({threads} thr)", plain, raw_set, threads),
                     (f"put/s replica-acked ({threads} thr)", acked, raw_wait, threads)]
    finally:
        for client in clients:
            client.close()
    return rows, len(missed)


def print_replicated(rows: list, missed: int) -> None:
    print(f"{'measure':<30}{'config-center':>15}{'raw redis-py':>14}{'ratio':>8}")
    for name, ours, baseline, _ in rows:
        print(f"{name:<30}{ours:>15,.0f}{baseline:>14,.0f}{ours / baseline:>8.2f}")
    print(f"  raw redis-py: SET, and SET + WAIT 1 {WAIT_TIMEOUT_MS} pipelined; "
          f"WAITs no replica acknowledged in time: {missed}")
    costs = [(threads, ours, acked, raw_set, raw_wait) for (_, ours, raw_set, threads),
             (_, acked, raw_wait, _) in zip(rows[::2], rows[1::2], strict=True)]
    print("replica ack costs (same run): raw redis-py " + ", ".join(
        f"{raw_wait / raw_set - 1:+.0%} at {t} thr" for t, _, _, raw_set, raw_wait in costs)
        + "; config-center " + ", ".join(
            f"{acked / ours - 1:+.0%} at {t} thr" for t, ours, acked, _, _ in costs))
    _, cc, cc_acked, raw_set, raw_wait = costs[0]
    us = {name: 1e6 / value for name, value in
          (("set", raw_set), ("wait", raw_wait), ("cc", cc), ("acked", cc_acked))}
    print(f"what bounds it ({costs[0][0]} thread, µs per put): raw SET {us['set']:.0f}, one "
          f"loopback round trip to the master; SET+WAIT {us['wait']:.0f} "
          f"({us['wait'] - us['set']:+.0f}): the master asks its replicas for their offset "
          "(REPLCONF GETACK) and waits for the first answer, one master→replica→master round "
          f"trip more; config-center put {us['cc']:.0f}: a gRPC call into a Python server "
          "plus the store's Lua script (revision, event log, history)"
          + _acked_bound(us["cc"], us["acked"]))
    top = costs[-1]
    if len(costs) > 1 and top[3] < 1.2 * raw_set:
        print(f"More threads do not raise the raw figures ({top[0]} thr: {top[3]:,.0f} SET/s): "
              "the Python client (redis-py under the GIL, on "
              f"{os.cpu_count()} cores shared with Redis and the config centers) bounds them, "
              "not Redis.")


def _acked_bound(put_us: float, acked_us: float) -> str:
    extra = acked_us - put_us
    if abs(extra) < 0.05 * put_us:   # run-to-run noise of a quick run is about this much
        return (f"; replica-acked {acked_us:.0f} ({extra:+.0f}): the store's replica "
                "confirmation (WAIT) is lost in this run's noise beside the put itself.")
    return (f"; replica-acked {acked_us:.0f} ({extra:+.0f}): the store's replica confirmation "
            "(WAIT).")


if __name__ == "__main__":
    main()
