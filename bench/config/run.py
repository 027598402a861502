"""Config-center benchmark: writes/s, CAS/s, reads/s and watch latency beside a raw etcd client.

    uv run --frozen python bench/config/run.py --quick
    uv run --frozen python bench/config/run.py [--members 1] [--ops 3000] [--threads 4]

It starts an etcd cluster (3 members by default, `--members 1` for one; Debian's etcd-server
through tests/support/etcd.py: ephemeral ports, temp dirs) and one config center on it, unless
--etcd-endpoints / --config-center point at running ones. In the same run, at the same
concurrency, a raw etcd client — the generated v3 stubs (`tidemq.etcd`) on one channel to the
member the config center calls first — sends the very requests the config center's store
sends for each call, so the ratio is what the config center (client, gRPC hop, Python
servicer, store) costs on top of etcd itself:

- write: `ConfigClient.put` / etcd `Put` with `prev_kv`;
- CAS:   `put(expected_revision=R)` / a `Txn` comparing the key's mod revision with R, `Put`
         on success, `Range` of the key on failure. Each worker thread keeps its own key and
         the revision its last write returned, so no compare should fail; one that does is
         counted and printed;
- read:  `ConfigClient.get` / a linearizable `Range` of one key;
- watch: a watch of a prefix, then one put at a time: time from the put call's start until
         the watcher sees it (median, p99). A change not delivered within 10 s is counted as
         lost, not timed.
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

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: tests.support

from tidemq.configclient.client import ConfigClient  # noqa: E402
from tidemq.etcd import rpc_pb2 as etcd  # noqa: E402
from tidemq.etcd import rpc_pb2_grpc as etcd_grpc  # noqa: E402

from tests.support.etcd import EtcdCluster, start_etcd  # noqa: E402
from tests.support.processes import start_service  # noqa: E402

VALUE = b"x" * 100
KEYS = 100                  # writes and reads cycle over this many keys
RECEIVE_TIMEOUT_S = 10.0    # a change not delivered by then is counted as lost
CC, RAW = "/bench/cc/", "/bench/raw/"   # each side's keys


def rate(ops: int, threads: int, operation: Callable[[int, int], object]) -> float:
    """Operations per second doing `operation(worker, i)` for every i < ops on `threads`
    threads; worker w does i = w, w + threads, ... (so a worker can own keys)."""
    def work(worker: int) -> None:
        for i in range(worker, ops, threads):
            operation(worker, i)

    started = time.perf_counter()
    if threads == 1:
        work(0)
    else:
        with ThreadPoolExecutor(threads) as pool:
            list(pool.map(work, range(threads)))   # re-raises a worker's exception
    return ops / (time.perf_counter() - started)


class CasChains:
    """One compare-and-set chain per worker: worker w rewrites its own key, expecting the mod
    revision its previous write returned. `cas(key, expected)` answers (succeeded, revision):
    the new mod revision, or after a failed compare the key's current one, from which the
    chain goes on; failed compares are counted."""

    def __init__(self, prefix: str, workers: int, put: Callable[[str], int],
                 cas: Callable[[str, int], tuple[bool, int]]) -> None:
        self.keys = [f"{prefix}cas/{w}" for w in range(workers)]
        self.revisions = [put(key) for key in self.keys]   # each chain starts from a write
        self.cas = cas
        self.failed = 0

    def __call__(self, worker: int, _: int) -> None:
        succeeded, revision = self.cas(self.keys[worker], self.revisions[worker])
        self.revisions[worker] = revision
        if not succeeded:
            self.failed += 1   # only this worker touches its slot; += of ints under the GIL


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


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


# -- the config center ----------------------------------------------------------------------

class ConfigCenterSide:
    name = "config-center"

    def __init__(self, client: ConfigClient) -> None:
        self.client = client

    def write(self, _: int, i: int) -> None:
        self.client.put(f"{CC}k{i % KEYS}", VALUE)

    def read(self, _: int, i: int) -> None:
        self.client.get(f"{CC}k{i % KEYS}")

    def cas_chains(self, workers: int) -> CasChains:
        def cas(key: str, expected: int) -> tuple[bool, int]:
            result = self.client.put(key, VALUE, expected_revision=expected)
            return result.succeeded, (result.revision if result.succeeded
                                      else result.current_mod_revision)

        return CasChains(CC, workers, lambda key: self.client.put(key, VALUE).revision, cas)

    def watch_latency(self, count: int) -> tuple[list[float], int]:
        with self.client.watch(f"{CC}watch/") as watch:
            if not watch.wait_established(RECEIVE_TIMEOUT_S):
                raise TimeoutError("config-center watch not established within 10 s")

            def take(timeout: float) -> str | None:
                event = watch.poll(timeout)
                return None if event is None else event.kv.text

            return latencies(count, lambda i: self.client.put(f"{CC}watch/k", str(i)),
                             lambda i: _await(i, take))


# -- the peer: the etcd v3 API straight from the generated stubs ----------------------------

def prefix_end(prefix: bytes) -> bytes:
    """etcd's range_end for every key starting with `prefix` (ASCII prefixes here)."""
    return prefix[:-1] + bytes([prefix[-1] + 1])


class RawEtcdSide:
    """The requests ConfigStore sends for the same calls, on one channel to `endpoint`."""

    name = "raw etcd"

    def __init__(self, endpoint: str, timeout: float = 10.0) -> None:
        self.channel = grpc.insecure_channel(endpoint)
        self.kv = etcd_grpc.KVStub(self.channel)
        self.watcher = etcd_grpc.WatchStub(self.channel)
        self.timeout = timeout

    def close(self) -> None:
        self.channel.close()

    def put(self, key: str, value: bytes = VALUE) -> int:
        reply = self.kv.Put(etcd.PutRequest(key=key.encode(), value=value, prev_kv=True),
                            timeout=self.timeout)
        return reply.header.revision

    def write(self, _: int, i: int) -> None:
        self.put(f"{RAW}k{i % KEYS}")

    def read(self, _: int, i: int) -> None:
        self.kv.Range(etcd.RangeRequest(key=f"{RAW}k{i % KEYS}".encode()), timeout=self.timeout)

    def cas(self, key: str, expected: int) -> tuple[bool, int]:
        raw = key.encode()
        reply = self.kv.Txn(etcd.TxnRequest(
            compare=[etcd.Compare(result=etcd.Compare.EQUAL, target=etcd.Compare.MOD, key=raw,
                                  mod_revision=expected)],
            success=[etcd.RequestOp(request_put=etcd.PutRequest(key=raw, value=VALUE,
                                                                prev_kv=True))],
            failure=[etcd.RequestOp(request_range=etcd.RangeRequest(key=raw))]),
            timeout=self.timeout)
        if reply.succeeded:
            return True, reply.header.revision
        kvs = reply.responses[0].response_range.kvs
        return False, kvs[0].mod_revision if kvs else 0

    def cas_chains(self, workers: int) -> CasChains:
        return CasChains(RAW, workers, self.put, self.cas)

    def watch_latency(self, count: int) -> tuple[list[float], int]:
        prefix = f"{RAW}watch/".encode()
        requests: queue.Queue = queue.Queue()
        requests.put(etcd.WatchRequest(create_request=etcd.WatchCreateRequest(
            key=prefix, range_end=prefix_end(prefix))))
        stream = self.watcher.Watch(iter(requests.get, None))
        created = threading.Event()
        delivered: queue.Queue[str] = queue.Queue()

        def tail() -> None:
            try:
                for reply in stream:
                    created.set()
                    for event in reply.events:
                        delivered.put(event.kv.value.decode())
            except grpc.RpcError:
                pass   # cancelled once the run is over

        def take(timeout: float) -> str | None:
            try:
                return delivered.get(timeout=timeout)
            except queue.Empty:
                return None

        thread = threading.Thread(target=tail, daemon=True, name="raw-etcd-watch")
        thread.start()
        try:
            if not created.wait(RECEIVE_TIMEOUT_S):
                raise TimeoutError("etcd watch not created within 10 s")
            return latencies(count, lambda i: self.put(f"{RAW}watch/k", str(i).encode()),
                             lambda i: _await(i, take))
        finally:
            requests.put(None)
            stream.cancel()
            thread.join(10)


# -- the run --------------------------------------------------------------------------------

def measure(args: argparse.Namespace, sides: list) -> dict:
    """Every figure for each side, the two sides alternating measurement by measurement."""
    figures: dict = {"rows": [], "cas_failed": [0] * len(sides)}
    for threads in sorted({1, args.threads}):
        for label, pick in (("write/s", lambda s, t: s.write),
                            ("CAS/s", lambda s, t: s.cas_chains(t)),
                            ("read/s", lambda s, t: s.read)):
            rates = []
            for index, side in enumerate(sides):
                operation = pick(side, threads)
                rates.append(rate(args.ops, threads, operation))
                if isinstance(operation, CasChains):
                    figures["cas_failed"][index] += operation.failed
            figures["rows"].append((f"{label} ({threads} thr)", threads, *rates))
    figures["watch"] = [side.watch_latency(args.watch_events) for side in sides]
    return figures


def report(figures: dict, header: str) -> None:
    print(header)
    print(f"{'measure':<26}{'config-center':>15}{'raw etcd':>12}{'ratio':>8}")
    for name, _, ours, peer in figures["rows"]:
        print(f"{name:<26}{ours:>15,.0f}{peer:>12,.0f}{ours / peer:>8.2f}")
    ours_failed, peer_failed = figures["cas_failed"]
    print(f"{'CAS compares failed':<26}{ours_failed:>15}{peer_failed:>12}")
    (ours_lat, ours_lost), (peer_lat, peer_lost) = figures["watch"]
    print(f"{'watch events lost':<26}{ours_lost:>15}{peer_lost:>12}")
    if not ours_lat or not peer_lat:
        print("watch latency: no delivered events to time")
        return
    for label, fraction in (("p50", 0.5), ("p99", 0.99)):
        ours, peer = percentile(ours_lat, fraction), percentile(peer_lat, fraction)
        print(f"{'watch latency ' + label + ' ms':<26}{ours:>15.2f}{peer:>12.2f}"
              f"{ours / peer:>8.2f}")
    print(f"{'watch latency mean ms':<26}{statistics.mean(ours_lat):>15.2f}"
          f"{statistics.mean(peer_lat):>12.2f}")
    single = [(name.split(" ")[0], ours, peer) for name, threads, ours, peer in figures["rows"]
              if threads == 1]
    print("config-center overhead per call at 1 thread (same run): " + ", ".join(
        f"{name.removesuffix('/s')} {1e6 / ours:.0f} µs vs {1e6 / peer:.0f} raw "
        f"({1e6 / ours - 1e6 / peer:+.0f})" for name, ours, peer in single)
        + f", watch p50 {percentile(ours_lat, 0.5) - percentile(peer_lat, 0.5):+.2f} ms")
    print("  = the client's gRPC call into the config center, its Python servicer and store; "
          "a watch event also takes one more stream hop (etcd → config center → client)")


def describe_etcd(endpoint: str, cluster: EtcdCluster | None) -> str:
    with grpc.insecure_channel(endpoint) as channel:
        status = etcd_grpc.MaintenanceStub(channel).Status(etcd.StatusRequest(), timeout=5)
    role = "the leader" if status.leader == status.header.member_id else "a follower"
    size = f"{len(cluster.members)} member(s)" if cluster else "given endpoints"
    return f"etcd {status.version}, {size}; both sides call {endpoint} ({role})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small run (a few seconds)")
    parser.add_argument("--ops", type=int, default=3000,
                        help="operations per measurement (each side)")
    parser.add_argument("--threads", type=int, default=4, help="concurrent callers (each side)")
    parser.add_argument("--watch-events", type=int, default=500)
    parser.add_argument("--members", type=int, default=3,
                        help="etcd members to start (3 as deployed; 1: a single member)")
    parser.add_argument("--etcd-endpoints", default="",
                        help="use this etcd cluster (host:port,...) instead of starting one")
    parser.add_argument("--config-center", default="",
                        help="use this config center (it must store on the same etcd)")
    args = parser.parse_args()
    if args.quick:
        args.ops, args.watch_events = 400, 100
    if args.members < 1:
        parser.error("--members must be at least 1")
    if args.config_center and not args.etcd_endpoints:
        parser.error("--config-center needs --etcd-endpoints (its store, for the raw client)")
    with tempfile.TemporaryDirectory(prefix="tidemq-bench-config-") as tmp:
        cluster = service = None
        try:
            endpoints = args.etcd_endpoints
            if not endpoints:
                cluster = start_etcd(Path(tmp), args.members)
                endpoints = cluster.endpoints
            addr = args.config_center
            if not addr:
                service = start_service("tidemq.configcenter", [
                    "--etcd-endpoints", endpoints, "--log-level", "warning"], Path(tmp))
                addr = service.addr
            # the config center's store calls the first endpoint first and stays on it
            first = endpoints.replace(";", ",").split(",")[0].strip()
            first = first.removeprefix("http://").removeprefix("https://")
            raw = RawEtcdSide(first)
            try:
                with ConfigClient(addr, timeout=10) as client:
                    client.put(f"{CC}warmup", VALUE)
                    raw.put(f"{RAW}warmup")
                    header = (f"config center {addr} on {describe_etcd(first, cluster)}\n"
                              f"ops={args.ops} per measurement, watch_events="
                              f"{args.watch_events}, {len(VALUE)}-byte values, "
                              f"{os.cpu_count()} cores, load average "
                              f"{os.getloadavg()[0]:.1f}"
                              + ("  (--quick: figures vary by a third from run to run)"
                                 if args.quick else ""))
                    figures = measure(args, [ConfigCenterSide(client), raw])
            finally:
                raw.close()
        finally:
            if service is not None:
                service.stop()
            if cluster is not None:
                cluster.kill()
    report(figures, header)


if __name__ == "__main__":
    main()
