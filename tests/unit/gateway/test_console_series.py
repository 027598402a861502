"""The console charts' sample (console/series.py) from the API's answers: counters per topic
and broker group, group lag, replica lag; system topics left out; a route that fails is named
in `problems` and the rest is still there; a defined group that never consumed has no
figures; the route refuses parameters with a problem+json 400."""

from __future__ import annotations

import pytest
from tidemq.gateway.app import create_app
from tidemq.gateway.console import series
from tidemq.gateway.console.api import ApiProblem
from tidemq.gateway.settings import GatewaySettings

ANSWERS = {
    "/v1/topics": {"topics": [{"name": "orders"}, {"name": "%RETRY%billing"},
                              {"name": "rmq_sys_REVIVE_LOG_c"}, {"name": "refunds"}]},
    "/v1/topics/orders": {"queues": [
        {"broker_name": "broker-a", "queue_id": 0, "max_offset": 5},
        {"broker_name": "broker-a", "queue_id": 1, "max_offset": 7},
        {"broker_name": "broker-r", "queue_id": 0, "max_offset": 3}]},
    "/v1/groups": {"groups": [{"name": "billing"}, {"name": "idle"}], "invalid": []},
    "/v1/consumer-groups": {"groups": [{"group_id": "audit"}]},
    "/v1/consumer-groups/billing": {"total_lag": 4, "offsets": [
        {"topic": "orders", "broker_name": "broker-a", "committed": 9, "lag": 3},
        {"topic": "orders", "broker_name": "broker-r", "committed": 2, "lag": 1},
        {"topic": "%RETRY%billing", "broker_name": "broker-a", "committed": 1, "lag": 0}]},
    "/v1/consumer-groups/audit": {"total_lag": 0, "offsets": [
        {"topic": "orders", "broker_name": "broker-a", "committed": 12, "lag": 0}]},
    # consumed counts come from the brokers' counters, not from committed offsets
    "/v1/cluster/consumed": {"consumed": {
        "orders": {"broker-a": 21, "broker-r": 2}, "%RETRY%billing": {"broker-a": 1},
        "gone": {"broker-a": 5}}, "unanswered": ["broker-r 127.0.0.1:1: refused"]},
    "/v1/cluster": {"brokers": [
        {"broker_name": "broker-a", "replica_id": -1, "role": "MASTER", "lag_bytes": None},
        {"broker_name": "broker-r", "replica_id": 0, "role": "MASTER", "lag_bytes": 0},
        {"broker_name": "broker-r", "replica_id": 1, "role": "SLAVE", "lag_bytes": 512,
         "lag_s": 0.4}]},
}


def _get(path: str, **_query):
    if path == "/v1/topics/refunds":
        raise ApiProblem(503, "BROKER_NOT_AVAILABLE", "broker-b did not answer", path)
    if path == "/v1/consumer-groups/idle":
        raise ApiProblem(404, "GROUP_ID_NOT_FOUND", "unknown", path)
    return ANSWERS[path]


def test_a_sample_sums_counters_per_topic_and_broker_and_leaves_system_topics_out():
    sample = series.sample(_get, now_ms=1_000)
    assert sample["time_ms"] == 1_000
    assert sample["produced"] == {"orders": {"broker-a": 12, "broker-r": 3}}
    assert sample["consumed"] == {"orders": {"broker-a": 21, "broker-r": 2}}
    assert sample["group_lag"] == {"billing": 4, "audit": 0}
    assert sample["replica_lag"] == {"broker-r/1": {"lag_bytes": 512, "lag_s": 0.4}}
    assert sample["problems"] == [
        "/v1/topics/refunds: 503 BROKER_NOT_AVAILABLE: broker-b did not answer",
        "/v1/cluster/consumed: not counted: broker-r 127.0.0.1:1: refused"]


def test_a_refused_login_refuses_the_whole_sample():
    def unauthorised(path, **_query):
        raise ApiProblem(401, "UNAUTHENTICATED", "log in", path)

    with pytest.raises(ApiProblem):
        series.sample(unauthorised)


def test_the_route_refuses_parameters_as_problem_json():
    client = create_app(object(), GatewaySettings()).test_client()
    answer = client.get("/console/series?topic=orders")
    assert answer.status_code == 400
    assert answer.mimetype == "application/problem+json"
    assert answer.get_json()["code"] == "INVALID_ARGUMENT"
    assert "takes no parameters, got topic" in answer.get_json()["detail"]
