"""Message validation, record encoding by the producer and decoding by consumers."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.client import Message, Producer
from tidemq.client.message import decode_records
from tidemq.client.routes import TopicRoute, parse_addrs
from tidemq.common import record
from tidemq.common.errors import InvalidArgument, PayloadTooLarge
from tidemq.common.topic_names import validate_topic_name
from tidemq.v1 import nameserver_pb2


@pytest.mark.parametrize("name", ["", "a b", "x" * 250, "topic/1", "ü", ".", ".."])
def test_bad_topic_names_are_invalid_topic(name):
    with pytest.raises(InvalidArgument) as info:
        validate_topic_name(name)
    assert info.value.code == "INVALID_TOPIC"


@pytest.mark.parametrize("name", ["a", "Orders_2024", "%RETRY%g", "a|b-c", "x" * 249,
                                  "orders.v1", "0114-sticky_partitioning.cpp", "...", ".a"])
def test_good_topic_names(name):
    assert validate_topic_name(name) == name


def test_message_validation_errors_have_precise_codes():
    with pytest.raises(InvalidArgument) as empty:
        Message("t", b"").validate()
    assert empty.value.code == "MESSAGE_BODY_EMPTY"
    with pytest.raises(PayloadTooLarge) as big:
        Message("t", b"x" * 11).validate(max_message_size=10)
    assert big.value.code == "MESSAGE_TOO_LARGE" and big.value.http_status == 413
    with pytest.raises(InvalidArgument):
        Message("t", b"x", keys=["has space"]).validate()


@pytest.fixture(scope="module")
def producer():
    # No RPC is made: encoding is local. The address is never dialled.
    with Producer("127.0.0.1:1", compress_threshold=64) as p:
        yield p


@settings(max_examples=60, deadline=None)
@given(bodies=st.lists(st.binary(min_size=1, max_size=300), min_size=1, max_size=5),
       tag=st.sampled_from(["", "created", "paid"]),
       props=st.dictionaries(st.text("abcxyz", min_size=1, max_size=5),
                             st.text("0123456789 ", max_size=8), max_size=3))
def test_encoded_batches_decode_to_the_same_messages(producer, bodies, tag, props):
    messages = [Message("orders", b, tags=tag, keys=["k1", "k2"], properties=props)
                for b in bodies]
    raw, unique_ids = producer._encode(messages)
    decoded = decode_records(raw, "broker-a")
    assert [m.body for m in decoded] == bodies
    assert [m.unique_id for m in decoded] == unique_ids
    assert len(set(unique_ids)) == len(unique_ids)
    for m in decoded:
        assert m.tags == tag and m.keys == ["k1", "k2"] and m.user_properties == props
        assert m.broker_name == "broker-a" and m.born_timestamp > 0


def test_large_bodies_are_compressed_and_transparently_decompressed(producer):
    body = b"abcdefgh" * 1000
    raw, _ = producer._encode([Message("orders", body)])
    rec = next(record.iter_records(raw))
    assert rec.sys_flag & record.SYS_FLAG_COMPRESSED
    assert len(rec.body) < len(body)
    assert decode_records(raw)[0].body == body


def test_no_compression_when_disabled():
    with Producer("127.0.0.1:1", compression="none", compress_threshold=1) as p:
        raw, _ = p._encode([Message("orders", b"z" * 5000)])
    assert not next(record.iter_records(raw)).sys_flag & record.SYS_FLAG_COMPRESSED
    with pytest.raises(InvalidArgument):
        Producer("127.0.0.1:1", compression="lzma")


def test_route_lists_writable_queues_of_masters_only():
    data = nameserver_pb2.TopicRouteData(
        queue_datas=[
            nameserver_pb2.QueueData(broker_name="broker-a", read_queue_nums=2,
                                     write_queue_nums=2, perm=6),
            nameserver_pb2.QueueData(broker_name="broker-b", read_queue_nums=3,
                                     write_queue_nums=3, perm=2),
            nameserver_pb2.QueueData(broker_name="broker-c", read_queue_nums=1,
                                     write_queue_nums=1, perm=6),
        ],
        broker_datas=[
            nameserver_pb2.BrokerData(cluster="c", broker_name="broker-a",
                                      broker_addrs={0: "h:1", 1: "h:2"}),
            nameserver_pb2.BrokerData(cluster="c", broker_name="broker-b", broker_addrs={0: "h:3"}),
            nameserver_pb2.BrokerData(cluster="c", broker_name="broker-c", broker_addrs={1: "h:4"}),
        ],
    )
    route = TopicRoute.from_proto("t", data)
    assert [(q.broker_name, q.queue_id) for q in route.write_queues()] == [
        ("broker-a", 0), ("broker-a", 1)]
    assert len(route.read_queues()) == 6
    assert route.master_addr("broker-a") == "h:1"


def test_parse_addrs():
    assert parse_addrs("a:1; b:2,c:3") == ["a:1", "b:2", "c:3"]
    with pytest.raises(InvalidArgument):
        parse_addrs(" ; ")


def test_the_trace_context_rides_in_the_message_so_consumers_can_link(producer):
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from tidemq.common.tracing import extract_context

    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("send orders") as span:
        raw, _ = producer._encode([Message("orders", b"traced")])
    (message,) = decode_records(raw)
    assert message.properties[record.PROP_TRACE_CONTEXT].startswith("00-")
    assert message.user_properties == {}
    linked = trace.get_current_span(extract_context(message.trace_carrier)).get_span_context()
    assert linked.trace_id == span.get_span_context().trace_id
    assert linked.span_id == span.get_span_context().span_id
