"""Kafka headers as TideMQ user properties, with real processes: records a confluent-kafka
producer sends with UTF-8, binary, null, duplicate and reserved-looking headers read on native
pull, pop and push consumers with exactly the expected user properties, SQL92 filters select
by a header (pull, pop and push), and a Kafka consumer still reads every header byte for byte
(order, duplicates, nulls), from KAFKA_HEADERS (kafka-python reads them: another library than
the producer's)."""

from __future__ import annotations

import re
import time

import pytest
import requests
from confluent_kafka import Producer
from kafka import KafkaConsumer, TopicPartition
from tidemq.client import PullConsumer, SimpleConsumer
from tidemq.client.push_consumer import ConsumeFrom, ConsumeStatus, PushConsumer

from tests.support.processes import wait_until

pytestmark = pytest.mark.slow

TOPIC = "k-headers"
BIG = "x" * 20_000   # UTF-8, but with KAFKA_HEADERS' base64 of it no copy fits 32 KiB
# (key, value, headers, the user properties a native consumer must see)
RECORDS = [
    (b"r-1", b"eu-1",
     [("region", b"eu"), ("bin", b"\xff\x00"), ("nul", None), ("dup", b"first"),
      ("dup", b"second"), ("KEYS", b"forged key"), ("UNIQ_KEY", b"forged"),
      ("KAFKA_HEADERS", b"[]"), ("TRACE_CONTEXT", b"forged"), ("ключ", "значение".encode()),
      ("empty", b"")],
     {"region": "eu", "dup": "second", "ключ": "значение", "empty": ""}),
    (None, b"us-1", [("region", b"us"), ("dup", b"x"), ("dup", None)], {"region": "us"}),
    (b"r-3", b"eu-2", [("region", b"\xfe"), ("region", b"eu")], {"region": "eu"}),
    (b"r-4", b"eu-binary-last", [("region", b"eu"), ("region", b"\xfe")], {}),
    (None, b"no-headers", [], {}),
    (None, b"eu-too-big", [("region", b"eu"), ("big", BIG.encode())], {}),
]


def _user_properties(message) -> dict[str, str]:
    """A message's user properties without gateway-kafka's own (KAFKA_...)."""
    return {name: value for name, value in message.user_properties.items()
            if not name.startswith("KAFKA_")}


def _skipped(cluster, reason: str) -> float:
    text = requests.get(f"http://127.0.0.1:{cluster.extra['gateway_kafka'].metrics_port}"
                        "/metrics", timeout=5).text
    name = f'tidemq_gateway_kafka_header_properties_skipped_total{{reason="{reason}"}}'
    found = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    return float(found.group(1)) if found else 0.0


def test_utf8_headers_are_native_properties_and_kafka_reads_every_header(kafka_cluster,
                                                                         bootstrap, tmp_path):
    skipped = {r: _skipped(kafka_cluster, r) for r in ("size", "reserved_name", "not_utf8")}
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    delivered: list = []
    for key, value, headers, _ in RECORDS:
        producer.produce(TOPIC, key=key, value=value, headers=headers, partition=0,
                         on_delivery=lambda err, msg: delivered.append((err, msg.offset())))
    assert producer.flush(30) == 0
    assert [err for err, _ in delivered] == [None] * len(RECORDS)
    offsets = [offset for _, offset in delivered]
    first = offsets[0]
    assert offsets == list(range(first, first + len(RECORDS)))
    # counted by the gateway: 4 reserved names, 3 binary values, 1 record too big to copy
    assert _skipped(kafka_cluster, "reserved_name") == skipped["reserved_name"] + 4
    assert _skipped(kafka_cluster, "not_utf8") == skipped["not_utf8"] + 3
    assert _skipped(kafka_cluster, "size") == skipped["size"] + 1

    wanted = {value: properties for _, value, _, properties in RECORDS}
    with PullConsumer(kafka_cluster.namesrv_addrs, consumer_group="k-headers-pull",
                      timeout=10) as native:
        mq = sorted(native.fetch_queues(TOPIC))[0]   # partition 0 = the first queue
        pulled = native.pull(mq, first, max_messages=32).messages
        assert {m.body: _user_properties(m) for m in pulled} == wanted
        assert [m.keys for m in pulled] == [["r-1"], [], ["r-3"], ["r-4"], [], []]
        # a SQL92 filter over the headers' properties, evaluated by the broker
        selected = native.pull(mq, first, max_messages=32, tag_expression="region = 'eu'",
                               expression_type="SQL92").messages
        assert [m.body for m in selected] == [b"eu-1", b"eu-2"]
        selected = native.pull(mq, first, max_messages=32,
                               tag_expression="dup = 'second' AND empty = ''",
                               expression_type="SQL92").messages
        assert [m.body for m in selected] == [b"eu-1"]

    popped: dict[bytes, dict[str, str]] = {}
    with SimpleConsumer(kafka_cluster.namesrv_addrs, "k-headers-pop", TOPIC,
                        tag_expression="region IN ('eu', 'us')", expression_type="SQL92",
                        timeout=10) as popper:
        def pop() -> bool:
            for received in popper.receive(32, wait_s=0.5):
                popped[received.body] = _user_properties(received.message)
                popper.ack(received)
            return len(popped) >= 3
        wait_until(pop, 60, message="the three region-tagged records popped")
    assert popped == {value: wanted[value] for value in (b"eu-1", b"us-1", b"eu-2")}

    pushed: dict[bytes, dict[str, str]] = {}

    def listener(messages) -> ConsumeStatus:
        for message in messages:
            pushed[message.body] = _user_properties(message)
        return ConsumeStatus.CONSUME_SUCCESS

    pusher = PushConsumer(kafka_cluster.namesrv_addrs, "k-headers-push",
                          {TOPIC: "region = 'eu' AND dup IS NULL"}, listener,
                          expression_type="SQL92", consume_from=ConsumeFrom.FIRST,
                          heartbeat_interval_ms=1000, long_poll_s=1.0,
                          offset_store_dir=tmp_path / "offsets").start()
    try:
        wait_until(lambda: b"eu-2" in pushed, 60, message="the push consumer's match")
    finally:
        pusher.shutdown()
    assert pushed == {b"eu-2": {"region": "eu"}}

    consumer = KafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                             max_partition_fetch_bytes=4 * 1024 * 1024)
    partition = TopicPartition(TOPIC, 0)
    consumer.assign([partition])
    consumer.seek(partition, first)
    got: list = []
    deadline = time.monotonic() + 30
    while len(got) < len(RECORDS) and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got.extend(batch)
    consumer.close()
    assert [(r.key, r.value, r.headers) for r in got] == \
        [(key, value, headers) for key, value, headers, _ in RECORDS]
