"""Offset commits fenced by generation on the brokers: a kafka-python member's commit with a
stale generation is ILLEGAL_GENERATION and one from a member the group does not know
UNKNOWN_MEMBER_ID, on a partition of the coordinating broker group and of the other one (the
topic has one queue on each); the native SDK's commit with a generation is fenced the same
way, and its plain commit (generation -1) is not."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from kafka import KafkaConsumer
from kafka.protocol.consumer import OffsetCommitRequest, OffsetCommitResponse
from tidemq.client import PullConsumer
from tidemq.common.errors import TideMQError
from tidemq.gatewaykafka.codec import build  # nested kafka-python structs from dicts

pytestmark = pytest.mark.slow

TOPIC, GROUP = "k-fence", "k-fence-group"
VERSION = 7
ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 22, 25


def _commit(bootstrap: str, generation: int, member: str, offset: int) -> list[int]:
    request = build(OffsetCommitRequest, {
        "group_id": GROUP, "generation_id_or_member_epoch": generation, "member_id": member,
        "group_instance_id": None, "topics": [{"name": TOPIC, "partitions": [
            {"partition_index": p, "committed_offset": offset, "committed_leader_epoch": -1,
             "committed_metadata": ""} for p in (0, 1)]}]}, VERSION)
    request.with_header(correlation_id=7, client_id="fence-test")
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        size = struct.unpack(">i", sock.recv(4, socket.MSG_WAITALL))[0]
        body = sock.recv(size, socket.MSG_WAITALL)
    answer = OffsetCommitResponse[VERSION].decode(body[4:], version=VERSION)
    return [p.error_code for p in answer.topics[0].partitions]


@pytest.fixture(scope="module")
def member(bootstrap):
    consumer = KafkaConsumer(TOPIC, bootstrap_servers=bootstrap, group_id=GROUP,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    deadline = time.monotonic() + 30
    while not consumer.assignment() and time.monotonic() < deadline:
        consumer.poll(timeout_ms=200)
    assert consumer.assignment(), "the consumer never joined its group"
    generation = consumer._coordinator._generation
    yield consumer, generation.generation_id, generation.member_id
    consumer.close()


def test_a_stale_kafka_commit_is_refused(bootstrap, member):
    consumer, generation, member_id = member
    assert _commit(bootstrap, generation, member_id, 0) == [0, 0]
    assert _commit(bootstrap, generation - 1, member_id, 0) == [ILLEGAL_GENERATION] * 2
    assert _commit(bootstrap, generation + 1, member_id, 0) == [ILLEGAL_GENERATION] * 2
    assert _commit(bootstrap, generation, "gone-member", 0) == [UNKNOWN_MEMBER_ID] * 2
    consumer.commit()    # kafka-python's own commit of its current generation goes through


def test_a_stale_native_commit_is_refused(kafka_cluster, member):
    _, generation, member_id = member
    native = PullConsumer(kafka_cluster.namesrv_addrs, consumer_group=GROUP)
    queues = sorted(native.fetch_queues(TOPIC), key=lambda mq: mq.broker_name)
    assert len(queues) == 2
    for mq in queues:
        native.commit(mq, 0, generation_id=generation, member_id=member_id)
        with pytest.raises(TideMQError) as stale:
            native.commit(mq, 0, generation_id=generation - 1, member_id=member_id)
        assert stale.value.code == "ILLEGAL_GENERATION"
        with pytest.raises(TideMQError) as unknown:
            native.commit(mq, 0, generation_id=generation, member_id="gone-member")
        assert unknown.value.code == "UNKNOWN_MEMBER_ID"
        native.commit(mq, 0)   # generation -1: not a member's commit, not fenced
