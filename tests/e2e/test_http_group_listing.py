"""Every group that consumed is listed, however it consumed, with whether it is defined:
a pop group that was never defined (the README tour's `billing`), a pull consumer that
commits offsets without joining a coordinator, and a defined pop group, in
`GET /v1/consumer-groups`, `GET /v1/groups` and `tidemq group list`. Real processes: the
session's shared two-broker cluster with the HTTP gateway."""

from __future__ import annotations

import json

import pytest
import requests
from tidemq.client import PullConsumer
from tidemq.client.cli import app
from typer.testing import CliRunner

from tests.support.processes import wait_until

pytestmark = pytest.mark.slow
TOPIC = "GroupListing"
POP_GROUP, PULL_GROUP, DEFINED_GROUP = "listing-popper", "listing-puller", "listing-defined"


@pytest.fixture(scope="module")
def cluster(shared_gateway_cluster):
    cluster = shared_gateway_cluster
    response = requests.post(f"{cluster.gateway_url}/v1/topics",
                             json={"name": TOPIC, "queues": 2}, timeout=30)
    assert response.status_code == 201, response.text
    sent = requests.post(f"{cluster.gateway_url}/v1/topics/{TOPIC}/messages",
                         json={"messages": [{"body": str(i)} for i in range(4)]}, timeout=30)
    assert sent.status_code == 201, sent.text
    return cluster


def pop_some(cluster, group: str) -> None:
    def popped():
        response = requests.post(
            f"{cluster.gateway_url}/v1/groups/{group}/topics/{TOPIC}/pop",
            json={"max": 16, "invisible_ms": 60_000, "wait_ms": 1000}, timeout=30)
        assert response.status_code == 200, response.text
        return response.json()["messages"]

    wait_until(popped, 60, interval=0.1, message=f"{group} to pop a message")


def test_pop_pull_and_defined_groups_are_listed_with_how_they_consume(cluster):
    defined = requests.post(f"{cluster.gateway_url}/v1/groups",
                            json={"name": DEFINED_GROUP}, timeout=30)
    assert defined.status_code == 201, defined.text
    pop_some(cluster, POP_GROUP)  # never defined, never joined a coordinator
    pop_some(cluster, DEFINED_GROUP)
    consumer = PullConsumer(cluster.namesrv_addrs, consumer_group=PULL_GROUP)
    try:
        consumer.commit(consumer.fetch_queues(TOPIC)[0], 1)  # offsets, no JoinGroup
    finally:
        consumer.close()

    listed = requests.get(f"{cluster.gateway_url}/v1/consumer-groups", timeout=30)
    assert listed.status_code == 200, listed.text
    by_id = {g["group_id"]: g for g in listed.json()["groups"]}
    assert {name: (by_id[name]["consume_type"], by_id[name]["defined"])
            for name in (POP_GROUP, PULL_GROUP, DEFINED_GROUP)} == {
        POP_GROUP: ("pop", False), PULL_GROUP: ("pull", False), DEFINED_GROUP: ("pop", True)}
    assert not any(g.startswith(("CID_SYS_", "SCHEDULE_")) for g in by_id), by_id

    groups = requests.get(f"{cluster.gateway_url}/v1/groups", timeout=30).json()
    assert groups["consumption_known"] is True
    definition = next(g for g in groups["groups"] if g["name"] == DEFINED_GROUP)
    assert (definition["defined"], definition["consume_type"]) == (True, "pop")
    undefined = {g["name"]: g for g in groups["undefined"]}
    assert undefined[POP_GROUP] == {"name": POP_GROUP, "defined": False, "consume_type": "pop"}
    assert undefined[PULL_GROUP]["consume_type"] == "pull"
    assert DEFINED_GROUP not in undefined

    result = CliRunner().invoke(app, ["--namesrv", cluster.namesrv_addrs, "--config-center",
                                      cluster.config_center.addr, "-o", "json", "group", "list"])
    assert result.exit_code == 0, result.output
    cli = {g["group_id"]: (g["consume_type"], g["defined"]) for g in json.loads(result.stdout)}
    assert cli[POP_GROUP] == ("pop", False) and cli[PULL_GROUP] == ("pull", False)
    table = CliRunner().invoke(app, ["--namesrv", cluster.namesrv_addrs, "group", "list"])
    assert POP_GROUP in table.output, table.output
