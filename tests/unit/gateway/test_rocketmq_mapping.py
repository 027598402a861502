"""gateway-grpc's protobuf mapping without a network: the ids it hands out decode back, a
RocketMQ message survives pb -> TideMQ record bytes -> pb, errors get RocketMQ codes, and the
Telemetry answers carry what the official clients read."""

from __future__ import annotations

import gzip
import hashlib
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rocketmq.grpc_protocol import definition_pb2 as pb
from tidemq.client.encoding import BatchEncoder
from tidemq.client.message import decode_records
from tidemq.common import errors, record
from tidemq.common.receipt import ReceiptHandle
from tidemq.gatewaygrpc.handles import GatewayReceipt, TransactionId
from tidemq.gatewaygrpc.messages import timestamp_ms, to_message, to_pb
from tidemq.gatewaygrpc.sessions import ClientSessions
from tidemq.gatewaygrpc.statuses import code_of, not_implemented
from tidemq.gatewaygrpc.telemetry import ServerSettings, settings_reply

names = st.text(st.sampled_from("abcXYZ019_-%|"), min_size=1, max_size=40)
text = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=30)
offsets = st.integers(0, 2**62)


@given(names, st.text(st.sampled_from("0123456789ABCDEF"), min_size=32, max_size=32), names)
def test_transaction_id_round_trips(broker, msg_id, unique_id):
    txn = TransactionId(broker, msg_id, unique_id)
    assert TransactionId.decode(txn.encode()) == txn


@given(names, offsets, names, st.integers(0, 1023), offsets, offsets)
def test_receipt_round_trips_and_names_its_broker(broker, checkpoint, topic, queue_id,
                                                  queue_offset, physical_offset):
    handle = ReceiptHandle(broker, checkpoint, topic, queue_id, queue_offset).encode()
    receipt = GatewayReceipt(handle, physical_offset)
    decoded = GatewayReceipt.decode(receipt.encode())
    assert decoded == receipt and decoded.broker_name == broker


@pytest.mark.parametrize("garbage", ["", "x", "abc.def", "abc.", ".12", "e30.zz"])
def test_damaged_ids_are_bad_requests_with_their_codes(garbage):
    with pytest.raises(errors.InvalidArgument) as bad_receipt:
        GatewayReceipt.decode(garbage)
    with pytest.raises(errors.InvalidArgument) as bad_txn:
        TransactionId.decode(garbage)
    assert bad_receipt.value.code == "INVALID_RECEIPT_HANDLE"
    assert bad_txn.value.code == "INVALID_TRANSACTION_ID"
    assert code_of(bad_receipt.value) == pb.INVALID_RECEIPT_HANDLE
    assert code_of(bad_txn.value) == pb.INVALID_TRANSACTION_ID


def _stored(message) -> object:
    """The message as a consumer reads it back: encoded into CommitLog record bytes the way
    the gateway's producer does, then decoded."""
    encoder = BatchEncoder(max_message_size=1 << 20, compression="none", compress_threshold=1 << 30,
                           born_host=record.pack_host("10.0.0.1", 0))
    raw, _ = encoder.encode([message])
    return decode_records(raw, "broker-a")[0]


@given(body=st.binary(min_size=1, max_size=200), tag=st.one_of(st.just(""), names),
       keys=st.lists(names, max_size=3, unique=True),
       props=st.dictionaries(names.filter(lambda n: not n.isupper()), text, max_size=3),
       group=st.one_of(st.just(""), names), gzipped=st.booleans(),
       deliver_at=st.integers(1_600_000_000_000, 4_000_000_000_000))
def test_message_survives_pb_record_pb(body, tag, keys, props, group, gzipped, deliver_at):
    sent = pb.Message(body=gzip.compress(body) if gzipped else body)
    sent.topic.name = "Orders"
    sent.user_properties.update(props)
    system = sent.system_properties
    system.tag, system.message_id = tag, "01ABCDEF"
    system.keys.extend(keys)
    system.body_encoding = pb.GZIP if gzipped else pb.IDENTITY
    if group:
        system.message_group = group
    else:  # the Python client 5.1.2 puts epoch ms into Timestamp.seconds
        system.delivery_timestamp.seconds = deliver_at
    back = to_pb(_stored(to_message(sent)), receipt_handle="h.1", invisible_ms=1500)
    assert back.body == body and back.topic.name == "Orders"
    assert dict(back.user_properties) == props
    got = back.system_properties
    assert (got.tag, got.message_id, list(got.keys)) == (tag, "01ABCDEF", keys)
    assert (got.body_digest.type, got.body_digest.checksum) == (
        pb.MD5, hashlib.md5(body).hexdigest().upper())   # as the proxy: every client checks it
    assert got.delivery_attempt == 1 and got.receipt_handle == "h.1"
    assert got.invisible_duration.seconds == 1 and got.invisible_duration.nanos == 500_000_000
    if group:
        assert got.message_group == group and got.message_type == pb.FIFO
    else:
        assert timestamp_ms(got.delivery_timestamp) == deliver_at
        assert got.message_type == pb.DELAY


def test_a_transactional_message_with_a_group_is_refused():
    sent = pb.Message(body=b"x")
    sent.topic.name = "Orders"
    sent.system_properties.message_group = "g"
    with pytest.raises(errors.InvalidArgument) as refused:
        to_message(sent, transactional=True)
    assert code_of(refused.value) == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE


@given(st.binary(max_size=200))
def test_a_body_digest_a_client_sends_is_checked(body):
    def sent(kind, checksum) -> pb.Message:
        message = pb.Message(body=body)
        message.topic.name = "t"
        message.system_properties.body_digest.type = kind
        message.system_properties.body_digest.checksum = checksum
        return message

    crc = zlib.crc32(body)
    for kind, checksum in ((pb.CRC32, f"{crc:X}"), (pb.CRC32, f"{crc:08x}"),
                           (pb.MD5, hashlib.md5(body).hexdigest()),
                           (pb.SHA1, hashlib.sha1(body).hexdigest().upper())):
        assert to_message(sent(kind, checksum)).body == body   # any case, any zero-padding
    for kind, checksum in ((pb.CRC32, f"{crc ^ 1:X}"), (pb.CRC32, "zz"),
                           (pb.MD5, hashlib.md5(body + b"x").hexdigest())):
        with pytest.raises(errors.InvalidArgument) as damaged:
            to_message(sent(kind, checksum))
        assert damaged.value.code == "MESSAGE_CORRUPTED"
        assert code_of(damaged.value) == pb.MESSAGE_CORRUPTED
    with pytest.raises(errors.InvalidArgument) as unknown:
        to_message(sent(99, "00"))
    assert unknown.value.code == "UNSUPPORTED_DIGEST" and code_of(unknown.value) == pb.UNSUPPORTED


def test_error_codes():
    assert code_of(errors.TopicNotExist("gone")) == pb.TOPIC_NOT_FOUND
    assert code_of(errors.PreconditionFailed("late", code="RECEIPT_HANDLE_EXPIRED")) == \
        pb.INVALID_RECEIPT_HANDLE
    assert code_of(errors.ResourceExhausted("busy")) == pb.TOO_MANY_REQUESTS
    assert code_of(errors.ServiceUnavailable("down")) == pb.INTERNAL_SERVER_ERROR
    assert code_of(not_implemented("PullMessage")) == pb.NOT_IMPLEMENTED


SERVER = ServerSettings(max_body_size=4096, long_polling_timeout_s=20, receive_batch_size=32)


def test_settings_answers_producers_and_push_consumers():
    producer = pb.Settings(client_type=pb.PRODUCER)
    producer.publishing.topics.add(name="Orders")
    answer = settings_reply(producer, SERVER).settings
    assert answer.publishing.max_body_size == 4096
    assert answer.backoff_policy.WhichOneof("strategy") == "exponential_backoff"
    consumer = pb.Settings(client_type=pb.PUSH_CONSUMER)
    consumer.subscription.group.name = "billing"
    answer = settings_reply(consumer, SERVER, fifo=True, max_attempts=4).settings
    assert answer.subscription.fifo and answer.subscription.long_polling_timeout.seconds == 20
    assert answer.backoff_policy.max_attempts == 4
    assert answer.backoff_policy.customized_backoff.next[0].seconds == 1


def test_check_backs_go_round_robin_to_producers_of_the_topic():
    sessions = ClientSessions()
    a, b, other = sessions.open("a"), sessions.open("b"), sessions.open("c")
    sessions.update(a, publishing=["Orders"])
    sessions.update(b, publishing=["Orders", "Pay"])
    sessions.update(other, publishing=["Pay"])
    assert not sessions.forward_check("Nobody", object(), "t0")
    for i in range(4):
        assert sessions.forward_check("Orders", object(), f"t{i}")
    assert (a.outbox.qsize(), b.outbox.qsize(), other.outbox.qsize()) == (2, 2, 0)
    sessions.close(a)
    assert sessions.forward_check("Orders", object(), "t9") and b.outbox.qsize() == 3


@pytest.mark.parametrize("topic", ["bad topic!", "", "x" * 250, ".."])
def test_an_illegal_topic_name_is_illegal_topic_without_a_lookup(topic):
    """The Node.js client's send to "bad topic!" got TOPIC_NOT_FOUND after a name-server
    lookup; RocketMQ's proxy answers ILLEGAL_TOPIC."""
    from tidemq.gatewaygrpc.proxy import MessagingProxy

    proxy = MessagingProxy("127.0.0.1:1", producer_group="g", rpc_timeout_s=0.1)
    try:
        with pytest.raises(errors.InvalidArgument) as refused:
            proxy.queues(topic)
    finally:
        proxy.close()
    assert code_of(refused.value) == pb.ILLEGAL_TOPIC


def test_a_change_of_invisible_time_to_zero_is_visible_again_now():
    """The Node.js client 1.0.8 nacks with 0 ms when it has no backoff; the broker refused 0
    (BAD_REQUEST, so the client retried the nack every second and never consumed again)."""
    from tidemq.gatewaygrpc.proxy import MessagingProxy

    proxy = MessagingProxy("127.0.0.1:1", producer_group="g", rpc_timeout_s=0.1)
    sent = []
    renewed = ReceiptHandle("broker-a", 2, "T", 0, 7).encode()

    def call(topic, broker_name, method, request):
        sent.append((broker_name, method, request))
        return type("Reply", (), {"receipt_handle": renewed})()

    proxy._call = call
    receipt = GatewayReceipt(ReceiptHandle("broker-a", 1, "T", 0, 7).encode(), 99).encode()
    try:
        handle = proxy.change_invisible("grp", "T", receipt, 0)
    finally:
        proxy.close()
    [(broker_name, method, request)] = sent
    assert (broker_name, method, request.invisible_duration_ms) == (
        "broker-a", "ChangeInvisibleDuration", 1)
    assert GatewayReceipt.decode(handle) == GatewayReceipt(renewed, 99)
    assert code_of(errors.InvalidArgument("0", code="INVALID_INVISIBLE_DURATION")) == \
        pb.ILLEGAL_INVISIBLE_TIME
