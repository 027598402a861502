"""Client quotas with real processes (docs/quotas.md): a producer capped at 1 MiB/s is held to
it while another is not slowed; a client that ignores the throttle time is held by the broker;
a quota changed in the config center applies to the running broker; a consumer's fetch quota.

Rates are the broker's own counts — messages stored (queue offsets) and bytes it charged — over
a window of several seconds, never the timing of single calls. The window's ends are taken on
the inside of the reads that bound it, so a slow test process can only overstate a rate.
"""

from __future__ import annotations

import json
import os
import threading
import time
import urllib.request
from collections.abc import Callable

import grpc
from prometheus_client.parser import text_string_to_metric_families
from tidemq.client import Message, Producer, PullConsumer
from tidemq.client.admin import Admin
from tidemq.client.cli import app
from tidemq.common import errors, record
from tidemq.common.quotas import CLIENT_ID_METADATA
from tidemq.common.rpc import GRPC_OPTIONS
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.quotas import QuotaAdmin
from tidemq.v1 import broker_pb2, broker_pb2_grpc
from typer.testing import CliRunner

from tests.integration.broker.conftest import Cluster, broker_client, wait_route
from tests.support.processes import ServiceProcess, wait_until

MIB = 1 << 20
BODY = 16 * 1024
BATCH = 4                      # 64 KiB a send
WINDOW_S = 10.0
ALLOWED = 1.2                  # measured may be at most 1.2 × the quota
NO_COMPRESSION = 1 << 30
PACE = 4 * MIB                 # the test producers' own pace (keeps the disk written small)


def broker_metric(broker: ServiceProcess, name: str, **labels: str) -> float:
    """The sum of a broker metric's samples whose labels include `labels`. Fails when the
    broker does not expose the metric at all, so a check that it stayed 0 cannot pass on a
    renamed metric."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics",
                                  timeout=10).read().decode()
    families = [family for family in text_string_to_metric_families(text)
                if name in (family.name, family.name + "_total")]
    assert families, f"the broker exposes no metric {name}"
    total = 0.0
    for family in families:
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def stored(broker: ServiceProcess, topic: str) -> int:
    """Messages the broker has stored in `topic` (its queues' max offsets)."""
    reply = broker_client(broker).call("GetQueueOffsets",
                                       broker_pb2.GetQueueOffsetsRequest(topic=topic))
    return sum(q.max_offset for q in reply.queues)


def measure(count: Callable[[], float], window_s: float = WINDOW_S) -> float:
    """`count`'s growth per second over about `window_s`, the window taken inside its reads."""
    before = count()
    started = time.monotonic()
    time.sleep(window_s)  # the measured window itself, not a synchronisation
    ended = time.monotonic()
    return (count() - before) / (ended - started)


class Sending:
    """A thread sending BATCH × BODY batches to `topic` as `client_id` until stopped, at most
    PACE bytes a second (its own pace: the disk a run writes stays small)."""

    def __init__(self, cluster: Cluster, topic: str, client_id: str) -> None:
        self.producer = Producer(cluster.namesrv_addrs, client_id=client_id, send_timeout=10,
                                 compress_threshold=NO_COMPRESSION)
        self.topic = topic
        self.stop = threading.Event()
        self.failures: list[Exception] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Sending:
        self.thread.start()
        return self

    def _run(self) -> None:
        body = os.urandom(BODY)
        due = time.monotonic()
        while not self.stop.is_set():
            try:
                self.producer.send_batch([Message(self.topic, body) for _ in range(BATCH)])
            except errors.TideMQError as exc:
                self.failures.append(exc)
            due = max(due + BATCH * BODY / PACE, time.monotonic() - 1)
            self.stop.wait(max(0.0, due - time.monotonic()))

    def __exit__(self, *exc_info) -> None:
        self.stop.set()
        self.thread.join(timeout=30)
        self.producer.close()


def start(cluster: Cluster, *topics: str) -> ServiceProcess:
    broker = cluster.start_broker("broker-a", "--segment-size-mib", "8")
    for topic in topics:
        cluster.put_topic(topic, queues=2)
    for topic in topics:
        wait_route(cluster, topic, {"broker-a"})
    return broker


def cli_throttled(cluster: Cluster) -> set[str]:
    """The entities `tidemq quota throttled -o json` lists."""
    result = CliRunner().invoke(app, ["--namesrv", cluster.namesrv_addrs, "-o", "json",
                                      "quota", "throttled"])
    assert result.exit_code == 0, result.output
    return {row["entity"] for row in json.loads(result.stdout)["throttled"]}


def charged(broker: ServiceProcess, entity: str, quota: str = "producer_byte_rate") -> float:
    return broker_metric(broker, "tidemq_broker_quota_charged_total", quota=quota, entity=entity)


def test_a_capped_producer_is_held_to_its_rate_live_while_another_is_unaffected(cluster):
    broker = start(cluster, "capped", "free")
    admin = QuotaAdmin(ConfigClient(cluster.config_center.addr))
    admin.set("client", "capped-app", {"producer_byte_rate": MIB})
    capped_bytes = lambda: stored(broker, "capped") * BODY  # noqa: E731
    free_bytes = lambda: stored(broker, "free") * BODY  # noqa: E731
    with Sending(cluster, "capped", "capped-app") as capped, \
            Sending(cluster, "free", "free-app") as free:
        wait_until(lambda: charged(broker, "client:capped-app") > 0, 30,
                   message="the broker charging the capped client (quota loaded)")
        time.sleep(2)  # past the burst: the window measures the steady state
        capped_rate = measure(capped_bytes)
        free_rate = measure(free_bytes, 3.0)
        charged_rate = measure(lambda: charged(broker, "client:capped-app"), 5.0)
        print(f"capped {capped_rate / MIB:.3f} MiB/s (broker-charged "
              f"{charged_rate / MIB:.3f}), free {free_rate / MIB:.3f} MiB/s")
        assert capped_rate <= ALLOWED * MIB, f"capped producer at {capped_rate / MIB:.2f} MiB/s"
        assert charged_rate <= ALLOWED * MIB
        assert capped_rate >= 0.5 * MIB, "the capped producer should still make progress"
        # unaffected: near its own pace, far over the cap, never throttled
        assert free_rate > PACE / 2, f"free producer only {free_rate / MIB:.2f} MiB/s"
        assert broker_metric(broker, "tidemq_broker_quota_throttled_total",
                             entity="client:capped-app") > 0
        assert broker_metric(broker, "tidemq_broker_quota_throttled_total",
                             entity="client:free-app") == 0
        assert broker_metric(broker, "tidemq_broker_quota_held_seconds_total",
                             entity="client:capped-app") < 1.0, "the SDK waits: no holds"
        with Admin(cluster.namesrv_addrs) as operator:   # who is throttled (console, CLI)
            wait_until(lambda: any(row["entity"] == "client:capped-app"
                                   and row["quota"] == "producer_byte_rate"
                                   and row["broker_name"] == "broker-a"
                                   for row in operator.throttled()[0]),
                       30, message="the broker to list the capped client as throttled")
            assert not any(row["entity"] == "client:free-app"
                           for row in operator.throttled()[0])
        wait_until(lambda: "client:capped-app" in cli_throttled(cluster), 30,
                   message="tidemq quota throttled to list the capped client")

        # Lowered live: the running broker applies it without a restart.
        admin.set("client", "capped-app", {"producer_byte_rate": MIB // 4})
        time.sleep(3)  # the debt owed at the old rate is paid first
        lowered = measure(capped_bytes)
        print(f"lowered to 256 KiB/s: {lowered / MIB:.3f} MiB/s")
        assert lowered <= ALLOWED * MIB / 4, f"after lowering: {lowered / MIB:.2f} MiB/s"

        admin.delete("client", "capped-app")
        time.sleep(3)
        freed = measure(capped_bytes, 3.0)
        print(f"quota deleted: {freed / MIB:.3f} MiB/s")
        assert freed > PACE / 2
    assert not capped.failures and not free.failures, (capped.failures + free.failures)[:3]


def test_a_client_ignoring_the_throttle_is_held_by_the_broker(cluster):
    """Four threads resend at once whatever the answer says, with deadlines long enough that
    nothing is refused: the broker holds their requests, so the stored rate stays at the quota
    (a broker that only answered throttle times would store all they send) — and a bystander
    producing to the same broker meanwhile is not starved."""
    broker = start(cluster, "ignored", "bystander")
    QuotaAdmin(ConfigClient(cluster.config_center.addr)).set(
        "client", "rude", {"producer_byte_rate": MIB})
    body = os.urandom(BODY)
    records = b"".join(record.encode_message(record.OutgoingMessage("ignored", body))[0]
                       for _ in range(BATCH))
    channel = grpc.insecure_channel(broker.addr, options=GRPC_OPTIONS)
    stub = broker_pb2_grpc.BrokerServiceStub(channel)
    stop = threading.Event()
    outcomes = {"ok": 0, "throttled": 0, "throttle_ms": 0}

    def hammer(queue_id: int) -> None:
        request = broker_pb2.SendRequest(topic="ignored", queue_id=queue_id, records=records,
                                         record_count=BATCH)
        while not stop.is_set():
            try:
                reply = stub.Send(request, timeout=30,
                                  metadata=((CLIENT_ID_METADATA, "rude"),))
                outcomes["ok"] += 1
                outcomes["throttle_ms"] = max(outcomes["throttle_ms"], reply.throttle_time_ms)
            except grpc.RpcError as exc:
                assert errors.from_rpc_error(exc).code == "THROTTLED", exc
                outcomes["throttled"] += 1

    threads = [threading.Thread(target=hammer, args=(i % 2,), daemon=True) for i in range(4)]
    try:
        for thread in threads:
            thread.start()
        wait_until(lambda: charged(broker, "client:rude") > 0, 30, message="quota loaded")
        time.sleep(2)
        with Sending(cluster, "bystander", "bystander-app") as bystander:
            rate = measure(lambda: stored(broker, "ignored") * BODY)
            others = measure(lambda: stored(broker, "bystander") * BODY, 3.0)
        print(f"ignoring client: {rate / MIB:.3f} MiB/s, {outcomes}; bystander "
              f"{others / MIB:.3f} MiB/s")
        assert not bystander.failures, bystander.failures[:3]
        assert others > PACE / 2, f"the bystander only got {others / MIB:.2f} MiB/s"
        assert rate <= ALLOWED * MIB, f"a client ignoring the throttle got {rate / MIB:.2f} MiB/s"
        assert outcomes["throttle_ms"] > 0 and outcomes["throttled"] == 0, outcomes
        assert broker_metric(broker, "tidemq_broker_quota_held_seconds_total",
                             entity="client:rude") > 1.0, "the broker held its requests"
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=30)
        channel.close()


def test_a_consumer_fetch_quota_paces_pulls(cluster):
    broker = start(cluster, "fetched")
    with Producer(cluster.namesrv_addrs, compress_threshold=NO_COMPRESSION) as producer:
        body = os.urandom(BODY)
        for _ in range(96):   # 6 MiB to read: more than the measured time lets it
            producer.send_batch([Message("fetched", body) for _ in range(BATCH)])
    QuotaAdmin(ConfigClient(cluster.config_center.addr)).set(
        "client", "reader", {"consumer_byte_rate": MIB // 2})
    wait_until(lambda: _quota_loaded(broker), 30, message="quota loaded")
    read = {"bytes": 0}
    failures: list[Exception] = []
    stop = threading.Event()

    def consume() -> None:
        try:
            with PullConsumer(cluster.namesrv_addrs, consumer_group="g",
                              client_id="reader") as c:
                queues = c.fetch_queues("fetched")
                offsets = dict.fromkeys(queues, 0)
                while not stop.is_set():
                    for mq in queues:
                        result = c.pull(mq, offsets[mq], max_messages=8)
                        offsets[mq] = result.next_offset
                        read["bytes"] += sum(len(m.body) for m in result.messages)
        except errors.TideMQError as exc:   # a reader that died would read nothing: judged
            failures.append(exc)

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    try:
        wait_until(lambda: read["bytes"] > 0, 30, message="first pull")
        time.sleep(2)
        rate = measure(lambda: charged(broker, "client:reader", "consumer_byte_rate"), 4.0)
        print(f"fetch quota 0.5 MiB/s: {rate / MIB:.3f} MiB/s charged")
        assert not failures, failures[:3]
        assert rate <= ALLOWED * MIB / 2
        # paced, not stopped: a reader that stopped pulling would pass the two checks above
        assert rate >= MIB / 8, f"the paced reader only got {rate / MIB:.3f} MiB/s"
        assert read["bytes"] < 6 * MIB, "the reader should not have caught up"
        assert broker_metric(broker, "tidemq_broker_quota_throttled_total",
                             quota="consumer_byte_rate", entity="client:reader") > 0
    finally:
        stop.set()
        thread.join(timeout=30)


def _quota_loaded(broker: ServiceProcess) -> bool:
    """Whether the broker has read the quotas: a pull as `reader` gets charged."""
    channel = grpc.insecure_channel(broker.addr, options=GRPC_OPTIONS)
    try:
        broker_pb2_grpc.BrokerServiceStub(channel).Pull(
            broker_pb2.PullRequest(consumer_group="probe", topic="fetched", queue_id=0,
                                   queue_offset=0, max_messages=1), timeout=5,
            metadata=((CLIENT_ID_METADATA, "reader"),))
    finally:
        channel.close()
    return charged(broker, "client:reader", "consumer_byte_rate") > 0


def test_a_request_rate_quota_paces_a_client_spinning_on_empty_pulls(cluster):
    """request_rate (Kafka's request_percentage, counted in requests): a consumer pulling an
    empty queue without long polling is held to 10 requests a second."""
    broker = start(cluster, "empty")
    QuotaAdmin(ConfigClient(cluster.config_center.addr)).set(
        "client", "spinner", {"request_rate": 10})
    stop = threading.Event()
    pulls = {"done": 0}

    def spin() -> None:
        with PullConsumer(cluster.namesrv_addrs, consumer_group="g", client_id="spinner") as c:
            mq = c.fetch_queues("empty")[0]
            while not stop.is_set():
                c.pull(mq, 0, max_messages=1)
                pulls["done"] += 1

    thread = threading.Thread(target=spin, daemon=True)
    thread.start()
    try:
        wait_until(lambda: charged(broker, "client:spinner", "request_rate") > 0, 30,
                   message="quota loaded")
        time.sleep(2)
        rate = measure(lambda: charged(broker, "client:spinner", "request_rate"), 5.0)
        print(f"request_rate 10/s: {rate:.2f} pulls/s charged ({pulls['done']} done)")
        assert 5 <= rate <= ALLOWED * 10
    finally:
        stop.set()
        thread.join(timeout=30)
