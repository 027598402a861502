"""Subscription-group definitions: the schema (strict), the broker's table and its checks."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tidemq.broker.store.metadata import MetadataFile
from tidemq.broker.subscription_groups import SubscriptionGroupTable
from tidemq.common.errors import NotFound, PreconditionFailed
from tidemq.configclient.groups import (
    FIELDS,
    GroupDefinitionError,
    SubscriptionGroupConfig,
    parse_group_definition,
)


def doc(**fields) -> bytes:
    return json.dumps(fields).encode()


def test_an_empty_document_takes_rocketmq_defaults():
    group = parse_group_definition("billing", b"{}")
    assert group == SubscriptionGroupConfig("billing")
    assert (group.consume_enable, group.consume_broadcast_enable, group.retry_max_times,
            group.retry_queue_nums, group.consume_from_min_enable) == (True, True, 16, 1, True)


def test_fields_are_read():
    group = parse_group_definition("billing", doc(name="billing", consume_enable=False,
                                                  retry_max_times=3, retry_queue_nums=2))
    assert (group.consume_enable, group.retry_max_times, group.retry_queue_nums) == (False, 3, 2)


@pytest.mark.parametrize(("raw", "fragment"), [
    (b"not json", "is not JSON"),
    (b"[1]", "must be a JSON object"),
    (doc(consume_enabled=False), "unknown field(s) consume_enabled"),
    (doc(consume_enable="false"), "consume_enable must be true or false, got 'false'"),
    (doc(consume_enable=0), "consume_enable must be true or false, got 0"),
    (doc(retry_max_times=True), "retry_max_times must be an integer 0..64, got True"),
    (doc(retry_max_times=65), "retry_max_times must be an integer 0..64, got 65"),
    (doc(retry_max_times=-1), "retry_max_times must be an integer 0..64, got -1"),
    (doc(retry_queue_nums=0), "retry_queue_nums must be an integer 1..64, got 0"),
    (doc(retry_queue_nums=1.5), "retry_queue_nums must be an integer 1..64, got 1.5"),
    (doc(broker_id=-2), "broker_id must be an integer >= 0"),
    (doc(name="other"), "must equal the last segment of the key"),
])
def test_bad_definitions_are_refused_with_a_precise_sentence(raw, fragment):
    with pytest.raises(GroupDefinitionError) as err:
        parse_group_definition("billing", raw)
    assert fragment in str(err.value)
    assert "'billing'" in str(err.value)


@pytest.mark.parametrize("name", ["", "a/b", "a b", "x" * 243, "ümlaut"])
def test_bad_group_names_are_refused(name):
    with pytest.raises(GroupDefinitionError, match="group name"):
        parse_group_definition(name, b"{}")


values = st.fixed_dictionaries({}, optional={
    "consume_enable": st.booleans(), "consume_broadcast_enable": st.booleans(),
    "consume_from_min_enable": st.booleans(), "consume_message_orderly": st.booleans(),
    "notify_consumer_ids_changed_enable": st.booleans(),
    "retry_max_times": st.integers(0, 64), "retry_queue_nums": st.integers(1, 64),
    "broker_id": st.integers(0, 8), "which_broker_when_consume_slowly": st.integers(0, 8),
})


@given(values)
def test_a_valid_definition_round_trips(fields):
    group = parse_group_definition("g", doc(**fields))
    assert parse_group_definition("g", json.dumps(group.to_json()).encode()) == group
    assert set(group.to_json()) == set(FIELDS)


@given(values, st.sampled_from([k for k in FIELDS if k != "name"]),
       st.one_of(st.text(max_size=3), st.floats(allow_nan=False), st.none(),
                 st.integers(-(2**40), -1), st.integers(65, 2**40)))
def test_a_wrong_value_in_any_field_is_refused(fields, field, bad):
    if isinstance(bad, int) and field in ("broker_id", "which_broker_when_consume_slowly") \
            and bad >= 0 and bad < 2**31:
        return  # a legal broker id
    with pytest.raises(GroupDefinitionError, match=field):
        parse_group_definition("g", doc(**{**fields, field: bad}))


# -- the broker's table ----------------------------------------------------------------------


def test_undefined_groups_consume_with_defaults_when_auto_create_is_on():
    table = SubscriptionGroupTable()
    table.check_consume("anyone", broadcasting=True)
    assert table.effective("anyone") == SubscriptionGroupConfig("anyone")
    assert table.get("anyone") is None


def test_undefined_groups_are_refused_when_auto_create_is_off():
    table = SubscriptionGroupTable(auto_create=False)
    with pytest.raises(NotFound) as err:
        table.check_consume("anyone")
    assert err.value.code == "SUBSCRIPTION_GROUP_NOT_EXIST"
    table.put(SubscriptionGroupConfig("anyone"))
    table.check_consume("anyone")


def test_disabled_group_is_refused_with_its_code():
    table = SubscriptionGroupTable()
    table.put(SubscriptionGroupConfig("billing", consume_enable=False))
    with pytest.raises(PreconditionFailed) as err:
        table.check_consume("billing")
    assert err.value.code == "SUBSCRIPTION_GROUP_NOT_CONSUMABLE"
    assert "consume_enable is false in /tidemq/groups/billing" in err.value.message
    table.check_consume("")  # no group: not this table's business


def test_broadcasting_refused_only_when_disallowed():
    table = SubscriptionGroupTable()
    table.put(SubscriptionGroupConfig("audit", consume_broadcast_enable=False))
    table.check_consume("audit")  # clustering is fine
    with pytest.raises(PreconditionFailed) as err:
        table.check_consume("audit", broadcasting=True)
    assert err.value.code == "SUBSCRIPTION_GROUP_BROADCAST_DISABLED"


def test_put_reports_changes_and_the_table_persists(tmp_path):
    file = MetadataFile(tmp_path / "subscription_groups.json")
    table = SubscriptionGroupTable(file)
    first = SubscriptionGroupConfig("billing", retry_max_times=3)
    assert table.put(first) == (True, None)
    assert table.put(first) == (False, first)
    second = SubscriptionGroupConfig("billing", consume_enable=False)
    assert table.put(second) == (True, first)
    table.put(SubscriptionGroupConfig("audit"))
    reloaded = SubscriptionGroupTable(file)
    assert reloaded.snapshot() == [SubscriptionGroupConfig("audit"), second]
    assert reloaded.retain({"billing"}) == ["audit"]
    assert SubscriptionGroupTable(file).snapshot() == [second]
    assert reloaded.remove("billing") == second
    assert SubscriptionGroupTable(file).snapshot() == []


class FailingFile(MetadataFile):
    """A metadata file whose writes fail (disk full), to see what readers are shown."""

    def write(self, content: bytes) -> None:
        raise OSError(28, "No space left on device")


def test_a_change_that_cannot_be_persisted_is_not_enforced(tmp_path):
    file = FailingFile(tmp_path / "groups.json")
    table = SubscriptionGroupTable(file)
    with pytest.raises(OSError):
        table.put(SubscriptionGroupConfig("billing", consume_enable=False))
    assert table.get("billing") is None
    table.check_consume("billing")

    table._groups = {"billing": SubscriptionGroupConfig("billing")}  # as loaded at start
    with pytest.raises(OSError):
        table.remove("billing")
    with pytest.raises(OSError):
        table.retain(set())
    assert table.get("billing") == SubscriptionGroupConfig("billing")
