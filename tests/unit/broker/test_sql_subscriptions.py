"""SQL92 subscriptions on the broker's domain objects (no network): pull and pop keep exactly
the matching messages, skip the rest like tag mismatches, and refuse bad or disabled filters."""

from __future__ import annotations

import pytest
from tidemq.broker.messaging import PullStatus, subscription_filter
from tidemq.common import errors, record

from tests.unit.broker.test_pop_state_machine import GROUP, TOPIC, PopMachine


@pytest.fixture
def machine():
    m = PopMachine()
    yield m
    m.teardown()


def send(m, queue: int, items: list[tuple[bytes, dict[str, str]]], tags: str = "") -> None:
    raw = b"".join(record.encode_message(record.OutgoingMessage(TOPIC, body, tags=tags,
                                                                properties=props))[0]
                   for body, props in items)
    m.run(m.messaging.send(TOPIC, queue, raw, len(items)))
    assert m.store.wait_dispatched(5)


ORDERS = [(b"o%d" % i, {"amount": str(i * 10), "region": "eu" if i % 2 else "us"})
          for i in range(10)]


def test_pull_keeps_only_matches_and_moves_past_the_rest(machine):
    send(machine, 0, ORDERS)
    pulled = machine.run(machine.messaging.pull(TOPIC, 0, 0, 32, 0, 0,
                                                "amount > 40 AND region = 'eu'", "SQL92"))
    assert pulled.status is PullStatus.FOUND and pulled.next_begin_offset == 10
    assert [bytes(r.body) for r in record.iter_records(pulled.records)] == [b"o5", b"o7", b"o9"]
    none = machine.run(machine.messaging.pull(TOPIC, 0, 0, 32, 0, 0, "missing IS NOT NULL",
                                              "sql92"))
    assert (none.status, none.next_begin_offset) == (PullStatus.NO_MATCHED_MSG, 10)


def test_tag_subscriptions_are_unchanged(machine):
    send(machine, 0, ORDERS[:2], tags="A")
    send(machine, 0, ORDERS[2:4], tags="B")
    pulled = machine.run(machine.messaging.pull(TOPIC, 0, 0, 32, 0, 0, "B", "TAG"))
    assert [bytes(r.body) for r in record.iter_records(pulled.records)] == [b"o2", b"o3"]
    assert subscription_filter("", "A || B").sql is None
    assert subscription_filter("TAG", "*").unfiltered


def test_bad_sql_is_invalid_filter_with_its_position(machine):
    with pytest.raises(errors.InvalidArgument) as caught:
        machine.run(machine.messaging.pull(TOPIC, 0, 0, 32, 0, 0, "amount >", "SQL92"))
    assert caught.value.code == "INVALID_FILTER" and "position 8" in caught.value.message
    with pytest.raises(errors.InvalidArgument) as unknown_type:
        machine.run(machine.messaging.pull(TOPIC, 0, 0, 32, 0, 0, "a = 1", "XPATH"))
    assert unknown_type.value.code == "INVALID_FILTER"


def test_a_broker_with_property_filters_disabled_refuses_sql(machine):
    machine.messaging.enable_property_filter = False
    for call in (machine.messaging.pull(TOPIC, 0, 0, 32, 0, 0, "a = 1", "SQL92"),
                 machine.pop.pop(GROUP, TOPIC, 8, 1000, 0, "a = 1", "SQL92")):
        with pytest.raises(errors.PreconditionFailed) as caught:
            machine.run(call)
        assert caught.value.code == "FILTER_DISABLED"
    pulled = machine.run(machine.messaging.pull(TOPIC, 0, 0, 32, 0, 0, "*", "TAG"))
    assert pulled.status is PullStatus.NO_NEW_MSG


def test_pop_with_sql_hands_out_only_matches_and_retries_them(machine):
    send(machine, 0, ORDERS[:5])
    send(machine, 1, ORDERS[5:])
    popped = machine.run(machine.pop.pop(GROUP, TOPIC, 32, 1000, 0, "amount >= 30 AND "
                                         "amount NOT BETWEEN 50 AND 70", "SQL92"))
    bodies = sorted(bytes(r.body) for r in record.iter_records(popped.records))
    assert bodies == [b"o3", b"o4", b"o8", b"o9"] and len(popped.handles) == 4
    again = machine.run(machine.pop.pop(GROUP, TOPIC, 32, 1000, 0, "amount >= 30", "SQL92"))
    assert again.handles == []   # the cursor moved past the non-matching ones too
    machine.time_passes(2)   # not acked: revived into the retry topic, popped again
    retried = machine.run(machine.pop.pop(GROUP, TOPIC, 32, 1000, 0, "amount >= 30 AND "
                                          "amount NOT BETWEEN 50 AND 70", "SQL92"))
    assert sorted(bytes(r.body) for r in record.iter_records(retried.records)) == bodies


def test_a_filter_is_compiled_once_per_expression():
    first = subscription_filter("SQL92", "amount > 1").sql
    assert subscription_filter("SQL92", "amount > 1").sql is first
