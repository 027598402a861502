"""The Flask app in-process over a real SQLite store: JSON API, errors, metrics, pages."""

from __future__ import annotations

import pytest
from tidemq.tracecollector.http_app import create_app
from tidemq.tracecollector.store import SpanStore

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
    page = client.get(f"/trace/{trace_id}").get_data(as_text=True)
    assert f'data-span-id="{root.span_id}"' in page
    assert f'data-span-id="{child.span_id}"' in page
    assert "SendMessage &lt;script&gt;" in page and "<script>" not in page.split("</main>")[0]
    assert "messaging.destination" in page
    missing = client.get("/trace/" + "0" * 31 + "2")
    assert missing.status_code == 404 and "not stored" in missing.get_data(as_text=True)
