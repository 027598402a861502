"""One sample of the counters the console's charts draw, from the API routes its pages read.

The charts keep their history in the browser (console/static/charts.js polls
`GET /console/series` every few seconds and keeps the last minutes in the tab's session
storage): the gateway stores nothing and a chart shows exactly what the API said at each
poll. A sample holds counters, not rates — per topic and broker group the sum of the queues'
max offsets (messages written so far) and the messages handed to consumers so far (the
brokers' consumed counters, `GET /v1/cluster/consumed`: every pull and pop answer, whatever
consumed — push and pull consumers, pop over HTTP, RocketMQ 5 clients through gateway-grpc —
not committed offsets, which a pop group never writes), per group its total lag, per replica
its replication lag — and the page turns two samples into a rate, so a poll that fails leaves
a gap instead of a wrong figure (a consumed counter restarts from 0 with its broker: that
interval is a gap too).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from tidemq.common.system_topics import is_system_topic
from tidemq.gateway.console.api import ApiProblem, path_of

# Each poll asks one route per topic and per group: bounded so a big cluster stays cheap.
MAX_TOPICS = 50
MAX_GROUPS = 50

Get = Callable[..., Any]


def sample(get: Get, now_ms: int | None = None) -> dict[str, Any]:
    """The counters now; `problems` lists what could not be read (the rest is still there)."""
    problems: list[str] = []
    produced: dict[str, dict[str, int]] = {}
    consumed: dict[str, dict[str, int]] = {}
    lag: dict[str, int] = {}
    topics = [t["name"] for t in _or_empty(get, "/v1/topics", problems).get("topics", [])
              if not is_system_topic(t["name"])]
    for topic in sorted(topics)[:MAX_TOPICS]:
        described = _or_empty(get, path_of("v1", "topics", topic), problems)
        for queue in described.get("queues", []):
            by_broker = produced.setdefault(topic, {})
            by_broker[queue["broker_name"]] = (by_broker.get(queue["broker_name"], 0)
                                               + int(queue["max_offset"]))
    counted = _or_empty(get, "/v1/cluster/consumed", problems)
    for topic, by_broker in sorted(counted.get("consumed", {}).items()):
        if not is_system_topic(topic) and topic in topics:
            consumed[topic] = {broker: int(n) for broker, n in sorted(by_broker.items())}
    problems += [f"/v1/cluster/consumed: not counted: {replica}"
                 for replica in counted.get("unanswered", [])]
    for group in _group_names(get, problems)[:MAX_GROUPS]:
        # a defined group that never consumed is unknown to the brokers (404): no figures
        described = _or_empty(get, path_of("v1", "consumer-groups", group), problems,
                              missing_ok=True)
        if "total_lag" in described:
            lag[group] = int(described["total_lag"])
    replicas = {}
    for broker in _or_empty(get, "/v1/cluster", problems).get("brokers", []):
        if broker.get("lag_bytes") is not None and broker.get("role") != "MASTER":
            replicas[f"{broker['broker_name']}/{broker['replica_id']}"] = {
                "lag_bytes": broker["lag_bytes"], "lag_s": broker.get("lag_s")}
    return {"time_ms": int(time.time() * 1000) if now_ms is None else now_ms,
            "produced": produced, "consumed": consumed, "group_lag": lag,
            "replica_lag": replicas, "problems": problems}


def _group_names(get: Get, problems: list[str]) -> list[str]:
    defined = _or_empty(get, "/v1/groups", problems).get("groups", [])
    live = _or_empty(get, "/v1/consumer-groups", problems).get("groups", [])
    return sorted({g["name"] for g in defined} | {g["group_id"] for g in live})


def _or_empty(get: Get, path: str, problems: list[str], missing_ok: bool = False) -> dict:
    try:
        return get(path)
    except ApiProblem as problem:
        if problem.status == 401:
            raise  # not logged in (or the login expired): the whole sample is refused
        if missing_ok and problem.status == 404:
            return {}
        problems.append(f"{path}: {problem.status} {problem.code}: {problem.detail}")
        return {}
