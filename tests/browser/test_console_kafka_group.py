"""A Kafka consumer group on the console: a kafka-python consumer and a confluent-kafka
(librdkafka) consumer join one group through a real gateway-kafka; `GET /v1/consumer-groups/<g>`
and the console's group page (headless Chromium) show each member's client software, as the
client named it in ApiVersions, and its assignment decoded from Kafka's opaque
ConsumerProtocolAssignment (topic: partitions), mapped to the queues of the topic's partition
map. Real processes: etcd, config center, name servers, one broker group, HTTP gateway,
gateway-kafka."""

from __future__ import annotations

import threading

import kafka
import pytest
import requests
from confluent_kafka import Consumer
from kafka import KafkaConsumer

from tests.support.cluster import running_cluster
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, GROUP = "console-kafka", "console-kafka-group"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("console-kafka"),
                         broker_names=("broker-a",)) as cluster:
        cluster.start_gateway(workers=1)
        created = requests.post(f"{cluster.gateway_url}/v1/topics",
                                json={"name": TOPIC, "queues": 2}, timeout=30)
        assert created.status_code == 201, created.text
        gateway_kafka = cluster.start("tidemq.gatewaykafka", [
            "--namesrv-addrs", cluster.namesrv_addrs,
            "--config-center", cluster.config_center.addr, "--advertised-host", "127.0.0.1"])
        cluster.extra["bootstrap"] = gateway_kafka.addr
        yield cluster


@pytest.fixture(scope="module")
def kafka_members(cluster):
    """Both consumers subscribed to TOPIC in GROUP, polled in the background until the end."""
    bootstrap = cluster.extra["bootstrap"]
    python_consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP,
                                    enable_auto_commit=False, request_timeout_ms=40_000)
    rdkafka_consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": GROUP,
                                 "enable.auto.commit": False})
    rdkafka_consumer.subscribe([TOPIC])
    stop = threading.Event()

    def poll() -> None:
        while not stop.is_set():
            python_consumer.poll(timeout_ms=200)
            rdkafka_consumer.poll(0.2)

    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    yield
    stop.set()
    poller.join(30)
    python_consumer.close()
    rdkafka_consumer.close()


def described(cluster) -> dict:
    response = requests.get(f"{cluster.gateway_url}/v1/consumer-groups/{GROUP}", timeout=30)
    assert response.status_code == 200, response.text
    return response.json()


def settled(cluster) -> dict | None:
    """The group once Stable with both members assigned one partition each."""
    group = described(cluster)
    members = group["members"]
    if group["state"] != "Stable" or len(members) != 2 \
            or not all(m["kafka_assignment"] for m in members):
        return None
    partitions = sorted(p for m in members
                        for p in m["kafka_assignment"]["partitions"].get(TOPIC, []))
    return group if partitions == [0, 1] else None


def test_the_api_and_the_console_show_kafka_assignments_and_client_software(
        cluster, kafka_members, visit):
    group = wait_until(lambda: settled(cluster), 90, interval=0.5,
                       message="both Kafka consumers to be assigned a partition each")
    assert group["protocol"].startswith("kafka/consumer/")
    software = {m["client_software"] for m in group["members"]}
    python_software = f"kafka-python {kafka.__version__}"
    assert python_software in software, software
    rdkafka_software = (software - {python_software}).pop()
    assert "kafka" in rdkafka_software and "rdkafka" in rdkafka_software, rdkafka_software
    partition_map = {}
    for m in group["members"]:
        assert m["topics"] == [TOPIC]   # the decoded subscription
        (partition,) = m["kafka_assignment"]["partitions"][TOPIC]
        (queue,) = m["queues"]           # the queue the partition map names for it
        partition_map[partition] = queue
    assert sorted(partition_map.values()) == [f"{TOPIC}@broker-a#{q}" for q in range(2)]

    page = visit(f"{cluster.gateway_url}/console/groups/{GROUP}", "kafka-group")
    rows = {row.locator("td.software").inner_text():
            row.locator("td.kafka-assignment").inner_text()
            for row in page.locator("#members tbody tr").all()}
    assert set(rows) == software
    assert sorted(rows.values()) == [f"{TOPIC}: 0", f"{TOPIC}: 1"]
