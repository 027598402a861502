"""`tidemq group create|update|delete|definition|list --defined` against real processes:
definitions land in config-center with compare-and-set and the broker enforces them."""

from __future__ import annotations

import pytest

from tests.support.cluster import running_cluster
from tests.support.processes import wait_until


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    # Its own cluster, not a shared one: `group list --defined` must list exactly its group.
    with running_cluster(tmp_path_factory.mktemp("cli-groups"),
                         broker_names=("broker-a",)) as cluster:
        yield cluster


def test_create_update_list_delete(tidemq):
    created = tidemq.json("group", "create", "payments", "--no-consume", "--retry-max-times",
                          "4", "--set", "consume_from_min_enable=false")
    assert (created["consume_enable"], created["retry_max_times"],
            created["consume_from_min_enable"], created["retry_queue_nums"]) == (False, 4, False, 1)
    again = tidemq("group", "create", "payments", expect=1)
    assert "SUBSCRIPTION_GROUP_ALREADY_EXISTS" in again.output

    def enforced():
        in_force = tidemq.json("group", "definition", "payments")["broker-a"]
        return in_force["defined"] and not in_force["consume_enable"] and in_force

    assert wait_until(enforced, 15, message="the broker to enforce it")["retry_max_times"] == 4

    stale = tidemq("group", "update", "payments", "--consume", "--if-revision",
                   str(created["revision"] + 1000), expect=1)
    assert "PRECONDITION_FAILED" in stale.output
    updated = tidemq.json("group", "update", "payments", "--consume", "--if-revision",
                          str(created["revision"]))
    assert updated["consume_enable"] is True and updated["retry_max_times"] == 4

    bad = tidemq("group", "update", "payments", "--set", "retry_queue_nums=0", expect=1)
    assert "INVALID_SUBSCRIPTION_GROUP" in bad.output and "retry_queue_nums" in bad.output
    unknown = tidemq("group", "update", "payments", "--set", "colour=1", expect=1)
    assert "INVALID_SUBSCRIPTION_GROUP" in unknown.stderr and "unknown field(s) colour" in \
        unknown.stderr
    # an option out of range answers the documented code and sentence (it was click's usage
    # error, exit 2, "not in the range 0<=x<=64")
    out_of_range = tidemq("group", "create", "refunds", "--retry-max-times", "100", expect=1)
    assert out_of_range.stderr.startswith("error INVALID_SUBSCRIPTION_GROUP: group 'refunds': "
                                          "retry_max_times must be an integer 0..64, got 100")

    listed = tidemq.json("group", "list", "--defined")
    assert [(g["name"], g["consume_enable"], g["revision"]) for g in listed] == [
        ("payments", True, updated["revision"])]
    assert "payments" in tidemq("group", "list", "--defined").stdout

    tidemq("group", "delete", "payments", "--yes")
    missing = tidemq("group", "delete", "payments", "--yes", expect=1)
    assert "SUBSCRIPTION_GROUP_NOT_EXIST" in missing.output
    wait_until(lambda: not tidemq.json("group", "definition", "payments")["broker-a"]["defined"],
               15, message="the broker to drop it")
