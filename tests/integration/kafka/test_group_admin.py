"""DescribeGroups and ListGroups, answered from TideMQ's group coordinator and committed offsets,
through kafka-python's KafkaAdminClient and confluent-kafka's AdminClient: a live Kafka group is
Stable with its member, protocol and decoded assignment; a group that only committed offsets
(assign()) is Empty with no protocol type; a group nobody used is Dead."""

from __future__ import annotations

import threading
import time

import pytest
from confluent_kafka import ConsumerGroupState
from confluent_kafka.admin import AdminClient
from kafka import KafkaConsumer, TopicPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata

pytestmark = pytest.mark.slow

TOPIC = "k-group-admin"   # one queue on each broker group: partitions 0 and 1
LIVE, SIMPLE, NEVER = "k-admin-live", "k-admin-simple", "k-admin-never-used"


@pytest.fixture(scope="module")
def groups(bootstrap):
    """A live group of one kafka-python member holding both partitions, and a simple group
    that committed an offset without joining."""
    simple = KafkaConsumer(bootstrap_servers=bootstrap, group_id=SIMPLE,
                           enable_auto_commit=False)
    simple.assign([TopicPartition(TOPIC, 0)])
    simple.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(0, "", -1)})
    simple.close()

    stop, joined = threading.Event(), threading.Event()

    def member() -> None:
        consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=LIVE,
                                 client_id="admin-test-member", enable_auto_commit=False,
                                 partition_assignment_strategy=_range_only())
        try:
            while not stop.is_set():
                consumer.poll(timeout_ms=200)
                if len(consumer.assignment()) == 2:
                    joined.set()
        finally:
            consumer.close()

    thread = threading.Thread(target=member, daemon=True)
    thread.start()
    assert joined.wait(60), "the kafka-python member never got both partitions"
    yield
    stop.set()
    thread.join(30)


def _range_only():
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    return (RangePartitionAssignor,)


def _until(check, what: str, timeout_s: float = 30.0):
    """Poll `check()` until it returns something truthy (a rebalance may be settling)."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            assert found, what
            return found
        time.sleep(0.2)


def test_kafka_python_admin_lists_and_describes(bootstrap, groups):
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, request_timeout_ms=20000)
    try:
        listed = {g["group_id"]: g["protocol_type"] for g in admin.list_groups()}
        assert listed.get(LIVE) == "consumer"
        assert listed.get(SIMPLE) == ""
        assert NEVER not in listed

        def describe():
            found = admin.describe_groups([LIVE, SIMPLE, NEVER])
            return found if found[LIVE]["group_state"] == "Stable" else None

        described = _until(describe, "the live group never read Stable")
        live = described[LIVE]
        assert live["error"] is None
        assert (live["protocol_type"], live["protocol_data"]) == ("consumer", "range")
        (m,) = live["members"]
        assert m["client_id"] == "admin-test-member" and m["member_id"]
        assert m["client_host"]
        assert m["member_metadata"]["topics"] == [TOPIC]   # decoded by the client
        assert [(t["topic"], sorted(t["partitions"]))
                for t in m["member_assignment"]["assigned_partitions"]] == [(TOPIC, [0, 1])]

        simple = described[SIMPLE]
        assert (simple["error"], simple["group_state"], simple["protocol_type"],
                simple["members"]) == (None, "Empty", "", [])
        never = described[NEVER]
        assert (never["error"], never["group_state"], never["members"]) == (None, "Dead", [])
    finally:
        admin.close()


def test_confluent_admin_lists_and_describes(bootstrap, groups):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    result = admin.list_consumer_groups(request_timeout=20).result()
    assert not result.errors
    listed = {g.group_id: g for g in result.valid}
    assert not listed[LIVE].is_simple_consumer_group
    assert listed[SIMPLE].is_simple_consumer_group

    def describe():
        futures = admin.describe_consumer_groups([LIVE, SIMPLE], request_timeout=20)
        found = {group: future.result() for group, future in futures.items()}
        return found if found[LIVE].state == ConsumerGroupState.STABLE else None

    described = _until(describe, "the live group never read Stable")
    live = described[LIVE]
    assert not live.is_simple_consumer_group
    assert live.partition_assignor == "range"
    (m,) = live.members
    assert m.client_id == "admin-test-member"
    assert sorted((tp.topic, tp.partition) for tp in m.assignment.topic_partitions) == \
        [(TOPIC, 0), (TOPIC, 1)]
    # the coordinator is a gateway-kafka instance this cluster's Metadata lists (its node id)
    assert live.coordinator.id in admin.list_topics(timeout=20).brokers
    simple = described[SIMPLE]
    assert simple.is_simple_consumer_group and simple.state == ConsumerGroupState.EMPTY
    assert simple.members == []
