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
