"""The idempotent producer through gateway-kafka, checked on the brokers: a produce request
replayed byte for byte (what a client resends when the link is cut after the broker stored
the batch and before the answer came back) is stored once and answered with the first
offsets; a sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER, a fenced epoch
INVALID_PRODUCER_EPOCH and a producer the brokers know nothing of UNKNOWN_PRODUCER_ID.
The requests are built with kafka-python's own protocol classes."""

from __future__ import annotations

import socket
import struct

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)
from kafka.record.default_records import DefaultRecordBatchBuilder
from tidemq.gatewaykafka.codec import build  # nested kafka-python structs from dicts

from tests.integration.kafka.harness import read_frame

pytestmark = pytest.mark.slow

TOPIC = "k-idempotent"
PRODUCE_VERSION = 8
OUT_OF_ORDER, INVALID_EPOCH, UNKNOWN_PRODUCER = 45, 47, 59


def _call(sock: socket.socket, request, response_cls, version: int, correlation_id: int):
    request.with_header(correlation_id=correlation_id, client_id="idempotence-test")
    sock.sendall(bytes(request.encode(header=True, framed=True)))
    body = read_frame(sock)
    assert struct.unpack_from(">i", body)[0] == correlation_id
    return response_cls[version].decode(body[4:], version=version)


def _batch(producer_id: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=producer_id, producer_epoch=epoch,
                                        base_sequence=sequence, batch_size=1 << 20)
    for delta, value in enumerate(values):
        builder.append(delta, timestamp=1_700_000_000_000 + delta, key=None, value=value,
                       headers=[])
    return bytes(builder.build())


def _produce(sock, records: bytes, partition: int, correlation_id: int) -> tuple[int, int]:
    request = build(ProduceRequest, {
        "transactional_id": None, "acks": -1, "timeout_ms": 10000,
        "topic_data": [{"name": TOPIC, "partition_data": [
            {"index": partition, "records": records}]}]}, PRODUCE_VERSION)
    answer = _call(sock, request, ProduceResponse, PRODUCE_VERSION, correlation_id)
    part = answer.responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def _producer_id(sock) -> int:
    answer = _call(sock, InitProducerIdRequest[1](transactional_id=None,
                                                  transaction_timeout_ms=60000),
                   InitProducerIdResponse, 1, 1)
    assert answer.error_code == 0 and answer.producer_epoch == 0
    return answer.producer_id


def _values(bootstrap: str, partition: int) -> list[bytes]:
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest",
                             enable_auto_commit=False, consumer_timeout_ms=3000)
    tp = TopicPartition(TOPIC, partition)
    consumer.assign([tp])
    end = consumer.end_offsets([tp])[tp]
    found = []
    while len(found) < end:
        batch = consumer.poll(timeout_ms=2000).get(tp, [])
        if not batch:
            break
        found += [record.value for record in batch]
    consumer.close()
    return found


@pytest.fixture(scope="module")
def connection(bootstrap):
    host, port = bootstrap.split(":")
    with socket.create_connection((host, int(port)), timeout=20) as sock:
        yield sock


def test_a_replayed_produce_is_stored_once(bootstrap, connection):
    producer_id = _producer_id(connection)
    first = _batch(producer_id, 0, 0, [b"a", b"b", b"c"])
    assert _produce(connection, first, 0, 2) == (0, 0)
    # the answer was "lost": the client sends the very same request again, twice
    assert _produce(connection, first, 0, 3) == (0, 0)
    assert _produce(connection, first, 0, 4) == (0, 0)
    following = _batch(producer_id, 0, 3, [b"d"])
    assert _produce(connection, following, 0, 5) == (0, 3)
    assert _produce(connection, following, 0, 6) == (0, 3)
    assert _values(bootstrap, 0) == [b"a", b"b", b"c", b"d"]


def test_a_sequence_gap_a_fenced_epoch_and_an_unknown_producer_are_refused(bootstrap,
                                                                          connection):
    producer_id = _producer_id(connection)
    assert _produce(connection, _batch(producer_id, 0, 0, [b"one"]), 1, 10) == (0, 0)
    assert _produce(connection, _batch(producer_id, 0, 2, [b"gap"]), 1, 11)[0] == OUT_OF_ORDER
    assert _produce(connection, _batch(producer_id, 1, 0, [b"new epoch"]), 1, 12) == (0, 1)
    assert _produce(connection, _batch(producer_id, 0, 1, [b"fenced"]), 1, 13)[0] == \
        INVALID_EPOCH
    stranger = _producer_id(connection)
    assert _produce(connection, _batch(stranger, 0, 7, [b"lost"]), 1, 14)[0] == \
        UNKNOWN_PRODUCER
    assert _values(bootstrap, 1) == [b"one", b"new epoch"]
