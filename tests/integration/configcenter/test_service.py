"""ConfigService over real gRPC: KV, CAS, history, scopes, and errors with precise codes."""

from __future__ import annotations

import pytest
from tidemq.common import errors
from tidemq.configclient.client import ConfigClient

from tests.support.processes import wait_until


def test_put_get_range_delete(shared_client):
    first = shared_client.put("/tidemq/topics/orders",
                              {"name": "orders", "queues": 8, "perm": 6, "order": False})
    shared_client.put("/tidemq/topics/audit",
                      {"name": "audit", "queues": 2, "perm": 6, "order": True})
    assert shared_client.get("/tidemq/topics/orders").json()["queues"] == 8
    listed = shared_client.range("/tidemq/topics/")
    assert [kv.key for kv in listed.kvs] == ["/tidemq/topics/audit", "/tidemq/topics/orders"]
    assert listed.revision == first.revision + 1
    then = shared_client.range("/tidemq/topics/", revision=first.revision)
    assert [kv.key for kv in then.kvs] == ["/tidemq/topics/orders"]
    deleted = shared_client.delete("/tidemq/topics/audit")
    assert deleted.deleted and shared_client.get("/tidemq/topics/audit") is None


def test_compare_and_set_and_conditional_delete(shared_client):
    created = shared_client.put("/cas", "1", expected_revision=0)
    assert created.succeeded
    lost = shared_client.put("/cas", "2", expected_revision=0)
    assert (lost.succeeded, lost.current_mod_revision) == (False, created.revision)
    assert not shared_client.delete("/cas", expected_revision=created.revision + 1).succeeded
    assert shared_client.update("/cas", lambda kv: str(int(kv.text) + 1)).succeeded
    assert shared_client.get("/cas").text == "2"


def test_history_and_rollback(shared_client):
    v1 = shared_client.put("/tidemq/config/cluster/c9/disk_max_used_ratio", "0.75")
    shared_client.put("/tidemq/config/cluster/c9/disk_max_used_ratio", "0.9")
    assert [e.kv.text for e in shared_client.history("/tidemq/config/cluster/c9/disk_max_used_ratio")] == [
        "0.75", "0.9"]
    shared_client.rollback("/tidemq/config/cluster/c9/disk_max_used_ratio", v1.revision)
    assert shared_client.get("/tidemq/config/cluster/c9/disk_max_used_ratio").text == "0.75"


def test_effective_config_takes_the_most_specific_scope(shared_client):
    shared_client.put("/tidemq/config/cluster/c1/disk_max_used_ratio", "0.75")
    shared_client.put("/tidemq/config/cluster/c1/retention_hours", "72")
    shared_client.put("/tidemq/config/group/g1/disk_max_used_ratio", "0.9")
    shared_client.put("/tidemq/config/broker/b1/retention_hours", "24")
    shared_client.put("/tidemq/config/broker/b2/retention_hours", "1")
    effective = shared_client.effective_config(cluster="c1", broker_group="g1", broker="b1")
    assert {n: (s.value, s.scope) for n, s in effective.settings.items()} == {
        "disk_max_used_ratio": ("0.9", "broker_group"), "retention_hours": ("24", "broker")}
    source = effective.settings["retention_hours"].source_key
    assert source == "/tidemq/config/broker/b1/retention_hours"


@pytest.mark.parametrize(
    ("call", "error", "code"),
    [
        (lambda c: c.put("", "x"), errors.InvalidArgument, "INVALID_ARGUMENT"),
        (lambda c: c.get("/" + "k" * 2000), errors.InvalidArgument, "INVALID_ARGUMENT"),
        (lambda c: c.put("/big", b"x" * (1024 * 1024 + 1)), errors.PayloadTooLarge,
         "MESSAGE_TOO_LARGE"),
        (lambda c: c.put("/k", "x", expected_revision=-2), errors.InvalidArgument,
         "INVALID_ARGUMENT"),
        (lambda c: c.range("/k", revision=10**6), errors.InvalidArgument, "INVALID_ARGUMENT"),
        (lambda c: c.put("/k", "x", lease=987654), errors.NotFound, "LEASE_NOT_FOUND"),
        (lambda c: c.lease_grant(0), errors.InvalidArgument, "INVALID_ARGUMENT"),
        (lambda c: c.effective_config(), errors.InvalidArgument, "INVALID_ARGUMENT"),
    ],
)
def test_bad_input_gets_a_precise_error(shared_client, call, error, code):
    before = shared_client.range("").revision
    with pytest.raises(error) as info:
        call(shared_client)
    assert info.value.code == code
    assert shared_client.range("").revision == before  # nothing was written


def test_several_instances_share_one_store(start_config_center, config_center):
    other = start_config_center()
    with ConfigClient(config_center.addr) as a, ConfigClient(other.addr) as b:
        written = a.put("/shared", "from a")
        assert b.get("/shared").mod_revision == written.revision
        assert b.put("/shared", "from b").revision == written.revision + 1


def test_writes_move_to_a_live_instance_when_one_is_down(start_config_center, config_center):
    other = start_config_center()
    with ConfigClient([config_center.addr, other.addr]) as client:
        first = client.put("/ha", "1")
        config_center.kill()
        # A compare-and-set cannot apply twice, so it moves to the live instance at once.
        assert client.put("/ha", "2", expected_revision=first.revision).succeeded
        # A blind write moves on once the dead instance is known to be unreachable (until then
        # a broken connection may have carried it, and it is reported rather than repeated).
        wait_until(lambda: _put_or_none(client, "/ha", "3"), timeout=10,
                   message="a blind write to reach the live instance")
        assert client.get("/ha").text == "3"


def _put_or_none(client: ConfigClient, key: str, value: str):
    try:
        return client.put(key, value)
    except errors.ServiceUnavailable:
        return None


def test_a_watch_on_a_bad_prefix_raises_instead_of_retrying(shared_client):
    with shared_client.watch("/bad\nprefix") as watch, pytest.raises(errors.InvalidArgument):
        watch.poll(10)
    assert watch.reconnects == 0
