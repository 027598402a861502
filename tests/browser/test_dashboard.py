"""The tracing dashboard in headless Chromium against real processes: Redis, config center,
two name servers, one broker group, the HTTP gateway (its console linking to the dashboard)
and the trace collector.

A message sent through the gateway is found by its msg id with the dashboard's search form;
its trace page, its message view and the service map load; the console's link from the message
leads to the same message view. Every page is screenshotted and none logs a browser error."""

from __future__ import annotations

import uuid

import pytest
import requests

from tests.support.cluster import process_group, ready_http_port, start_cluster
from tests.support.processes import start_redis, wait_until

pytestmark = pytest.mark.slow
TOPIC = "DashboardOrders"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("dashboard")
    redis = start_redis(tmp)
    try:
        with process_group(tmp) as start:
            collector = start("tidemq.tracecollector", ["--http-port", "0"])
            ui = f"http://127.0.0.1:{ready_http_port(collector)}"
            cluster = start_cluster(start, redis, broker_names=("broker-a",),
                                    otlp_endpoint=collector.addr)
            cluster.start_gateway(workers=1, extra=["--trace-ui-url", ui])
            cluster.extra["collector"] = ui
            created = requests.post(f"{cluster.gateway_url}/v1/topics",
                                    json={"name": TOPIC, "queues": 2}, timeout=30)
            assert created.status_code == 201, created.text
            yield cluster
    finally:
        redis.kill()


@pytest.fixture(scope="module")
def sent(stack):
    """One message with a fresh key; its store span is in the collector before tests run."""
    key = f"order-{uuid.uuid4().hex[:8]}"
    response = requests.post(f"{stack.gateway_url}/v1/topics/{TOPIC}/messages",
                             json={"messages": [{"body": "paid", "key": key}]}, timeout=30)
    assert response.status_code == 201, response.text
    [result] = response.json()["results"]
    result["key"] = key

    def stored():
        found = requests.get(f"{stack.extra['collector']}/api/traces",
                             params={"msg_id": result["msg_id"]}, timeout=10).json()["traces"]
        return found[0]["trace_id"] if found else None

    result["trace_id"] = wait_until(stored, 30, interval=0.3, message="the send's spans stored")
    return result


def test_search_by_msg_id_finds_the_trace_and_its_page_shows_the_store(stack, sent, visit):
    page = visit(stack.extra["collector"] + "/", "dashboard")
    page.fill("input[name=msg_id]", sent["msg_id"])
    page.click("form.search button[type=submit]")
    page = visit.snap("dashboard-search-msg-id")
    rows = page.locator("tr.trace-row")
    assert rows.count() == 1, page.content()
    assert sent["trace_id"] in rows.first.inner_text()

    page.click("tr.trace-row a.trace-link")
    page = visit.snap("trace")
    assert f"/traces/{sent['trace_id']}" in page.url
    text = page.inner_text("body")
    assert "gateway-http" in text and "broker" in text


def test_message_view_and_service_map_load(stack, sent, visit):
    page = visit(f"{stack.extra['collector']}/messages?msg_id={sent['msg_id']}", "message-view")
    text = page.inner_text("body")
    assert "published by gateway-http" in text and "stored by broker" in text
    assert sent["key"] in text
    page = visit(f"{stack.extra['collector']}/service-map", "service-map")
    assert "gateway-http" in page.inner_text("body")


def test_the_consoles_trace_link_leads_to_the_message_view(stack, sent, visit):
    page = visit(f"{stack.gateway_url}/console/messages/{sent['msg_id']}", "console-message")
    link = page.locator(f"a[href^='{stack.extra['collector']}/messages']")
    assert link.count() >= 1, page.content()
    link.first.click()
    page = visit.snap("console-to-message-view")
    assert page.url.startswith(f"{stack.extra['collector']}/messages")
    assert "stored by broker" in page.inner_text("body")
