"""The console's charts in headless Chromium against the shared two-broker cluster: the first
view already spans the chosen window (the last 15 minutes, ending at the latest sample) rather
than a span guessed from one sample, and every series that has data is drawn and named in the
legend — including the pops of a group that commits no offsets, read from both broker
groups."""

from __future__ import annotations

import pytest
import requests

from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC, GROUP = "ChartWindow", "chart-window-popper"
WINDOW_S = 900  # console/views.py SERIES_WINDOW_S
DEADLINE_S = 60  # two polls 5 s apart and a rate above zero


@pytest.fixture(scope="module")
def cluster(shared_gateway_cluster):
    cluster = shared_gateway_cluster
    created = requests.post(f"{cluster.gateway_url}/v1/topics",
                            json={"name": TOPIC, "queues": 2}, timeout=30)
    assert created.status_code == 201, created.text
    return cluster


def _chart(page, chart_id: str) -> dict:
    return page.evaluate("""(id) => {
        const el = document.getElementById(id);
        return {x_min: Number(el.dataset.xMin), x_max: Number(el.dataset.xMax),
                series: (el.dataset.series || '').split('|').filter(Boolean),
                legend: (el.dataset.legend || '').split('|').filter(Boolean),
                legend_rows: Array.from(el.querySelectorAll('.u-legend .u-series'))
                    .slice(1).map(row => row.querySelector('.u-label').textContent),
                by_series: JSON.parse(el.dataset.maxBySeries || '{}')};
    }""", chart_id)


def _traffic(cluster) -> None:
    sent = requests.post(f"{cluster.gateway_url}/v1/topics/{TOPIC}/messages",
                         json={"messages": [{"body": str(i)} for i in range(4)]}, timeout=30)
    assert sent.status_code == 201, sent.text
    popped = requests.post(f"{cluster.gateway_url}/v1/groups/{GROUP}/topics/{TOPIC}/pop",
                           json={"max": 32, "invisible_ms": 300_000, "wait_ms": 200},
                           timeout=30)
    assert popped.status_code == 200, popped.text


def test_the_first_view_spans_the_window_and_every_series_with_data_is_in_the_legend(
        cluster, visit):
    page = visit(f"{cluster.gateway_url}/console/topics/{TOPIC}", "chart-window-first-view")
    page.wait_for_function(
        "document.getElementById('chart-topic-out').dataset.xMax !== undefined")
    first = _chart(page, "chart-topic-out")
    assert first["x_max"] - first["x_min"] == pytest.approx(WINDOW_S), first

    seen: dict = {}

    def both_brokers_drawn():
        _traffic(cluster)
        seen.update(_chart(page, "chart-topic-out"))
        values = seen["by_series"]
        return {"broker-a", "broker-b"} <= set(values) and all(values.values())

    try:
        wait_until(both_brokers_drawn, DEADLINE_S, interval=0.5,
                   message="pops from both broker groups drawn")
    except TimeoutError as exc:
        raise AssertionError(f"{exc}; last seen {seen}") from None
    drawn = _chart(page, "chart-topic-out")
    assert drawn["series"] == drawn["legend"] == drawn["legend_rows"], drawn
    assert set(drawn["series"]) == set(drawn["by_series"]) == {"broker-a", "broker-b"}, drawn
    assert drawn["x_max"] - drawn["x_min"] == pytest.approx(WINDOW_S), drawn
    visit.snap("chart-window-drawn")
