"""gateway-kafka's request spans (spans.py): what a request's span says about it, read from
the decoded request kafka-python's classes build, and the error status of its answer."""

from __future__ import annotations

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import StatusCode
from tidemq.gatewaykafka import codec, spans


def _request(api_key: int, version: int, fields: dict):
    return codec.build(codec.REQUESTS[api_key], fields, version)


def test_a_produce_names_its_api_topic_and_partitions():
    request = _request(0, 8, {"transactional_id": None, "acks": -1, "timeout_ms": 1000,
                              "topic_data": [{"name": "orders", "partition_data": [
                                  {"index": 0, "records": b""}, {"index": 3, "records": b""}]}]})
    assert spans.request_attributes(0, "Produce", 8, request, "app-1", "librdkafka 2.15") == {
        "rpc.system": "kafka", "kafka.api_key": 0, "kafka.api": "Produce",
        "kafka.api_version": 8, "messaging.client.id": "app-1",
        "kafka.client_software": "librdkafka 2.15", "messaging.destination.name": "orders",
        "kafka.topics": ["orders"], "kafka.partition_count": 2}
    assert spans.span_name("Produce") == "kafka/Produce"


def test_a_fetch_of_two_topics_and_a_group_api():
    request = _request(1, 11, {
        "replica_id": -1, "max_wait_ms": 500, "min_bytes": 1, "max_bytes": 1 << 20,
        "isolation_level": 0, "session_id": 0, "session_epoch": -1, "rack_id": "",
        "forgotten_topics_data": [], "topics": [
            {"topic": "b", "partitions": [{"partition": 0, "current_leader_epoch": -1,
                                           "fetch_offset": 0, "log_start_offset": -1,
                                           "partition_max_bytes": 1024}]},
            {"topic": "a", "partitions": []}]})
    attributes = spans.request_attributes(1, "Fetch", 11, request, "", "")
    assert attributes["kafka.topics"] == ["a", "b"] and attributes["kafka.partition_count"] == 1
    assert "messaging.destination.name" not in attributes and "messaging.client.id" not in attributes
    heartbeat = _request(12, 3, {"group_id": "billing", "generation_id": 4,
                                 "member_id": "m-1", "group_instance_id": None})
    assert spans.request_attributes(12, "Heartbeat", 3, heartbeat, "", "")[
        "messaging.consumer.group.name"] == "billing"


def test_an_answer_with_error_codes_marks_the_span():
    span = TracerProvider().get_tracer("t").start_span("kafka/Produce")
    assert not spans.describe_answer(span, {"throttle_time_ms": 0, "responses": [
        {"name": "t", "partition_responses": [{"index": 0, "error_code": 0}]}]})
    assert span.status.status_code is StatusCode.UNSET
    assert spans.describe_answer(span, {"responses": [{"partition_responses": [
        {"error_code": 3}, {"error_code": 10}, {"error_code": 0}]}]})
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "MESSAGE_TOO_LARGE, UNKNOWN_TOPIC_OR_PARTITION"
    assert span.attributes["kafka.error_codes"] == (3, 10)
    span.end()


def _traceparent(n: int) -> bytes:
    return f"00-{n + 1:032x}-{n + 1:016x}-01".encode()


def test_a_records_traceparent_header_is_its_context_and_bad_ones_are_ignored():
    context = spans.record_context([("h", b"x"), ("traceparent", _traceparent(6)),
                                    ("tracestate", b"vendor=1")])
    assert (context.trace_id, context.span_id, context.is_remote) == (7, 7, True)
    assert context.trace_state.get("vendor") == "1"
    for headers in ([], [("traceparent", None)], [("traceparent", b"00-nonsense")],
                    [("traceparent", b"\xff\xfe")], [("Traceparent", _traceparent(1))],
                    [("traceparent", f"00-{0:032x}-{1:016x}-01".encode())]):
        assert spans.record_context(headers) is None, headers


def test_a_produce_span_links_to_each_records_context_up_to_the_bound():
    span = TracerProvider().get_tracer("t").start_span("kafka/Produce")
    contexts = [spans.record_context([("traceparent", _traceparent(n))]) for n in range(200)]
    added = spans.link_records(span, [
        ("orders", 0, 40, [(0, contexts[0]), (2, contexts[1])]),
        ("orders", 1, -1, [(0, contexts[2])]),                      # not stored: no offset
        ("audit", 0, 0, list(enumerate(contexts[3:]))),
    ])
    assert added == spans.MAX_RECORD_LINKS == 128
    assert len(span.links) == 128 and span.attributes["kafka.trace_links_dropped"] == 200 - 128
    first, second, unstored = span.links[:3]
    assert (first.context.trace_id, dict(first.attributes)) == (1, {
        "messaging.destination.name": "orders", "messaging.destination.partition.id": "0",
        "messaging.kafka.offset": 40})
    assert second.attributes["messaging.kafka.offset"] == 42
    assert "messaging.kafka.offset" not in unstored.attributes
    span.end()
