"""The deployed gateway (gunicorn, two workers) and the config center: breaker thresholds
applied live by every worker, bad values refused; subscription-group definitions over HTTP."""

from __future__ import annotations

import re

import pytest
import requests
from tidemq.common.errors import InvalidArgument
from tidemq.configclient.client import ConfigClient

from tests.support.cluster import running_cluster
from tests.support.processes import wait_until

WORKERS = 2
CLUSTER_FAIL_MAX = "/tidemq/config/cluster/TestCluster/breaker_fail_max"
GATEWAY_FAIL_MAX = "/tidemq/config/group/gateway/breaker_fail_max"
GATEWAY_RESET = "/tidemq/config/group/gateway/breaker_reset_s"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("gateway-dyn"),
                         broker_names=("broker-a",)) as cluster:
        cluster.start_gateway(workers=WORKERS, extra=["--cluster-name", "TestCluster"])
        yield cluster


def worker_pids(stack, event: str, *fragments: str) -> set[str]:
    """Pids of the workers whose log has `event` with every fragment on the same line."""
    pids = set()
    for line in stack.gateway.log.read_text(errors="replace").splitlines():
        if event in line and all(f in line for f in fragments):
            found = re.search(r"pid=(\d+)", line)
            if found:
                pids.add(found.group(1))
    return pids


# A setting reaches each worker through its config-center watch; under CI's load (three xdist
# workers, the compose stack beside them) one took more than 20 s to arrive.
DYNAMIC_WAIT_S = 60


def test_every_worker_applies_breaker_thresholds_live_and_refuses_bad_ones(stack):
    with ConfigClient(stack.config_center.addr) as config:
        config.put(CLUSTER_FAIL_MAX, b"3")
        wait_until(lambda: len(worker_pids(stack, "applied dynamic setting",
                                           "setting=breaker_fail_max", "new=3")) == WORKERS,
                   DYNAMIC_WAIT_S, message="both workers to apply the cluster value")
        config.put(GATEWAY_RESET, b"2.5")
        wait_until(lambda: len(worker_pids(stack, "applied dynamic setting",
                                           "setting=breaker_reset_s", "new=2.5")) == WORKERS,
                   DYNAMIC_WAIT_S, message="both workers to apply the reset timeout")

        with pytest.raises(InvalidArgument) as refused:  # out of range: refused, 3 stays
            config.put(GATEWAY_FAIL_MAX, b"0")
        assert refused.value.code == "INVALID_SETTING"
        assert "breaker_fail_max" in str(refused.value)
        assert "an integer 1..10000" in str(refused.value)

        config.put(GATEWAY_FAIL_MAX, b"7")  # the group scope overrides the cluster
        wait_until(lambda: len(worker_pids(stack, "applied dynamic setting",
                                           "setting=breaker_fail_max", "old=3",
                                           "new=7")) == WORKERS,
                   DYNAMIC_WAIT_S, message="both workers to move from 3 to 7 (0 was never applied)")
        for key in (GATEWAY_FAIL_MAX, GATEWAY_RESET, CLUSTER_FAIL_MAX):
            config.delete(key)
        wait_until(lambda: len(worker_pids(stack, "applied dynamic setting",
                                           "setting=breaker_fail_max", "new=5")) == WORKERS,
                   DYNAMIC_WAIT_S, message="both workers back to the static value")
    assert requests.get(f"{stack.gateway_url}/healthz", timeout=5).ok  # served throughout


def test_subscription_groups_over_http(stack):
    url = f"{stack.gateway_url}/v1/groups"
    created = requests.post(url, json={"name": "http-group", "consume_enable": False},
                            timeout=10)
    assert created.status_code == 201, created.text
    revision = created.json()["revision"]
    assert created.headers["ETag"] == f'"{revision}"'
    assert requests.post(url, json={"name": "http-group"}, timeout=10).json()["code"] == \
        "SUBSCRIPTION_GROUP_ALREADY_EXISTS"
    bad = requests.post(url, json={"name": "g2", "retry_max_times": 99}, timeout=10)
    assert (bad.status_code, bad.json()["code"]) == (400, "INVALID_SUBSCRIPTION_GROUP")
    assert "retry_max_times must be an integer 0..64, got 99" in bad.json()["detail"]

    stale = requests.patch(f"{url}/http-group", json={"consume_enable": True},
                           headers={"If-Match": f'"{revision + 100}"'}, timeout=10)
    assert stale.status_code == 412
    updated = requests.patch(f"{url}/http-group", json={"consume_enable": True},
                             headers={"If-Match": f'"{revision}"'}, timeout=10)
    assert updated.status_code == 200 and updated.json()["consume_enable"] is True
    got = requests.get(f"{url}/http-group", timeout=10)
    assert got.json()["retry_max_times"] == 16
    assert got.headers["ETag"] == f'"{updated.json()["revision"]}"'
    assert [g["name"] for g in requests.get(url, timeout=10).json()["groups"]] == ["http-group"]

    assert requests.delete(f"{url}/http-group", timeout=10).status_code == 200
    missing = requests.get(f"{url}/http-group", timeout=10)
    assert (missing.status_code, missing.json()["code"]) == (404, "SUBSCRIPTION_GROUP_NOT_EXIST")
