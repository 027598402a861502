"""The Flask app in-process over a real SQLite store: JSON API, errors, metrics, pages."""

from __future__ import annotations

import pytest
from tidemq.tracecollector.http_app import create_app
from tidemq.tracecollector.store import SpanStore

from tests.unit.tracecollector.message_spans import message_spans
from tests.unit.tracecollector.spans import make_span, new_trace_id


@pytest.fixture
def store(tmp_path):
    store = SpanStore(tmp_path)
    yield store
    store.close()


@pytest.fixture
def client(store):
    return create_app(store).test_client()


def _trace(store) -> tuple[str, list]:
    trace_id = new_trace_id()
    root = make_span(trace_id, name="POST /topics/orders", service="gateway", duration=9_000_000)
    child = make_span(trace_id, parent=root.span_id, name="SendMessage <script>", service="broker",
                      start=1_000_000, duration=4_000_000, **{"messaging.destination": "orders"})
    store.insert([root, child])
    return trace_id, [root, child]


def test_api_lists_traces_services_and_one_trace(client, store):
    trace_id, (root, child) = _trace(store)
    listing = client.get("/api/traces?service=broker&limit=5").get_json()
    [summary] = listing["traces"]
    assert summary["trace_id"] == trace_id
    assert summary["root_name"] == "POST /topics/orders"
    assert summary["services"] == ["broker", "gateway"]
    assert (summary["span_count"], summary["duration_ns"]) == (2, 9_000_000)
    assert client.get("/api/traces?service=nobody").get_json() == {"traces": []}
    assert client.get("/api/services").get_json() == {"services": ["broker", "gateway"]}
    spans = client.get(f"/api/traces/{trace_id.upper()}").get_json()["spans"]
    assert [s["span_id"] for s in spans] == [root.span_id, child.span_id]
    assert spans[1]["parent_span_id"] == root.span_id
    assert spans[1]["attributes"] == {"messaging.destination": "orders"}


@pytest.mark.parametrize(("path", "status", "code"), [
    ("/api/traces/nothex", 400, "INVALID_ARGUMENT"),
    ("/api/traces/" + "0" * 31 + "1", 404, "NOT_FOUND"),
    ("/api/traces?limit=0", 400, "INVALID_ARGUMENT"),
    ("/api/traces?since=soon", 400, "INVALID_ARGUMENT"),
    ("/no/such/page", 404, "NOT_FOUND"),
    ("/api/traces?errors=maybe", 400, "INVALID_ARGUMENT"),
    ("/api/traces?since=1h&until=2h", 400, "INVALID_ARGUMENT"),
    ("/api/messages", 400, "INVALID_ARGUMENT"),
    ("/api/messages?msg_id=a&key=b", 400, "INVALID_ARGUMENT"),
    ("/api/service-map?since=lately", 400, "INVALID_ARGUMENT"),
])
def test_bad_requests_get_problem_json(client, path, status, code):
    response = client.get(path)
    assert response.status_code == status
    assert response.mimetype == "application/problem+json"
    body = response.get_json()
    assert body["code"] == code and body["detail"]
    # the full RFC 9457 shape, as the gateway answers (one renderer: tidemq.common.problems)
    assert body["status"] == status and body["title"]
    assert body["type"] == "https://tidemq.dev/problems/" + code.lower().replace("_", "-")


def test_healthz_and_metrics(client):
    assert client.get("/healthz").get_json() == {"status": "ok"}
    metrics = client.get("/metrics").get_data(as_text=True)
    assert "tidemq_tracecollector_spans_received_total" in metrics


def test_dashboard_lists_traces_and_filters_by_service(client, store):
    trace_id, _ = _trace(store)
    other = new_trace_id()
    store.insert([make_span(other, name="nightly-job", service="analytics")])
    page = client.get("/").get_data(as_text=True)
    assert trace_id in page and other in page and "POST /topics/orders" in page
    filtered = client.get("/?service=analytics").get_data(as_text=True)
    assert other in filtered and trace_id not in filtered
    assert '<option value="analytics" selected>' in filtered


def test_trace_page_shows_every_span_escaped(client, store):
    trace_id, (root, child) = _trace(store)
    page = client.get(f"/traces/{trace_id}").get_data(as_text=True)
    assert client.get(f"/trace/{trace_id}").get_data(as_text=True) == page  # old address
    assert f'data-span-id="{root.span_id}"' in page
    assert f'data-span-id="{child.span_id}"' in page
    assert "SendMessage &lt;script&gt;" in page and "<script>" not in page.split("</main>")[0]
    assert "messaging.destination" in page
    missing = client.get("/trace/" + "0" * 31 + "2")
    assert missing.status_code == 404 and "not stored" in missing.get_data(as_text=True)


def test_search_api_and_dashboard_find_a_message_by_key_and_id(client, store):
    spans = message_spans("U1<b>", "M1", "order-1")
    store.insert(spans.all())
    _trace(store)
    [found] = client.get("/api/traces?key=order-1").get_json()["traces"]
    assert found["trace_id"] == spans.publish.trace_id
    assert client.get("/api/traces?msg_id=M1&errors=true").get_json() == {"traces": []}
    page = client.get("/?msg_id=M1&errors=").get_data(as_text=True)
    assert spans.publish.trace_id in page and "Matching traces" in page
    assert "/messages?msg_id=M1" in page


def test_message_view_lists_each_step_escaped_and_links_to_traces(client, store):
    spans = message_spans("U1<b>", "M1", "order-1")
    store.insert(spans.all())
    body = client.get("/api/messages?msg_id=M1").get_json()
    [journey] = body["messages"]
    assert journey["unique_id"] == "U1<b>" and journey["trace_id"] == spans.publish.trace_id
    assert [step["kind"] for step in journey["steps"]] == [
        "published", "stored", "delivered", "processed"]
    page = client.get("/messages?msg_id=M1").get_data(as_text=True)
    assert "U1&lt;b&gt;" in page and "U1<b>" not in page
    for step in ("published by gateway-http", "stored by broker", "delivered to consumer",
                 "processed"):
        assert step in page
    assert f"/traces/{spans.publish.trace_id}#span-{spans.store.span_id}" in page
    empty = client.get("/messages?key=nothing")
    assert empty.status_code == 200 and "No stored span names this message" in empty.text
    assert client.get("/messages").status_code == 400


def test_service_map_page_and_api_and_store_size(client, store):
    store.insert(message_spans("U1", "M1", "order-1").all())
    api = client.get("/api/service-map?since=100000d").get_json()
    assert {(e["caller"], e["callee"], e["kind"]) for e in api["edges"]} >= {
        ("gateway-http", "broker", "call"), ("gateway-http", "consumer", "receive")}
    page = client.get("/service-map?since=100000d").get_data(as_text=True)
    assert "gateway-http" in page and "delivers to (received)" in page
    assert '<option value="100000d" selected>' in page
    # drawn: one box per service, one arrow per edge of the table
    assert page.count('<g class="node ') == len({e["caller"] for e in api["edges"]}
                                                 | {e["callee"] for e in api["edges"]})
    assert page.count('<g class="edge ') == len(api["edges"])
    assert 'data-caller="gateway-http" data-callee="broker" data-kind="call"' in page
    stats = client.get("/api/stats").get_json()
    assert stats["spans"] == 5 and stats["size_bytes"] > 0
    assert stats["retention"]["max_spans"] == 1_000_000
    assert "KiB" in client.get("/").get_data(as_text=True)


# -- auth on: every page and API needs a user allowed cluster:traces SUB ----------------------

def _guarded_client(store):
    from tidemq.common.auth.acl import AclTable, Rule, User
    from tidemq.common.auth.guard import AuthGuard, StaticAcl

    acl = AclTable({"ops": User("ops", "ops-secret"), "dev": User("dev", "dev-secret"),
                    "root": User("root", "root-secret", admin=True)},
                   (Rule.create("r1", "ops", "cluster:traces", ["SUB"]),
                    Rule.create("r2", "dev", "topic:orders", ["SUB"])))
    return create_app(store, AuthGuard("trace-collector-test", StaticAcl(acl))).test_client()


def _basic(access_key: str, secret_key: str) -> dict[str, str]:
    import base64

    raw = base64.b64encode(f"{access_key}:{secret_key}".encode()).decode()
    return {"Authorization": f"Basic {raw}"}


@pytest.mark.parametrize("path", ["/", "/api/traces", "/api/services", "/messages?key=k",
                                  "/service-map", "/api/stats"])
def test_with_auth_on_nothing_is_read_without_a_user(store, path):
    client = _guarded_client(store)
    refused = client.get(path)
    assert refused.status_code == 401
    assert refused.headers["WWW-Authenticate"].startswith("Basic")  # the browser asks
    assert refused.get_json()["code"] == "UNAUTHENTICATED"
    assert client.get(path, headers=_basic("ops", "wrong")).status_code == 401
    assert client.get(path, headers=_basic("nobody", "x")).status_code == 401
    denied = client.get(path, headers=_basic("dev", "dev-secret"))
    assert denied.status_code == 403 and "cluster 'traces'" in denied.get_json()["detail"]
    assert client.get(path, headers=_basic("ops", "ops-secret")).status_code == 200
    assert client.get(path, headers=_basic("root", "root-secret")).status_code == 200


def test_with_auth_on_health_metrics_and_bearer_tokens(store):
    from tidemq.common.auth.bearer import make_token
    from tidemq.common.auth.signature import Credentials

    client = _guarded_client(store)
    assert client.get("/healthz").status_code == 200
    assert client.get("/metrics").status_code == 200
    token = make_token(Credentials("ops", "ops-secret"))
    assert client.get("/api/traces", headers={"Authorization": f"Bearer {token}"}
                      ).status_code == 200
    assert client.get("/api/traces", headers={"Authorization": "Basic !!notbase64"}
                      ).status_code == 401
    assert client.get("/no-such-page").status_code == 404  # as without auth
