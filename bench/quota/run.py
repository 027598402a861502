"""Client quota enforcement accuracy: the rate a quota allows, measured against its target, and
what the accounting costs the broker per send, against the same run's unquoted sends.

    uv run --frozen python bench/quota/run.py --quick
    uv run --frozen python bench/quota/run.py --window-s 20

Starts etcd, Redis, the config center, two name servers and one broker (temporary dirs,
loopback). For each target producer_byte_rate (256 KiB/s, 1 MiB/s, 4 MiB/s) it runs, each on
its own client id and topic:

- the SDK producer (waits out the throttle time the broker answers), one thread;
- a client ignoring the throttle: 4 threads resending at once over raw gRPC (the broker holds
  its requests, or refuses them THROTTLED past their deadline);

and measures the rate over a window from the broker's own counts (messages stored × body
size; the window's ends inside the count reads). Baseline, same run: the same SDK producer
with no quota (what the broker takes when nothing holds it back) — a target above it cannot
be checked. Then the cost of the accounting: broker CPU (/proc/PID/task/*/schedstat) per send of 1 KiB batches
with no quota at all, and with a quota on the sender far above its rate (every send charged,
never throttled). Printed, not asserted — but a figure over nothing stops the run: each
quota is measured once the broker charges it (not the unquoted rate before its follower read
it), a window that stored nothing fails, and so do charged rounds the broker did not charge.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: tests.support

import grpc  # noqa: E402
from tidemq.client import Message, Producer  # noqa: E402
from tidemq.client.group import DirectClient  # noqa: E402
from tidemq.common import errors, record  # noqa: E402
from tidemq.common.quotas import CLIENT_ID_METADATA  # noqa: E402
from tidemq.common.rpc import GRPC_OPTIONS  # noqa: E402
from tidemq.configclient.client import ConfigClient  # noqa: E402
from tidemq.configclient.quotas import QuotaAdmin  # noqa: E402
from tidemq.v1 import broker_pb2, broker_pb2_grpc  # noqa: E402

from tests.integration.broker.test_quotas import broker_metric  # noqa: E402
from tests.support.cluster import (  # noqa: E402
    create_topic_in_config_center,
    running_cluster,
    wait_for_route,
)
from tests.support.processes import wait_until  # noqa: E402

KIB, MIB = 1 << 10, 1 << 20
BODY, BATCH = 16 * KIB, 4
TARGETS = (256 * KIB, MIB, 4 * MIB)
NO_COMPRESSION = 1 << 30


def cpu_s(pid: int) -> float:
    """CPU seconds of every thread of a process, from the scheduler's nanosecond counts
    (/proc/PID/task/*/schedstat; /proc/PID/stat counts 10 ms ticks, too coarse per send)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            total += int((task / "schedstat").read_text().split()[0])
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
            continue
    return total / 1e9


def stored(addr: str, topic: str) -> int:
    reply = DirectClient(addr).call("GetQueueOffsets",
                                    broker_pb2.GetQueueOffsetsRequest(topic=topic))
    return sum(q.max_offset for q in reply.queues)


def measured_rate(addr: str, topic: str, settle_s: float, window_s: float) -> float:
    """Bytes a second stored in `topic` over the window; fails when the window stored nothing
    (a sender that died would otherwise read as a quota held to 0)."""
    time.sleep(settle_s)   # past the burst: the steady state is measured
    before = stored(addr, topic)
    started = time.monotonic()
    time.sleep(window_s)   # the measured window
    ended = time.monotonic()
    count = stored(addr, topic) - before
    if count <= 0:
        raise SystemExit(f"{topic}: nothing stored over the {window_s:g} s window; its sender "
                         "failed")
    return count * BODY / (ended - started)


def charged_bytes(broker, client_id: str) -> float:
    """Bytes the broker charged to `client_id`'s producer_byte_rate quota."""
    return broker_metric(broker, "tidemq_broker_quota_charged_total",
                         quota="producer_byte_rate", entity=f"client:{client_id}")


def sdk_sender(cluster, topic: str, client_id: str, stop: threading.Event) -> threading.Thread:
    def run() -> None:
        body = os.urandom(BODY)
        with Producer(cluster.namesrv_addrs, client_id=client_id, send_timeout=30,
                      compress_threshold=NO_COMPRESSION) as producer:
            while not stop.is_set():
                producer.send_batch([Message(topic, body) for _ in range(BATCH)])
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def rude_senders(addr: str, topic: str, client_id: str, stop: threading.Event,
                 threads: int = 4) -> list[threading.Thread]:
    body = os.urandom(BODY)
    records = b"".join(record.encode_message(record.OutgoingMessage(topic, body))[0]
                       for _ in range(BATCH))
    channel = grpc.insecure_channel(addr, options=GRPC_OPTIONS)
    stub = broker_pb2_grpc.BrokerServiceStub(channel)

    def run(queue_id: int) -> None:
        request = broker_pb2.SendRequest(topic=topic, queue_id=queue_id, records=records,
                                         record_count=BATCH)
        while not stop.is_set():
            try:
                stub.Send(request, timeout=2, metadata=((CLIENT_ID_METADATA, client_id),))
            except grpc.RpcError as exc:
                if errors.from_rpc_error(exc).code != "THROTTLED":
                    raise
    started = [threading.Thread(target=run, args=(i % 2,), daemon=True) for i in range(threads)]
    for thread in started:
        thread.start()
    return started


def accuracy(cluster, admin: QuotaAdmin, window_s: float, settle_s: float) -> None:
    broker = cluster.brokers["broker-a"]
    addr = broker.addr
    create_topic_in_config_center(cluster, "quota-free", 2)
    wait_for_route(cluster, "quota-free", 1)
    stop = threading.Event()
    thread = sdk_sender(cluster, "quota-free", "bench-free", stop)
    free = measured_rate(addr, "quota-free", 1.0, min(window_s, 5.0))
    stop.set()
    thread.join()
    print(f"{'SDK producer, no quota (baseline, same run)':<46} {free / MIB:>9.2f} MiB/s")
    print(f"{'target':>12} {'who':<34} {'measured':>12} {'error':>8}")
    for n, target in enumerate(TARGETS):
        for who, start in (("SDK producer (waits throttle)", "sdk"),
                           ("ignores throttle, 4 threads", "rude")):
            topic, client_id = f"quota-{start}-{n}", f"bench-{start}-{n}"
            create_topic_in_config_center(cluster, topic, 2)
            wait_for_route(cluster, topic, 1)
            admin.set("client", client_id, {"producer_byte_rate": target})
            stop = threading.Event()
            threads = ([sdk_sender(cluster, topic, client_id, stop)] if start == "sdk"
                       else rude_senders(addr, topic, client_id, stop))
            # the quota is measured once the broker applies it, not the unquoted rate before
            wait_until(lambda who=client_id: charged_bytes(broker, who) > 0, 30,
                       message=f"the broker to charge {client_id}")
            rate = measured_rate(addr, topic, settle_s, window_s)
            stop.set()
            for thread in threads:
                thread.join(timeout=30)
            note = "  (target above the baseline)" if target > free else ""
            print(f"{target / MIB:>8.2f} MiB/s {who:<34} {rate / MIB:>8.3f} MiB/s "
                  f"{(rate - target) / target * 100:>+7.1f}%{note}", flush=True)


def accounting_cost(cluster, admin: QuotaAdmin, sends: int) -> None:
    broker = cluster.brokers["broker-a"]
    create_topic_in_config_center(cluster, "quota-cost", 2)
    wait_for_route(cluster, "quota-cost", 1)
    admin.set("client", "bench-charged", {"producer_byte_rate": 1 << 40, "request_rate": 1e6})
    figures: dict[str, list[float]] = {}
    charged_sends = 0.0
    for _round in range(2):   # alternated, so a change in the machine's load hits both
        for client_id in ("bench-unquoted", "bench-charged"):
            with Producer(cluster.namesrv_addrs, client_id=client_id) as producer:
                batch = [Message("quota-cost", b"x" * 256) for _ in range(4)]
                producer.send_batch(batch)   # routes and channels warm
                if client_id == "bench-charged":   # the broker's follower has read the quota
                    wait_until(lambda sent=batch: producer.send_batch(sent) and charged_bytes(
                        broker, "bench-charged") > 0, 30, message="the broker to charge sends")
                charged_before = charged_bytes(broker, "bench-charged")
                before = cpu_s(broker.pid)
                for _ in range(sends):
                    producer.send_batch(batch)
                figures.setdefault(client_id, []).append((cpu_s(broker.pid) - before) / sends)
                if client_id == "bench-charged":
                    charged_sends += charged_bytes(broker, "bench-charged") - charged_before
    if charged_sends <= 0:
        raise SystemExit("the charged rounds were not charged: no accounting was measured")
    plain = min(figures["bench-unquoted"]) * 1e6
    charged = min(figures["bench-charged"]) * 1e6
    print(f"broker CPU per send, no quota (same run)     {plain:>8.1f} µs")
    print(f"broker CPU per send, charged to 2 quotas     {charged:>8.1f} µs "
          f"({charged - plain:+.1f} µs, best of 2 alternated rounds of {sends} sends; "
          "threads that ended mid-round are not counted)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--window-s", type=float, default=15.0)
    parser.add_argument("--sends", type=int, default=3000)
    parser.add_argument("--quick", action="store_true", help="5 s windows, 1000 sends")
    args = parser.parse_args()
    window_s, settle_s = (5.0, 1.5) if args.quick else (args.window_s, 3.0)
    sends = 1000 if args.quick else args.sends
    with tempfile.TemporaryDirectory(prefix="bench-quota-") as tmp, \
            running_cluster(Path(tmp), broker_names=("broker-a",)) as cluster:
        admin = QuotaAdmin(ConfigClient(cluster.config_center.addr))
        print(f"quota accuracy over {window_s:g} s windows (broker counts; burst 1 s; "
              f"{BATCH} × {BODY // KIB} KiB a send)")
        accuracy(cluster, admin, window_s, settle_s)
        accounting_cost(cluster, admin, sends)


if __name__ == "__main__":
    main()
