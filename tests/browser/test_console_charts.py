"""Issue 25 in headless Chromium, against real processes laid out as `make up` lays them out:
Redis, config center, two name servers running the replication controller, broker-a and a
two-replica group broker-r, the HTTP gateway, the trace collector every service exports to.

- The tracing dashboard's default list shows the user's send (and its pop and ack), and no
  trace of the control plane's own calls; when broker-r is told (through the config center)
  to record them, they are still left out until the "Internal calls" switch is on.
- The message journey of a popped-and-acked message ends with the group's ack.
- The service map is drawn: one box per service and one arrow per edge of its table.
- Every console chart renders with data: messages in and out per broker group and per topic,
  consumer lag per group, replication lag per replica; system topics are listed apart.

Each page is screenshotted (TIDEMQ_SCREENSHOTS_DIR=docs/screenshots writes the docs' pictures).
"""

from __future__ import annotations

import uuid

import pytest
import requests
from tidemq.common.sampling import QUIET_BY_DEFAULT, is_quiet
from tidemq.configclient.client import ConfigClient

from tests.support.cluster import start_replica_group, traced_cluster
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, GROUP, LAGGING = "ChartOrders", "chart-billing", "chart-lagging"
CHART_DEADLINE_S = 60  # two polls of /console/series (5 s apart) and a rate above zero
INTERNAL = frozenset(QUIET_BY_DEFAULT)
BROKER_R_QUIET = "/tidemq/config/group/broker-r/trace_quiet_operations"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with traced_cluster(tmp_path_factory.mktemp("charts"), broker_names=("broker-a",),
                        controller=True) as cluster:
        start_replica_group(cluster.start, cluster, replicas=2, min_in_sync=1,
                            extra=cluster.tracing_flags())
        cluster.start_gateway(workers=1, extra=["--trace-ui-url",
                                                cluster.extra["collector_url"]])
        created = requests.post(f"{cluster.gateway_url}/v1/topics",
                                json={"name": TOPIC, "queues": 2}, timeout=30)
        assert created.status_code == 201, created.text
        for group in (GROUP, LAGGING):
            made = requests.post(f"{cluster.gateway_url}/v1/groups", json={"name": group},
                                 timeout=30)
            assert made.status_code in (200, 201), made.text
        yield cluster


def _send(stack, key: str) -> dict:
    response = requests.post(f"{stack.gateway_url}/v1/topics/{TOPIC}/messages",
                             json={"messages": [{"body": f"order {key}", "key": key}]},
                             timeout=30)
    assert response.status_code == 201, response.text
    return response.json()["results"][0]


def _pop_and_ack(stack, group: str) -> list[dict]:
    """One pop of up to 32 messages by `group` (a short long-poll), each acked."""
    response = requests.post(f"{stack.gateway_url}/v1/groups/{group}/topics/{TOPIC}/pop",
                             json={"max": 32, "invisible_ms": 30_000, "wait_ms": 500},
                             timeout=30)
    assert response.status_code == 200, response.text
    popped = response.json()["messages"]
    for message in popped:
        acked = requests.post(f"{stack.gateway_url}/v1/groups/{group}/topics/{TOPIC}/ack",
                              json={"receipt_handle": message["receipt_handle"]}, timeout=30)
        assert acked.status_code == 200, acked.text
    return popped


@pytest.fixture(scope="module")
def acked(stack):
    """A message sent over HTTP, popped and acked by GROUP; once its ack is on its journey."""
    key = f"order-{uuid.uuid4().hex[:8]}"
    sent = _send(stack, key)
    wait_until(lambda: any(key in m["keys"] for m in _pop_and_ack(stack, GROUP)), 30,
               interval=0.1, message=f"{GROUP} pops {key}")

    def acked_on_journey():
        journeys = requests.get(f"{stack.extra['collector_url']}/api/messages",
                                params={"key": key}, timeout=10).json()["messages"]
        return journeys and any(s["kind"] == "ack" for s in journeys[0]["steps"])

    wait_until(acked_on_journey, 30, interval=0.3, message="the ack on the message's journey")
    return {**sent, "key": key}


def _rows(page) -> list[str]:
    return [row.inner_text() for row in page.locator("tr.trace-row .span-name").all()]


def test_the_default_trace_list_shows_the_users_send_before_any_internal_call(stack, acked,
                                                                              visit):
    page = visit(stack.extra["collector_url"] + "/", "dashboard")
    rows = _rows(page)
    send = "POST /v1/topics/{topic}/messages"
    assert send in rows, rows
    internal = [n for n, name in enumerate(rows) if is_quiet(name, INTERNAL)]
    assert not internal, rows
    assert rows.index(send) < 10, rows  # on the first screen: the send, its pop and its ack

    # broker-r records its internal calls from now on: they stay out of the default list
    with ConfigClient(stack.config_center.addr) as config:
        config.put(BROKER_R_QUIET, b"")
    try:
        def recorded():
            traces = requests.get(f"{stack.extra['collector_url']}/api/traces", timeout=10,
                                  params={"internal": "true", "limit": 200}).json()["traces"]
            return any(is_quiet(t["root_name"] or "", INTERNAL) for t in traces)

        wait_until(recorded, 30, interval=0.3, message="broker-r's internal calls recorded")
        page = visit(stack.extra["collector_url"] + "/", "dashboard-internal-recorded")
        rows = _rows(page)
        assert send in rows and not [r for r in rows if is_quiet(r, INTERNAL)], rows

        page.check("input[name=internal]")
        page.click("form.search button[type=submit]")
        page = visit.snap("dashboard-internal-calls-shown")
        assert "internal=1" in page.url
        assert [r for r in _rows(page) if "ConfigService" in r], _rows(page)
    finally:
        with ConfigClient(stack.config_center.addr) as config:
            config.delete(BROKER_R_QUIET)


def test_the_journey_ends_with_the_groups_ack(stack, acked, visit):
    page = visit(f"{stack.extra['collector_url']}/messages?key={acked['key']}", "message-journey")
    text = page.inner_text("body")
    for step in ("published by gateway-http", "stored by broker", "delivered to gateway-http",
                 f"acked by {GROUP}", "after it was stored"):
        assert step in text, text


def test_the_service_map_is_drawn_from_the_tables_edges(stack, acked, visit):
    page = visit(f"{stack.extra['collector_url']}/service-map", "service-map")
    edges = requests.get(f"{stack.extra['collector_url']}/api/service-map",
                         timeout=10).json()["edges"]
    services = {e["caller"] for e in edges} | {e["callee"] for e in edges}
    assert page.locator("svg.service-graph g.node").count() == len(services)
    assert page.locator("svg.service-graph g.edge").count() == len(edges)
    arrow = page.locator('svg.service-graph g.edge[data-caller="gateway-http"]'
                         '[data-callee="broker"]').first
    assert float(arrow.locator("path").get_attribute("stroke-width")) > 0
    assert page.locator("svg.service-graph g.node[data-service='gateway-http'] rect"
                        ).bounding_box()["width"] > 0


def _chart(page, chart_id: str) -> dict:
    return page.evaluate("""(id) => {
        const el = document.getElementById(id);
        return {points: Number(el.dataset.points || 0), max: Number(el.dataset.max || 0),
                series: (el.dataset.series || '').split('|').filter(Boolean),
                by_series: JSON.parse(el.dataset.maxBySeries || '{}'),
                canvas: el.querySelectorAll('canvas').length,
                legend: el.querySelectorAll('.u-legend .u-series').length};
    }""", chart_id)


def _wait_for_chart(page, chart_id: str, *, positive: bool, traffic=None,
                    series: str = "") -> dict:
    """The chart once it has drawn points (with `positive`, a value above zero; with
    `series`, that series has); `traffic` runs between looks so a rate has something to
    count."""
    seen = {}

    def drawn():
        if traffic is not None:
            traffic()
        seen.update(_chart(page, chart_id))
        highest = (seen["by_series"].get(series) or 0) if series else seen["max"]
        if series and series not in seen["by_series"]:
            return False
        return seen["canvas"] and seen["points"] > 0 and (highest > 0 or not positive)

    try:
        wait_until(drawn, CHART_DEADLINE_S, interval=0.5, message=f"chart {chart_id} drawn")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; last seen {seen}") from None
    return dict(seen)


def test_cluster_charts_throughput_per_broker_and_replication_lag(stack, visit):
    page = visit(f"{stack.gateway_url}/console/cluster", "console-cluster")
    throughput = _wait_for_chart(page, "chart-broker-throughput", positive=True,
                                 traffic=lambda: _send(stack, "cluster-chart"))
    assert {"broker-a in", "broker-r in"} <= set(throughput["series"]), throughput
    assert max(throughput["by_series"][s] or 0 for s in ("broker-a in", "broker-r in")) > 0
    lag = _wait_for_chart(page, "chart-replica-lag", positive=False)
    assert [s for s in lag["series"] if s.startswith("broker-r/")], lag
    assert lag["legend"] >= 2  # the time column and at least one replica
    visit.snap("console-cluster")


def test_topic_charts_messages_in_and_out_and_system_topics_apart(stack, visit):
    def traffic():
        _send(stack, "topic-chart")
        _pop_and_ack(stack, GROUP)

    page = visit(f"{stack.gateway_url}/console/topics", "console-topics")
    into = _wait_for_chart(page, "chart-topics-in", positive=True, traffic=traffic,
                           series=TOPIC)
    out = _wait_for_chart(page, "chart-topics-out", positive=True, traffic=traffic,
                          series=TOPIC)
    assert not [s for s in into["series"] + out["series"] if s.startswith(("%", "rmq_sys"))]
    user_topics = page.locator("#topics").inner_text()
    assert not page.locator("#system-topics").is_visible()  # folded away until asked for
    page.click("#system-topics-section summary")
    system_topics = page.locator("#system-topics").inner_text()
    assert TOPIC in user_topics and "rmq_sys_REVIVE_LOG_" not in user_topics
    assert "rmq_sys_REVIVE_LOG_" in system_topics  # made by the pops above
    visit.snap("console-topics")

    page = visit(f"{stack.gateway_url}/console/topics/{TOPIC}", "console-topic")
    per_broker = _wait_for_chart(page, "chart-topic-in", positive=True, traffic=traffic)
    assert set(per_broker["series"]) <= {"broker-a", "broker-r"}, per_broker
    _wait_for_chart(page, "chart-topic-out", positive=True, traffic=traffic)
    visit.snap("console-topic")


def test_group_charts_lag_over_time(stack, visit):
    def popped_without_ack():  # LAGGING holds what it popped: lag counts unacked messages
        _send(stack, "lag-chart")
        response = requests.post(
            f"{stack.gateway_url}/v1/groups/{LAGGING}/topics/{TOPIC}/pop",
            json={"max": 4, "invisible_ms": 300_000, "wait_ms": 500}, timeout=30)
        assert response.status_code == 200, response.text
        return response.json()["messages"]

    wait_until(popped_without_ack, 30, interval=0.1, message=f"{LAGGING} pops a message")
    page = visit(f"{stack.gateway_url}/console/groups", "console-groups")
    lag = _wait_for_chart(page, "chart-group-lag", positive=True,
                          traffic=lambda: _send(stack, "lag-chart"), series=LAGGING)
    assert lag["by_series"][LAGGING] > 0, lag
    visit.snap("console-groups")

    page = visit(f"{stack.gateway_url}/console/groups/{LAGGING}", "console-group")
    mine = _wait_for_chart(page, "chart-group-lag", positive=True, series=LAGGING)
    assert mine["series"] == [LAGGING], mine
    visit.snap("console-group")
