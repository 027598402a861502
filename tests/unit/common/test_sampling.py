"""QuietOperationsSampler with the real OpenTelemetry SDK: routine root spans are dropped,
users' spans and every span under a sampled parent are kept."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from tidemq.common.sampling import (
    QuietOperationsSampler,
    is_quiet,
    operation,
    operations,
    parse_operations,
)
from tidemq.common.settings import ServiceSettings


@pytest.fixture
def traced():
    exporter = InMemorySpanExporter()
    sampler = QuietOperationsSampler()
    provider = TracerProvider(sampler=sampler)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider.get_tracer("test"), exporter, sampler
    provider.shutdown()


def names(exporter) -> list[str]:
    return [span.name for span in exporter.get_finished_spans()]


def test_routine_root_spans_are_dropped_users_are_kept(traced):
    tracer, exporter, _ = traced
    for name in ("/tidemq.v1.BrokerService/Heartbeat", "/tidemq.v1.NameServerService/"
                 "RegisterBroker", "/grpc.health.v1.Health/Check", "GET /healthz"):
        with tracer.start_as_current_span(name), \
                tracer.start_as_current_span("/tidemq.v1.ConfigService/Get"):
            pass   # a call made while handling a routine one: dropped with it
    with tracer.start_as_current_span("/tidemq.v1.BrokerService/Send"):
        pass
    assert names(exporter) == ["/tidemq.v1.BrokerService/Send"]


def test_offset_polls_are_quiet_as_roots_and_kept_inside_a_users_request(traced):
    """The console's lag and offset polls (and a consumer's own look-ups) are internal; a
    user's GET /v1/topics/{topic} that reads the offsets keeps them."""
    tracer, exporter, _ = traced
    for method in ("GetQueueOffsets", "QueryOffsets"):
        with tracer.start_as_current_span(f"/tidemq.v1.BrokerService/{method}"):
            pass
    with tracer.start_as_current_span("GET /v1/topics/{topic}"), \
            tracer.start_as_current_span("/tidemq.v1.BrokerService/GetQueueOffsets"):
        pass
    assert names(exporter) == ["/tidemq.v1.BrokerService/GetQueueOffsets",
                               "GET /v1/topics/{topic}"]


def test_a_quiet_operation_inside_a_users_request_is_kept(traced):
    tracer, exporter, _ = traced
    with tracer.start_as_current_span("POST /v1/topics/orders/messages"), \
            tracer.start_as_current_span("/tidemq.v1.ConfigService/Watch"):
        pass
    assert names(exporter) == ["/tidemq.v1.ConfigService/Watch",
                               "POST /v1/topics/orders/messages"]


def test_the_list_can_change_while_running(traced):
    tracer, exporter, sampler = traced
    sampler.quiet = parse_operations("Send, Pull")
    for name in ("/tidemq.v1.BrokerService/Send", "/tidemq.v1.BrokerService/Heartbeat"):
        with tracer.start_as_current_span(name):
            pass
    assert names(exporter) == ["/tidemq.v1.BrokerService/Heartbeat"]


def test_operation_names_and_the_setting():
    assert operation("/tidemq.v1.BrokerService/Pull") == "Pull"
    assert operation("GET /healthz") == "healthz"
    assert operation("publish orders") == "publish orders"
    assert parse_operations(ServiceSettings().trace_quiet_operations) == \
        QuietOperationsSampler().quiet


def test_an_entry_can_name_a_whole_grpc_service():
    assert operations("/tidemq.v1.ConfigService/Put") == ("Put", "ConfigService")
    assert operations("GET /v1/topics/{topic}") == ("{topic}",)
    assert is_quiet("/tidemq.v1.ConfigService/Get", frozenset({"ConfigService"}))
    assert not is_quiet("/tidemq.v1.BrokerService/Send", frozenset({"ConfigService"}))
    assert not is_quiet("GET /v1/ConfigService", frozenset({"Put"}))


def test_the_control_planes_own_calls_are_quiet_by_default(traced):
    tracer, exporter, _ = traced
    for name in ("/tidemq.v1.ConfigService/Put", "/tidemq.v1.ConfigService/Get",
                 "/tidemq.v1.ConfigService/LeaseGrant",
                 "/tidemq.v1.NameServerService/AlterInSyncSet",
                 "/tidemq.v1.NameServerService/GetRouteInfo", "GET /console/series",
                 "POST /v1/topics/{topic}/messages", "/tidemq.v1.BrokerService/Ack"):
        with tracer.start_as_current_span(name):
            pass
    assert names(exporter) == ["POST /v1/topics/{topic}/messages",
                               "/tidemq.v1.BrokerService/Ack"]
