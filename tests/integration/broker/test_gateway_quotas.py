"""Client quotas through the gateways (docs/quotas.md, "Clients of a gateway"): the brokers
charge each Kafka or RocketMQ client by its own client id, not the gateway as one client. Two
clients of one gateway, one capped at 1 MiB/s: the capped one is held to it, the other is not
slowed, and the capped one is told (Kafka's throttle_time_ms) or waited for alone.

Rates are the broker's own counts over a window of several seconds (messages stored, bytes
charged), never the timing of single calls.
"""

from __future__ import annotations

import os
import threading
import time

import pytest
from tidemq.client.admin import Admin
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.quotas import QuotaAdmin

from tests.integration.broker.conftest import Cluster
from tests.integration.broker.test_quotas import (
    ALLOWED,
    MIB,
    broker_metric,
    charged,
    measure,
    start,
    stored,
)
from tests.support.processes import ServiceProcess, wait_until

pytestmark = pytest.mark.slow

PACE = 4 * MIB   # each client's own pace: far over the cap, and the disk written stays small


class Paced:
    """A thread calling `send_one()` (which sends `body_size` bytes) until stopped, at most
    PACE bytes a second."""

    def __init__(self, send_one, body_size: int) -> None:
        self.send_one, self.body_size = send_one, body_size
        self.stop = threading.Event()
        self.failures: list[Exception] = []
        self.thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Paced:
        self.thread.start()
        return self

    def _run(self) -> None:
        due = time.monotonic()
        while not self.stop.is_set():
            try:
                self.send_one()
            except Exception as exc:  # noqa: BLE001 - judged by the test
                self.failures.append(exc)
                self.stop.wait(0.1)
            due = max(due + self.body_size / PACE, time.monotonic() - 1)
            self.stop.wait(max(0.0, due - time.monotonic()))

    def __exit__(self, *exc_info) -> None:
        self.stop.set()
        self.thread.join(timeout=30)


# -- gateway-kafka ---------------------------------------------------------------------------

KAFKA_BODY = 16 * 1024
IN_QUEUE = 32   # records a Kafka producer may hold unsent: its pace follows its deliveries


class KafkaSending(Paced):
    """An unmodified confluent-kafka producer of `client_id`, writing to `topic` partition 0."""

    def __init__(self, bootstrap: str, topic: str, client_id: str) -> None:
        from confluent_kafka import Producer

        self.throttle_times: list[float] = []   # what its answers' throttle_time_ms said
        self.producer = Producer({
            "bootstrap.servers": bootstrap, "client.id": client_id, "linger.ms": 5,
            "throttle_cb": lambda event: self.throttle_times.append(event.throttle_time)})
        self.topic = topic
        self.body = os.urandom(KAFKA_BODY)
        super().__init__(self._send_one, KAFKA_BODY)

    def _send_one(self) -> None:
        while len(self.producer) >= IN_QUEUE and not self.stop.is_set():
            self.producer.poll(0.02)
        self.producer.produce(self.topic, self.body, partition=0, on_delivery=self._delivered)
        self.producer.poll(0)

    def _delivered(self, error, _message) -> None:
        if error is not None:
            self.failures.append(error)

    def __exit__(self, *exc_info) -> None:
        super().__exit__(*exc_info)
        self.producer.flush(30)
        self.producer = None   # librdkafka's threads end with it, not at garbage collection


def start_kafka_gateway(cluster: Cluster) -> ServiceProcess:
    return cluster.start("tidemq.gatewaykafka", [
        "--namesrv-addrs", cluster.namesrv_addrs, "--config-center", cluster.config_center.addr,
        "--advertised-host", "127.0.0.1"])


def test_two_kafka_clients_of_one_gateway_are_charged_by_their_own_client_ids(cluster):
    broker = start(cluster, "kq-capped", "kq-free")
    gateway = start_kafka_gateway(cluster)
    QuotaAdmin(ConfigClient(cluster.config_center.addr)).set(
        "client", "kafka-capped", {"producer_byte_rate": MIB})
    capped_bytes = lambda: stored(broker, "kq-capped") * KAFKA_BODY  # noqa: E731
    free_bytes = lambda: stored(broker, "kq-free") * KAFKA_BODY  # noqa: E731
    with KafkaSending(gateway.addr, "kq-capped", "kafka-capped") as capped, \
            KafkaSending(gateway.addr, "kq-free", "kafka-free") as free:
        wait_until(lambda: charged(broker, "client:kafka-capped") > 0, 60,
                   message="the broker charging the capped Kafka client (quota loaded)")
        time.sleep(2)  # past the burst: the window measures the steady state
        capped_rate = measure(capped_bytes)
        free_rate = measure(free_bytes, 4.0)
        charged_rate = measure(lambda: charged(broker, "client:kafka-capped"), 5.0)
        print(f"kafka-capped {capped_rate / MIB:.3f} MiB/s (broker-charged "
              f"{charged_rate / MIB:.3f}), kafka-free {free_rate / MIB:.3f} MiB/s; capped "
              f"told to wait {len(capped.throttle_times)} times (longest "
              f"{max(capped.throttle_times, default=0) * 1000:.0f} ms)")
        assert capped_rate <= ALLOWED * MIB, f"capped client at {capped_rate / MIB:.2f} MiB/s"
        assert charged_rate <= ALLOWED * MIB
        assert capped_rate >= 0.5 * MIB, "the capped client should still make progress"
        # the other client of the same gateway: near its own pace, never throttled
        assert free_rate > PACE / 2, f"the free client only got {free_rate / MIB:.2f} MiB/s"
        assert broker_metric(broker, "tidemq_broker_quota_throttled_total",
                             entity="client:kafka-capped") > 0
        assert broker_metric(broker, "tidemq_broker_quota_throttled_total",
                             entity="client:kafka-free") == 0
        # the throttle time reached the Kafka client in its answers (librdkafka's throttle_cb
        # reports each answer's throttle_time_ms > 0); the free client's never carried one
        wait_until(lambda: capped.throttle_times, 10, interval=0.1,
                   message="the capped client to be told its throttle time")
        assert not free.throttle_times
        # the gateway did not wait it out itself: the broker held none of its sends for long
        assert broker_metric(broker, "tidemq_broker_quota_held_seconds_total",
                             entity="client:kafka-capped") < 2.0
        # who is throttled, as the console and `tidemq quota throttled` show it: the Kafka
        # client, not the gateway
        with Admin(cluster.namesrv_addrs) as operator:
            wait_until(lambda: any(row["entity"] == "client:kafka-capped"
                                   for row in operator.throttled()[0]),
                       30, message="the broker to list the Kafka client as throttled")
        assert broker_metric(gateway, "tidemq_gateway_kafka_throttled_total", api="Produce") > 0
    assert not capped.failures and not free.failures, (capped.failures + free.failures)[:3]


def test_a_kafka_consumers_fetch_quota_paces_its_fetches_through_the_gateway(cluster):
    from confluent_kafka import Consumer, TopicPartition
    from tidemq.client import Message, MessageQueue, Producer

    broker = start(cluster, "kq-fetched")
    with Producer(cluster.namesrv_addrs, compress_threshold=1 << 30) as producer:
        body = os.urandom(KAFKA_BODY)
        for _ in range(256):  # 16 MiB on partition 0: more than the measured time lets it read
            producer.send_batch([Message("kq-fetched", body) for _ in range(4)],
                                queue=MessageQueue("kq-fetched", "broker-a", 0))
    gateway = start_kafka_gateway(cluster)
    QuotaAdmin(ConfigClient(cluster.config_center.addr)).set(
        "client", "kafka-reader", {"consumer_byte_rate": MIB // 2})
    throttle_times: list[float] = []
    consumer = Consumer({"bootstrap.servers": gateway.addr, "group.id": "kq-readers",
                         "client.id": "kafka-reader", "enable.auto.commit": False,
                         "throttle_cb": lambda event: throttle_times.append(event.throttle_time)})
    consumer.assign([TopicPartition("kq-fetched", 0, 0)])
    read = {"bytes": 0}
    stop = threading.Event()

    def consume() -> None:
        while not stop.is_set():
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                read["bytes"] += len(message.value())

    thread = threading.Thread(target=consume, daemon=True)
    thread.start()
    try:
        wait_until(lambda: charged(broker, "client:kafka-reader", "consumer_byte_rate") > 0,
                   60, message="the broker charging the Kafka consumer (quota loaded)")
        time.sleep(3)
        rate = measure(lambda: charged(broker, "client:kafka-reader", "consumer_byte_rate"))
        print(f"kafka-reader capped at 0.5 MiB/s: {rate / MIB:.3f} MiB/s charged, "
              f"{read['bytes'] / MIB:.1f} MiB read; told to wait {len(throttle_times)} times")
        assert rate <= ALLOWED * MIB / 2, f"the consumer read {rate / MIB:.2f} MiB/s"
        assert rate >= MIB / 8, f"the paced consumer only got {rate / MIB:.3f} MiB/s"
        assert read["bytes"] < 16 * MIB, "the consumer should not have caught up"
        assert throttle_times, "its Fetch answers carried the throttle time"
    finally:
        stop.set()
        thread.join(timeout=30)
        consumer.close()


# -- gateway-grpc ----------------------------------------------------------------------------

RMQ_BODY = 64 * 1024


class RocketMQSending(Paced):
    """An unmodified RocketMQ 5 Python producer (its own generated client id) sending to
    `topic` through gateway-grpc, one synchronous send at a time."""

    def __init__(self, endpoint: str, topic: str) -> None:
        from rocketmq import ClientConfiguration, Credentials, Producer

        from tests.integration.rocketmq.clients import message

        self.producer = Producer(ClientConfiguration(endpoint, Credentials(),
                                                     request_timeout=10), (topic,))
        self.producer.startup()
        self.client_id = self.producer.client_id
        body = os.urandom(RMQ_BODY)
        super().__init__(lambda: self.producer.send(message(topic, body)), RMQ_BODY)

    def __exit__(self, *exc_info) -> None:
        super().__exit__(*exc_info)
        self.producer.shutdown()


def test_two_rocketmq_clients_of_one_gateway_are_charged_by_their_own_client_ids(cluster):
    broker = start(cluster, "rq-capped", "rq-free")
    gateway = cluster.start("tidemq.gatewaygrpc", ["--namesrv-addrs", cluster.namesrv_addrs])
    capped_bytes = lambda: stored(broker, "rq-capped") * RMQ_BODY  # noqa: E731
    free_bytes = lambda: stored(broker, "rq-free") * RMQ_BODY  # noqa: E731
    quotas = QuotaAdmin(ConfigClient(cluster.config_center.addr))
    with RocketMQSending(gateway.addr, "rq-capped") as capped, \
            RocketMQSending(gateway.addr, "rq-free") as free:
        capped_entity = f"client:{capped.client_id}"
        quotas.set("client", capped.client_id, {"producer_byte_rate": MIB})
        wait_until(lambda: charged(broker, capped_entity) > 0, 60,
                   message="the broker charging the capped RocketMQ client (quota loaded)")
        time.sleep(3)  # past the burst: the window measures the steady state
        capped_rate = measure(capped_bytes)
        free_rate = measure(free_bytes, 4.0)
        charged_rate = measure(lambda: charged(broker, capped_entity), 5.0)
        waited = broker_metric(gateway, "tidemq_gateway_grpc_throttle_wait_seconds_total")
        print(f"{capped_entity} {capped_rate / MIB:.3f} MiB/s (broker-charged "
              f"{charged_rate / MIB:.3f}), free {free_rate / MIB:.3f} MiB/s; the gateway "
              f"waited {waited:.1f} s for the capped client")
        assert capped_rate <= ALLOWED * MIB, f"capped client at {capped_rate / MIB:.2f} MiB/s"
        assert charged_rate <= ALLOWED * MIB
        assert capped_rate >= 0.5 * MIB, "the capped client should still make progress"
        assert free_rate > PACE / 2, f"the free client only got {free_rate / MIB:.2f} MiB/s"
        assert broker_metric(broker, "tidemq_broker_quota_throttled_total",
                             entity=capped_entity) > 0
        assert broker_metric(broker, "tidemq_broker_quota_throttled_total",
                             entity=f"client:{free.client_id}") == 0
        assert waited > 0, "the gateway waits a throttled client's throttle time out"
    assert not capped.failures and not free.failures, (capped.failures + free.failures)[:3]
