"""Every request body the gateway accepts is checked against its declared schema: an unknown
field is a 400 UNKNOWN_FIELD naming it (and the known ones), a wrong type a 400 with the
field's own code, and the same models describe the bodies in /openapi.json.

The backend is the HTTP tests' stand-in: these tests are about the HTTP contract."""

from __future__ import annotations

import json
import time
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.client import MessageExt
from tidemq.common import record
from tidemq.common.errors import InvalidArgument
from tidemq.configclient.groups import FIELD_RULES
from tidemq.gateway import bodies, messages, schema
from tidemq.gateway.app import create_app
from tidemq.gateway.settings import GatewaySettings

from tests.unit.gateway.test_http_api import MAX_MESSAGE_SIZE, StubBackend, assert_problem


class ConfigStub:
    """The config center as the group routes use it: no key exists, every write succeeds."""

    def get(self, key, revision=0):
        return None

    def put(self, key, value, expected_revision=None):
        return SimpleNamespace(succeeded=True, revision=1, current_mod_revision=0)


def gateway_client():
    backend = StubBackend()
    backend.config = ConfigStub()
    backend.ack = backend.change_invisible = lambda *args: "new-handle"
    backend.pop = backend.redrive = backend.dead_letters = lambda *args: []
    return create_app(backend, GatewaySettings(max_message_size=MAX_MESSAGE_SIZE)).test_client()


@pytest.fixture
def client():
    return gateway_client()


# (method, path, a valid body) for every route that takes a JSON body
ROUTES = [
    ("post", "/v1/topics", {"name": "payments", "queues": 2}),
    ("post", "/v1/topics/orders/messages", {"messages": [{"body": "x"}]}),
    ("post", "/v1/groups", {"name": "billing"}),
    ("patch", "/v1/groups/billing", {"consume_enable": True}),
    ("post", "/v1/groups/g/topics/orders/pop", {"max": 1}),
    ("post", "/v1/groups/g/topics/orders/ack", {"receipt_handle": "h"}),
    ("post", "/v1/groups/g/topics/orders/invisible", {"receipt_handle": "h", "invisible_ms": 5}),
    ("post", "/v1/groups/g/dlq/redrive", {"all": True}),
]


@pytest.mark.parametrize(("method", "path", "valid"), ROUTES)
def test_an_unknown_field_is_a_400_that_names_it(client, method, path, valid):
    response = getattr(client, method)(path, json={**valid, "colour": "red"})
    body = assert_problem(response, 400, "UNKNOWN_FIELD")
    assert '"colour"' in body["detail"] and "known fields: " in body["detail"]
    for known in valid:
        assert known in body["detail"].split("known fields: ")[1]


def test_an_unknown_field_inside_a_message_names_the_message(client):
    response = client.post("/v1/topics/orders/messages", json={"messages": [
        {"body": "a"}, {"body": "b", "dealy_ms": 5}]})
    body = assert_problem(response, 400, "UNKNOWN_FIELD")
    assert body["detail"].startswith('unknown field "dealy_ms" in messages[1]; known fields: '
                                     "body, encoding, key, keys, tag")


def test_a_misspelt_field_is_reported_before_the_field_it_makes_missing(client):
    body = assert_problem(client.post("/v1/topics/orders/messages",
                                      json={"mesages": [{"body": "x"}]}), 400, "UNKNOWN_FIELD")
    assert '"mesages"' in body["detail"] and "1 more problem" in body["detail"]


@pytest.mark.parametrize(("method", "path", "document", "code", "named"), [
    ("post", "/v1/topics", {"name": 5}, "INVALID_TOPIC", "name"),
    ("post", "/v1/topics", {"name": "t" * 250}, "INVALID_TOPIC", "1..249 characters, got 250"),
    ("post", "/v1/topics", {"name": "ok", "queues": 2.5}, "INVALID_QUEUE_COUNT", "queues"),
    ("post", "/v1/topics/orders/messages", {"messages": {"body": "x"}}, "INVALID_REQUEST",
     "messages"),
    ("post", "/v1/topics/orders/messages", {"messages": [{"body": "x", "keys": "k"}]},
     "INVALID_MESSAGE", "messages[0].keys"),
    ("post", "/v1/topics/orders/messages", {"messages": [{"body": "x", "encoding": 1}]},
     "INVALID_MESSAGE", "messages[0].encoding"),
    ("post", "/v1/groups", {"name": "g", "consume_enable": "no"}, "INVALID_SUBSCRIPTION_GROUP",
     "consume_enable"),
    ("post", "/v1/groups", {"name": "g", "retry_max_times": True}, "INVALID_SUBSCRIPTION_GROUP",
     "retry_max_times"),
    ("post", "/v1/groups", ["g"], "INVALID_SUBSCRIPTION_GROUP", "the request body"),
    ("patch", "/v1/groups/g", {"broker_id": "0"}, "INVALID_SUBSCRIPTION_GROUP", "broker_id"),
    ("post", "/v1/groups/g/topics/orders/pop", {"max": "3"}, "INVALID_ARGUMENT", "max"),
    ("post", "/v1/groups/g/topics/orders/pop", {"tag": ["a"]}, "INVALID_ARGUMENT", "tag"),
    ("post", "/v1/groups/g/topics/orders/pop", {"invisible_ms": 0},
     "INVALID_INVISIBLE_DURATION", "invisible_ms"),
    ("post", "/v1/groups/g/topics/orders/ack", {"receipt_handle": 7}, "INVALID_RECEIPT_HANDLE",
     "receipt_handle"),
    ("post", "/v1/groups/g/topics/orders/ack", {}, "INVALID_RECEIPT_HANDLE", "receipt_handle"),
    ("post", "/v1/groups/g/topics/orders/ack", {"receipt_handles": []}, "INVALID_RECEIPT_HANDLE",
     "receipt_handles"),
    ("post", "/v1/groups/g/topics/orders/ack", {"receipt_handles": ["a", ""]},
     "INVALID_RECEIPT_HANDLE", "receipt_handles[1]"),
    ("post", "/v1/groups/g/topics/orders/ack", {"receipt_handles": ["h"] * 1025},
     "INVALID_ARGUMENT", "1024"),
    ("post", "/v1/groups/g/topics/orders/ack", {"receipt_handle": "h", "receipt_handles": ["h"]},
     "INVALID_ARGUMENT", "not both"),
    ("post", "/v1/groups/g/topics/orders/invisible", {"receipt_handle": "h",
                                                      "invisible_ms": "5"},
     "INVALID_INVISIBLE_DURATION", "invisible_ms"),
    ("post", "/v1/groups/g/dlq/redrive", {"msg_ids": "7F00"}, "INVALID_REQUEST", "msg_ids"),
    ("post", "/v1/groups/g/dlq/redrive", {"all": "yes"}, "INVALID_REQUEST", "all"),
    ("post", "/v1/groups/g/dlq/redrive", {"all": True, "msg_ids": ["a"]}, "INVALID_REQUEST",
     "msg_ids"),
])
def test_a_wrong_type_is_a_400_with_the_fields_code(client, method, path, document, code, named):
    body = assert_problem(getattr(client, method)(path, json=document), 400, code)
    assert named in body["detail"]


@pytest.mark.parametrize(("path", "named"), [
    ("/v1/topics/orders/queues/broker-a/0/messages?offset=1.5", "offset"),
    ("/v1/topics/orders/queues/broker-a/0/messages?wait_ms=-1", "wait_ms"),
    ("/v1/groups/g/dlq?limit=abc", "limit"),
    ("/v1/groups/g/dlq?limit=1001", "limit"),
    ("/v1/config/tidemq/x?revision=-3", "revision"),
    ("/v1/config/tidemq/x?prefix=maybe", "prefix"),
])
def test_a_bad_query_parameter_is_a_400_naming_it(client, path, named):
    body = assert_problem(client.get(path), 400, "INVALID_ARGUMENT")
    assert f"query parameter {named!r}" in body["detail"]


def test_unknown_query_parameters_are_tolerated_and_empty_ones_take_the_default(client):
    response = client.get("/v1/topics/orders/queues/broker-a/0/messages?utm_source=x&offset=")
    assert response.status_code == 200 and response.get_json()["messages"][0]["queue_offset"] == 0


def test_pop_takes_an_empty_body_as_the_defaults():
    popped = []
    backend = StubBackend()
    backend.pop = lambda *args: popped.append(args) or []
    app = create_app(backend, GatewaySettings(max_message_size=MAX_MESSAGE_SIZE))
    assert app.test_client().post("/v1/groups/g/topics/orders/pop", data=b"").status_code == 200
    assert popped == [("g", "orders", 16, bodies.DEFAULT_INVISIBLE_MS, 0, "*", "TAG")]


def test_every_route_that_takes_a_json_body_declares_its_schema():
    """A new POST/PATCH route without @accepts_body would read its body unchecked."""
    app = create_app(StubBackend())
    raw_value_routes = {"/v1/config/<path:key>", "/v1/config/"}  # PUT: the body is the value
    for rule in app.url_map.iter_rules():
        # the console's forms are not JSON: its views pass them on to validated routes
        console_form = rule.endpoint.startswith("tidemq_console.")
        if rule.methods & {"POST", "PATCH"} and rule.rule not in raw_value_routes \
                and not console_form:
            view = app.view_functions[rule.endpoint]
            assert getattr(view, schema.BODY_ATTR, None) is not None, rule.rule


def test_the_openapi_document_is_built_from_the_same_models():
    spec = create_app(StubBackend()).test_client().get("/openapi.json").get_json()
    components = spec["components"]["schemas"]
    assert spec["openapi"] == "3.1.0"
    send = spec["paths"]["/v1/topics/{topic}/messages"]["post"]["requestBody"]
    assert send["content"]["application/json"]["schema"] == {
        "$ref": "#/components/schemas/SendRequest"}
    assert components["SendMessage"] == bodies.SendMessage.model_json_schema(
        ref_template="#/components/schemas/{model}")
    assert components["SendMessage"]["additionalProperties"] is False
    assert components["SendRequest"]["properties"]["messages"]["x-error-code"] == \
        "INVALID_REQUEST"
    assert components["TopicCreateRequest"]["properties"]["queues"]["x-error-code"] == \
        "INVALID_QUEUE_COUNT"
    assert set(components["GroupCreateRequest"]["properties"]) == {"name", *FIELD_RULES}
    dlq = spec["paths"]["/v1/groups/{group}/dlq"]["get"]["parameters"]
    assert {"in": "query", "name": "limit"}.items() <= dlq[1].items()
    assert dlq[1]["schema"]["maximum"] == 1000


_FUZZ = gateway_client()
_FIELDS = sorted({name for model in (bodies.SendMessage, bodies.PopRequest, bodies.RedriveRequest,
                                     bodies.InvisibleRequest, bodies.GroupCreateRequest)
                  for name in model.model_fields} | {"messages", "dealy_ms"})


@settings(max_examples=100, deadline=None)
@given(route=st.sampled_from(ROUTES), document=st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(_FIELDS), inner, max_size=4), max_leaves=10))
def test_no_body_makes_any_route_answer_500(route, document):
    method, path, valid = route
    merged = {**valid, **document} if isinstance(document, dict) else document
    for sent in (document, merged):  # alone, and over a valid body (reaches the backend)
        response = getattr(_FUZZ, method)(path, data=json.dumps(sent))
        assert response.status_code < 500, response.get_data(as_text=True)
        if response.status_code == 400:
            assert response.get_json()["detail"]


# -- FIFO message groups and delivery times on send ---------------------------------------

@pytest.mark.parametrize(("message", "code", "named"), [
    ({"body": "x", "delay_ms": -1}, "INVALID_DELAY", "messages[0].delay_ms"),
    ({"body": "x", "deliver_at": -5}, "INVALID_DELAY", "messages[0].deliver_at"),
    ({"body": "x", "delay_ms": "5"}, "INVALID_DELAY", "messages[0].delay_ms"),
    ({"body": "x", "delay_ms": 1.5}, "INVALID_DELAY", "messages[0].delay_ms"),
    ({"body": "x", "deliver_at": 2**60}, "INVALID_DELAY", "messages[0].deliver_at"),
    ({"body": "x", "delay_ms": 10, "deliver_at": 1795000000000}, "INVALID_DELAY",
     "not both"),
    ({"body": "x", "delay_ms": 0, "deliver_at": 0}, "INVALID_DELAY", "not both"),
    ({"body": "x", "message_group": 5}, "INVALID_MESSAGE", "messages[0].message_group"),
    ({"body": "x", "message_group": "a\nb"}, "INVALID_MESSAGE", "messages[0].message_group"),
    ({"body": "x", "message_group": "g" * 256}, "INVALID_MESSAGE", "messages[0].message_group"),
])
def test_bad_delays_and_message_groups_are_refused_with_their_codes(client, message, code,
                                                                    named):
    body = assert_problem(client.post("/v1/topics/orders/messages",
                                      json={"messages": [message]}), 400, code)
    assert named in body["detail"]


def test_delay_due_time_and_message_group_reach_the_message():
    request = bodies.SendRequest.model_validate({"messages": [
        {"body": "a", "delay_ms": 1500, "message_group": "order-1"},
        {"body": "b", "deliver_at": 1795000000000},
        {"body": "c", "delay_ms": 0},
        {"body": "d"}]})
    a, b, c, d = messages.parse_messages("orders", request, now_ms=1_000_000)
    assert (a.deliver_at_ms, a.message_group) == (1_001_500, "order-1")
    assert (b.deliver_at_ms, b.message_group) == (1795000000000, "")
    assert c.deliver_at_ms == d.deliver_at_ms == 0
    assert a.delay_level == 0


def test_delay_ms_counts_from_when_the_gateway_received_the_request(client):
    backend = client.application.extensions["tidemq_backend"]
    before = int(time.time() * 1000)
    response = client.post("/v1/topics/orders/messages", json={"messages": [
        {"body": "x", "delay_ms": 60_000, "message_group": "g-1"}]})
    after = int(time.time() * 1000)
    assert response.status_code == 201, response.get_data(as_text=True)
    (sent,) = backend.sent
    assert before + 60_000 <= sent.deliver_at_ms <= after + 60_000
    assert sent.message_group == "g-1"


def test_consumed_messages_show_their_message_group():
    message = MessageExt("orders", b"x", "", [], {record.PROP_MESSAGE_GROUP: "g-1", "a": "1"},
                         "broker-a", 0, 0, "M" * 32, "U", 1, 2, 0)
    rendered = messages.message_json(message)
    assert rendered["message_group"] == "g-1" and rendered["properties"] == {"a": "1"}


def test_the_send_schema_documents_the_new_fields():
    properties = bodies.SendMessage.model_json_schema()["properties"]
    assert properties["delay_ms"]["minimum"] == 0 and properties["deliver_at"]["minimum"] == 0
    assert properties["delay_ms"]["x-error-code"] == "INVALID_DELAY"
    assert properties["message_group"]["maxLength"] == 255


@settings(max_examples=200, deadline=None)
@given(name=st.text(min_size=1, max_size=12).filter(
           lambda n: n not in bodies.SendMessage.model_fields),
       count=st.integers(1, 5), data=st.data())
def test_any_unknown_field_in_any_message_is_named_with_its_place(name, count, data):
    index = data.draw(st.integers(0, count - 1))
    messages = [{"body": f"m{i}", "message_group": "g"} for i in range(count)]
    messages[index][name] = data.draw(st.none() | st.integers() | st.text(max_size=4))
    with pytest.raises(InvalidArgument) as refused:
        schema.parse(bodies.SendRequest, {"messages": messages})
    assert refused.value.code == "UNKNOWN_FIELD"
    assert refused.value.message.startswith(f'unknown field "{name}" in messages[{index}]; ')


def test_an_integral_number_written_with_a_fraction_is_that_integer():
    """JSON Schema's "integer" takes 537.0; strings, booleans and true fractions stay refused."""
    assert bodies.TopicCreateRequest.model_validate({"name": "t", "queues": 4.0}).queues == 4
    message = bodies.SendRequest.model_validate(
        {"messages": [{"body": "x", "delay_ms": 1037.0}]}).messages[0]
    assert message.delay_ms == 1037 and type(message.delay_ms) is int
    for bad in (4.5, "4", True):
        with pytest.raises(ValueError):
            bodies.TopicCreateRequest.model_validate({"name": "t", "queues": bad})


def test_the_redrive_schema_says_msg_ids_or_all():
    choices = bodies.RedriveRequest.model_json_schema()["anyOf"]
    assert [c["required"] for c in choices] == [["msg_ids"], ["all"]]
