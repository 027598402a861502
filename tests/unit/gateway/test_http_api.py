"""The HTTP layer: validation, problem+json rendering, response shapes.

The backend is replaced by a stand-in here because these tests are about the HTTP contract;
the real path (gunicorn → name servers → brokers) is covered in tests/integration/gateway and
tests/e2e.
"""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.client import MessageExt, PullResult, PullStatus, SendResult, SendStatus
from tidemq.client.encoding import BatchEncoder
from tidemq.client.routes import BrokerGroup, QueueLayout, TopicRoute
from tidemq.common import errors, record
from tidemq.common.recall import RecallHandle
from tidemq.configclient import topic_settings
from tidemq.gateway.app import create_app
from tidemq.gateway.backend import GatewayBackend, TopicCreation
from tidemq.gateway.settings import GatewaySettings

MAX_MESSAGE_SIZE = 1024  # the settings the apps below are made with


class StubBackend:
    def __init__(self) -> None:
        self.sent: list = []
        self.topics = {"orders": 2}
        self.ordered: set[str] = set()
        self.failure: Exception | None = None

    def _maybe_fail(self):
        if self.failure:
            raise self.failure

    def create_topic(self, name, queues, *, order=False, config=None):
        self._maybe_fail()
        if name in self.topics:
            raise errors.AlreadyExists(f"topic {name!r} already exists",
                                       code="TOPIC_ALREADY_EXISTS")
        self.topics[name] = queues
        if order:
            self.ordered.add(name)
        return TopicCreation(name, queues, visible=name != "slow", brokers=["broker-a"])

    def topic_config(self, name):
        return topic_settings.effective({})

    def alter_topic(self, name, changes):
        self._maybe_fail()
        if name not in self.topics:
            raise errors.TopicNotExist(f"topic {name!r} does not exist")
        return topic_settings.effective({k: v for k, v in changes.items() if v is not None})

    def list_topics(self):
        return [{"name": n, "queues": q, "perm": 6, "order": False}
                for n, q in sorted(self.topics.items())]

    def route(self, topic):
        self._maybe_fail()
        if topic not in self.topics:
            raise errors.TopicNotExist(f"topic {topic!r} does not exist")
        return TopicRoute(topic, (QueueLayout("broker-a", 2, 2, 6),),
                          {"broker-a": BrokerGroup("c", "broker-a", {0: "h:1"})})

    def queue_offsets(self, topic, broker_name):
        return {0: (0, 5), 1: (0, 7)}

    describe_topic = GatewayBackend.describe_topic  # the real per-broker logic, over the stubs

    def send(self, messages):
        self._maybe_fail()
        # the real backend's producer encodes first, and its encoder checks every message
        BatchEncoder(max_message_size=MAX_MESSAGE_SIZE, compression="none",
                     compress_threshold=4096, born_host=record.pack_host("127.0.0.1", 0),
                     ).encode(messages)
        self.sent.extend(messages)
        return [SendResult(SendStatus.SEND_OK, f"{i:032X}", f"U{i}", "broker-a", i % 2, i // 2)
                for i in range(len(messages))]

    @property
    def producer(self):
        return self   # recall: the real backend's producer

    def recall(self, handle):
        self.recalled = RecallHandle.decode(handle)
        if self.recalled.unique_id == "U-late":
            raise errors.PreconditionFailed("it was due", code="MESSAGE_ALREADY_DELIVERED")
        return 1234

    def pull(self, topic, broker_name, queue_id, offset, max_messages, wait_ms=0,
             expression="*", expression_type="TAG"):
        self._maybe_fail()
        bodies = [b"hello", b"\xff\xfe binary"]
        messages = [MessageExt(topic, body, "t", ["k"], {"a": "1", "UNIQ_KEY": "U"}, broker_name,
                               queue_id, offset + i, "M" * 32, "U", 1, 2, 0)
                    for i, body in enumerate(bodies[:max_messages])]
        return PullResult(PullStatus.FOUND, messages, offset + len(messages), 0, 9)


@pytest.fixture
def backend():
    return StubBackend()


@pytest.fixture
def client(backend):
    app = create_app(backend, GatewaySettings(max_message_size=MAX_MESSAGE_SIZE))
    return app.test_client()


def assert_problem(response, status, code):
    assert response.status_code == status, response.get_data(as_text=True)
    assert response.mimetype == "application/problem+json"
    body = response.get_json(force=True)
    assert body["status"] == status and body["code"] == code
    assert body["title"] and body["detail"] and body["type"].startswith("https://")
    return body


def test_healthz_and_metrics(client):
    assert client.get("/healthz").get_json() == {"status": "ok"}
    client.get("/v1/topics")
    text = client.get("/metrics").get_data(as_text=True)
    assert "tidemq_gateway_http_requests_total" in text


BROWSER_ACCEPT = "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8"


@pytest.mark.parametrize("accept", [BROWSER_ACCEPT, "text/html"])
def test_the_root_sends_a_browser_to_the_console(client, accept):
    answer = client.get("/", headers={"Accept": accept})
    assert answer.status_code == 302 and answer.headers["Location"] == "/console/"


@pytest.mark.parametrize("accept", [None, "*/*", "application/json"])
def test_the_root_tells_a_client_what_is_served(client, accept):
    answer = client.get("/", headers={"Accept": accept} if accept else {})
    assert answer.status_code == 200 and answer.mimetype == "application/json"
    index = answer.get_json()
    assert index["console"] == "/console/" and index["openapi"] == "/openapi.json"
    assert index["health"] == "/healthz" and index["metrics"] == "/metrics"
    for key in ("openapi", "health", "metrics"):
        assert client.get(index[key]).status_code == 200, key


def test_create_topic_201_202_and_409(client):
    created = client.post("/v1/topics", json={"name": "payments", "queues": 8})
    assert created.status_code == 201
    assert created.get_json()["queues"] == 8 and created.headers["Location"] == "/v1/topics/payments"
    pending = client.post("/v1/topics", json={"name": "slow", "queues": 1})
    assert pending.status_code == 202 and "note" in pending.get_json()
    assert_problem(client.post("/v1/topics", json={"name": "orders", "queues": 2}),
                   409, "TOPIC_ALREADY_EXISTS")


def test_a_delayed_send_answers_a_recall_handle_that_recalls_it(client, backend):
    sent = client.post("/v1/topics/orders/messages", json={"messages": [
        {"body": "later", "delay_ms": 60_000}, {"body": "now"}]}).get_json()["results"]
    assert "recall_handle" not in sent[1]
    handle = sent[0]["recall_handle"]
    assert RecallHandle.decode(handle) == RecallHandle("orders", "broker-a", "U0", "U0")
    recalled = client.post("/v1/topics/orders/recall", json={"recall_handle": handle})
    assert recalled.status_code == 200
    assert recalled.get_json() == {"unique_id": "U0", "delivery_ms": 1234}
    late = RecallHandle("orders", "broker-a", "U-late").encode()
    assert_problem(client.post("/v1/topics/orders/recall", json={"recall_handle": late}),
                   412, "MESSAGE_ALREADY_DELIVERED")
    for bad in ("", "not-a-handle", RecallHandle("other", "broker-a", "U0").encode()):
        assert_problem(client.post("/v1/topics/orders/recall", json={"recall_handle": bad}),
                       400, "INVALID_RECALL_HANDLE")


def test_create_an_ordered_topic_as_the_cli_does(client, backend):
    created = client.post("/v1/topics", json={"name": "fifo", "queues": 2, "order": True})
    assert created.status_code == 201 and created.get_json()["order"] is True
    plain = client.post("/v1/topics", json={"name": "plain"})
    assert plain.get_json()["order"] is False
    assert backend.ordered == {"fifo"}


@pytest.mark.parametrize(("body", "code"), [
    ({"name": "bad name", "queues": 1}, "INVALID_TOPIC"),
    ({"name": "x" * 250, "queues": 1}, "INVALID_TOPIC"),
    ({"queues": 1}, "INVALID_TOPIC"),
    ({"name": "ok", "queues": 0}, "INVALID_QUEUE_COUNT"),
    ({"name": "ok", "queues": 1025}, "INVALID_QUEUE_COUNT"),
    ({"name": "ok", "queues": "4"}, "INVALID_QUEUE_COUNT"),
    ({"name": "ok", "queues": True}, "INVALID_QUEUE_COUNT"),
    ({"name": "ok", "order": "yes"}, "INVALID_ORDER"),
    ({"name": "ok", "order": 1}, "INVALID_ORDER"),
    ([1, 2], "INVALID_REQUEST"),
])
def test_create_topic_validation(client, body, code):
    assert_problem(client.post("/v1/topics", json=body), 400, code)


def test_empty_and_malformed_bodies_are_400(client):
    assert_problem(client.post("/v1/topics/orders/messages", data=b""), 400, "EMPTY_BODY")
    assert_problem(client.post("/v1/topics/orders/messages", data=b"{nope"), 400, "MALFORMED_JSON")
    assert_problem(client.post("/v1/topics", data=b"\xff\xfe"), 400, "MALFORMED_JSON")


def test_send_answers_every_message_and_decodes_bodies(client, backend):
    raw = bytes(range(256))
    response = client.post("/v1/topics/orders/messages", json={"messages": [
        {"body": "héllo", "key": "k1", "tag": "created", "properties": {"a": "1"}},
        {"body": base64.b64encode(raw).decode(), "encoding": "base64"},
    ]})
    assert response.status_code == 201
    results = response.get_json()["results"]
    assert [r["queue_offset"] for r in results] == [0, 0]
    assert set(results[0]) == {"status", "msg_id", "unique_id", "broker_name", "queue_id",
                               "queue_offset"}
    first, second = backend.sent
    assert first.body == "héllo".encode() and first.keys == ["k1"] and first.tags == "created"
    assert second.body == raw


@pytest.mark.parametrize(("messages", "status", "code"), [
    ([], 400, "INVALID_REQUEST"),
    ([{"body": ""}], 400, "MESSAGE_BODY_EMPTY"),
    ([{"body": 5}], 400, "INVALID_MESSAGE"),
    ([{"body": "x", "encoding": "rot13"}], 400, "INVALID_MESSAGE"),
    ([{"body": "***", "encoding": "base64"}], 400, "INVALID_MESSAGE"),
    ([{"body": "x", "properties": {"a": 1}}], 400, "INVALID_MESSAGE"),
    ([{"body": "x", "key": "two words"}], 400, "INVALID_MESSAGE"),
    ([{"body": "x", "tag": ["a"]}], 400, "INVALID_MESSAGE"),
    (["just a string"], 400, "INVALID_REQUEST"),
    ([{"body": "x" * 1025}], 413, "MESSAGE_TOO_LARGE"),
])
def test_send_validation(client, messages, status, code):
    assert_problem(client.post("/v1/topics/orders/messages", json={"messages": messages}),
                   status, code)


def test_a_request_larger_than_max_content_length_is_413(client):
    huge = json.dumps({"messages": [{"body": "x" * 3_000_000}]}).encode()
    body = assert_problem(client.post("/v1/topics/orders/messages", data=huge), 413,
                          "PAYLOAD_TOO_LARGE")
    limit = GatewaySettings(max_message_size=MAX_MESSAGE_SIZE).max_request_bytes
    assert f"over the limit of {limit} bytes" in body["detail"]


def test_request_spans_are_named_with_the_route_template_as_the_docs_write_it(backend):
    from opentelemetry.instrumentation.flask import FlaskInstrumentor
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter, provider = InMemorySpanExporter(), TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    app = create_app(backend, GatewaySettings(max_message_size=MAX_MESSAGE_SIZE))
    FlaskInstrumentor().instrument_app(app, tracer_provider=provider)
    try:
        app.test_client().get("/v1/topics/orders/queues/broker-a/0/messages?offset=0")
    finally:
        FlaskInstrumentor().uninstrument_app(app)
    assert [span.name for span in exporter.get_finished_spans()] == [
        "GET /v1/topics/{topic}/queues/{broker_name}/{queue_id}/messages"]


def test_default_limits_accept_a_4mib_body_as_base64():
    settings_ = GatewaySettings()
    assert settings_.max_request_bytes > 4 * 1024 * 1024 * 4 // 3


def test_backend_errors_map_to_their_http_status(client, backend):
    assert_problem(client.get("/v1/topics/unknown"), 404, "TOPIC_NOT_EXIST")
    backend.failure = errors.ServiceUnavailable("broker-a is down")
    assert_problem(client.post("/v1/topics/orders/messages", json={"messages": [{"body": "x"}]}),
                   503, "SERVICE_UNAVAILABLE")
    backend.failure = errors.BreakerOpen("open")
    assert_problem(client.get("/v1/topics/orders/queues/broker-a/0/messages"), 503, "CIRCUIT_OPEN")
    backend.failure = errors.DeadlineExceeded("slow")
    assert_problem(client.get("/v1/topics/orders"), 504, "DEADLINE_EXCEEDED")
    backend.failure = RuntimeError("boom")
    body = assert_problem(client.get("/v1/topics/orders"), 500, "INTERNAL_ERROR")
    assert "boom" not in body["detail"]


def test_http_errors_have_the_same_shape(client):
    assert_problem(client.get("/no/such/route"), 404, "NOT_FOUND")
    response = client.delete("/v1/topics")
    assert_problem(response, 405, "METHOD_NOT_ALLOWED")
    assert "GET" in response.headers["Allow"]


def test_describe_topic(client):
    body = client.get("/v1/topics/orders").get_json()
    assert body["brokers"][0]["broker_name"] == "broker-a"
    assert body["queues"] == [
        {"broker_name": "broker-a", "queue_id": 0, "min_offset": 0, "max_offset": 5},
        {"broker_name": "broker-a", "queue_id": 1, "min_offset": 0, "max_offset": 7},
    ]
    assert body["config"]["retention.ms"]["source"] == "default"
    assert body["config_unavailable"] is None


def test_describe_topic_says_why_its_settings_are_missing(client, backend, monkeypatch):
    """The config center out of reach: the route and offsets stand, and the answer names the
    failure instead of an empty config that reads as "nothing set"."""
    def unreachable(name):
        raise errors.ServiceUnavailable("config center 127.0.0.1:7070 did not answer")
    monkeypatch.setattr(backend, "topic_config", unreachable)
    body = client.get("/v1/topics/orders").get_json()
    assert body["queues"] and body["config"] == {}
    assert body["config_unavailable"] == {
        "code": "SERVICE_UNAVAILABLE", "detail": "config center 127.0.0.1:7070 did not answer"}


def test_fetch_renders_text_and_binary_bodies(client):
    body = client.get("/v1/topics/orders/queues/broker-a/1/messages?offset=3&max=2").get_json()
    assert body["next_offset"] == 5 and body["status"] == "FOUND"
    text, binary = body["messages"]
    assert text["body"] == "hello" and "encoding" not in text
    assert text["queue_offset"] == 3 and text["properties"] == {"a": "1"}
    assert binary["encoding"] == "base64"
    assert base64.b64decode(binary["body"]) == b"\xff\xfe binary"


@pytest.mark.parametrize("query", ["offset=-1", "offset=x", "max=0", "max=100000",
                                   "wait_ms=999999"])
def test_fetch_rejects_bad_query_parameters(client, query):
    assert_problem(client.get(f"/v1/topics/orders/queues/broker-a/0/messages?{query}"),
                   400, "INVALID_ARGUMENT")


def test_fetch_rejects_a_negative_queue_id(client):
    assert_problem(client.get("/v1/topics/orders/queues/broker-a/-1/messages"),
                   400, "INVALID_ARGUMENT")


_FUZZ_CLIENT = create_app(StubBackend(),
                          GatewaySettings(max_message_size=MAX_MESSAGE_SIZE)).test_client()


@settings(max_examples=150, deadline=None)
@given(payload=st.one_of(
    st.binary(max_size=200),
    st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=10),
                 lambda inner: st.lists(inner, max_size=4)
                 | st.dictionaries(st.sampled_from(["messages", "body", "key", "tag",
                                                    "encoding", "properties", "name",
                                                    "queues"]), inner, max_size=4),
                 max_leaves=12).map(lambda v: json.dumps(v).encode()),
))
def test_arbitrary_input_never_causes_a_500(payload):
    client = _FUZZ_CLIENT
    for path in ("/v1/topics", "/v1/topics/orders/messages"):
        response = client.post(path, data=payload)
        assert response.status_code < 500, response.get_data(as_text=True)


def test_config_center_routes_are_mounted_with_the_backend_config_client(backend):
    backend.config = object()
    app = create_app(backend, GatewaySettings())
    rules = {rule.rule for rule in app.url_map.iter_rules()}
    assert any(rule.startswith("/v1/config/") for rule in rules)
    assert backend.config in app.extensions.values()
