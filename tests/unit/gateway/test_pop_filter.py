"""The HTTP pop's filter: `filter_type` "SQL92" with a `filter` reaches the backend as a SQL92
subscription; bad SQL, an unknown filter type or a tag beside SQL are a 400 INVALID_FILTER
naming the problem (for SQL, its position). The backend is the HTTP tests' stand-in."""

from __future__ import annotations

import pytest
from tidemq.gateway.app import create_app
from tidemq.gateway.settings import GatewaySettings

from tests.unit.gateway.test_http_api import MAX_MESSAGE_SIZE, StubBackend, assert_problem

POP = "/v1/groups/g/topics/orders/pop"


@pytest.fixture
def popped_and_client():
    popped = []
    backend = StubBackend()
    backend.pop = lambda *args: popped.append(args) or []
    app = create_app(backend, GatewaySettings(max_message_size=MAX_MESSAGE_SIZE))
    return popped, app.test_client()


@pytest.mark.parametrize(("document", "subscription"), [
    ({"filter_type": "SQL92", "filter": "amount > 5 AND region IN ('eu')"},
     ("amount > 5 AND region IN ('eu')", "SQL92")),
    ({"filter_type": "TAG", "filter": "a || b"}, ("a || b", "TAG")),
    ({"tag": "a"}, ("a", "TAG")),
    ({"tag": "a", "filter": "a"}, ("a", "TAG")),
    ({}, ("*", "TAG")),
])
def test_the_filter_reaches_the_backend(popped_and_client, document, subscription):
    popped, client = popped_and_client
    assert client.post(POP, json=document).status_code == 200
    assert popped[-1][-2:] == subscription


@pytest.mark.parametrize(("document", "detail"), [
    ({"filter_type": "SQL92", "filter": "amount >"}, "at position 8"),
    ({"filter_type": "SQL92", "filter": "amount > 'x'"}, "cannot be ordered"),
    ({"filter_type": "SQL92"}, "empty SQL92 filter"),
    ({"filter_type": "SQL92", "filter": "a = 1", "tag": "x"}, "not both"),
    ({"filter_type": "XPATH", "filter": "a"}, "filter_type"),
    ({"filter_type": "SQL92", "filter": 5}, "filter"),
    ({"filter": "a", "tag": "b"}, "not two tag expressions"),
    ({"filter_type": "SQL92", "filter": "a = 1 OR " * 500 + "a = 1"}, "filter"),
])
def test_a_bad_filter_is_a_400_invalid_filter(popped_and_client, document, detail):
    popped, client = popped_and_client
    body = assert_problem(client.post(POP, json=document), 400, "INVALID_FILTER")
    assert detail in body["detail"] and popped == []


def test_openapi_documents_the_filter(popped_and_client):
    _, client = popped_and_client
    spec = client.get("/openapi.json").get_json()
    schema = spec["components"]["schemas"]["PopRequest"]["properties"]
    assert schema["filter_type"]["enum"] == ["TAG", "SQL92"]
    assert schema["filter"]["x-error-code"] == "INVALID_FILTER"
