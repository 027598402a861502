"""What gateway-kafka refuses is refused at once, with a sentence: KIP-848 consumers
(group.protocol=consumer) and share groups name the classic protocol; transactions fail
init_transactions fatally (not retried until a timeout) in kafka-python and confluent-kafka."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException
from confluent_kafka import Producer as ConfluentProducer
from kafka import KafkaProducer
from kafka.errors import KafkaError as PyKafkaError
from kafka.errors import TransactionalIdAuthorizationFailedError
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse

from tests.integration.kafka.harness import read_frame

pytestmark = pytest.mark.slow

REFUSED_WITHIN_S = 5.0   # the bound for a refusal
CLASSIC = "group.protocol=classic"
NO_TRANSACTIONS = "does not serve Kafka transactions"


def _connect(bootstrap: str) -> socket.socket:
    host, port = bootstrap.rsplit(":", 1)
    return socket.create_connection((host, int(port)), timeout=10)


def _uvarint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _heartbeat(sock: socket.socket, api_key: int, correlation_id: int) -> tuple[int, str]:
    """A v0 heartbeat of a next-generation group protocol (hand-built: request header v2, a
    body the gateway never reads); its (error code, error message)."""
    client_id = b"refusal-test"
    body = b"\x05group\x00" + b"\x00" * 32    # the fields do not matter: refused unread
    frame = struct.pack(">hhih", api_key, 0, correlation_id, len(client_id)) + client_id + \
        b"\x00" + body
    sock.sendall(struct.pack(">i", len(frame)) + frame)
    answer = read_frame(sock)
    assert struct.unpack_from(">i", answer)[0] == correlation_id and answer[4] == 0
    throttle, error_code = struct.unpack_from(">ih", answer, 5)
    length, at = _uvarint(answer, 11)
    message = answer[at:at + length - 1].decode()
    member_length, at = _uvarint(answer, at + length - 1)
    assert member_length == 0   # null member id
    epoch, interval, assignment = struct.unpack_from(">iib", answer, at)
    assert (epoch, assignment, answer[at + 9:]) == (-1, -1, b"\x00")
    return error_code, message


def test_consumer_group_heartbeat_is_advertised_and_share_groups_are_not(bootstrap):
    with _connect(bootstrap) as sock:
        request = ApiVersionsRequest[0]()
        request.with_header(correlation_id=1, client_id="refusal-test")
        sock.sendall(bytes(request.encode(header=True, framed=True)))
        answer = ApiVersionsResponse[0].decode(read_frame(sock)[4:], version=0)
    versions = {k.api_key: (k.min_version, k.max_version) for k in answer.api_keys}
    assert versions[68] == (0, 1) and 76 not in versions


@pytest.mark.parametrize("api_key", [68, 76])
def test_a_raw_heartbeat_of_the_new_protocols_is_refused_with_the_sentence(bootstrap, api_key):
    with _connect(bootstrap) as sock:
        error_code, message = _heartbeat(sock, api_key, 7)
        assert error_code == 35 and CLASSIC in message    # UNSUPPORTED_VERSION: not librdkafka
        assert _heartbeat(sock, api_key, 8)[0] == 35      # the connection stays usable


def test_a_kip848_consumer_fails_within_5_s_naming_the_classic_protocol(bootstrap):
    """librdkafka shows a ConsumerGroupHeartbeat's error message to the application only for
    TOPIC_AUTHORIZATION_FAILED (a consumer error on poll()); every other code is retried
    silently or made fatal with the code's own text, so that is the code it gets."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "k-kip848",
                         "group.protocol": "consumer"})
    try:
        consumer.subscribe(["k-roundtrip"])
        started = time.monotonic()
        error = None
        while error is None and time.monotonic() - started < REFUSED_WITHIN_S:
            message = consumer.poll(0.2)
            if message is not None and message.error():
                error = message.error()
        assert error is not None, f"no error within {REFUSED_WITHIN_S} s"
        assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
        assert CLASSIC in error.str() and "ConsumerGroupHeartbeat" in error.str()
    finally:
        consumer.close()


def test_kafka_python_init_transactions_fails_fast_and_for_good(bootstrap):
    """kafka-python raises the bare error class (it never shows a server's message on this
    path): fatal, not retriable, and the same on a second call."""
    producer = KafkaProducer(bootstrap_servers=bootstrap, transactional_id="k-txn-python",
                             max_block_ms=30000)
    try:
        started = time.monotonic()
        with pytest.raises(TransactionalIdAuthorizationFailedError) as refused:
            producer.init_transactions()
        assert time.monotonic() - started < REFUSED_WITHIN_S
        assert not refused.value.retriable
        with pytest.raises(PyKafkaError):
            producer.init_transactions()
    finally:
        producer.close(timeout=5)


def test_confluent_kafka_init_transactions_fails_fast_with_the_sentence(bootstrap):
    producer = ConfluentProducer({"bootstrap.servers": bootstrap,
                                  "transactional.id": "k-txn-confluent"})
    started = time.monotonic()
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(30)
    assert time.monotonic() - started < REFUSED_WITHIN_S
    error = refused.value.args[0]
    assert error.fatal() and not error.retriable()
    assert error.code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    assert NO_TRANSACTIONS in error.str()
