"""A broker group whose disk is full (STORAGE_FULL, or a route that lists it read-only):
single and batch sends go to the other group, and a send_many batch that still fails reports
per-message outcomes instead of failing the batches that were stored."""

from __future__ import annotations

import pytest
from tidemq.client import Message, SendManyError
from tidemq.client.producer import group_queue
from tidemq.client.routes import BrokerGroup, QueueLayout, TopicRoute
from tidemq.common import errors

from tests.unit.client import test_producer_retries as stubs

FULL = errors.StorageFull("broker broker-b refuses sends, its storage is full: ...")


def test_single_sends_and_send_many_go_around_a_full_group():
    producer = stubs.make_producer({"b:1": FULL})
    results = [producer.send(Message("t", b"x")) for _ in range(6)]
    assert {r.broker_name for r in results} == {"broker-a"}
    many = producer.send_many([Message("t", f"{i}".encode()) for i in range(40)])
    assert len(many) == 40 and {r.broker_name for r in many} == {"broker-a"}
    assert len({r.unique_id for r in many}) == 40
    assert not producer.faults.is_available("broker-b")


def test_a_read_only_route_keeps_every_send_away_from_the_group():
    route = TopicRoute(
        "t", (QueueLayout("broker-a", 2, 2, 6), QueueLayout("broker-b", 2, 2, 2)),
        {"broker-a": BrokerGroup("c", "broker-a", {0: "a:1"}),
         "broker-b": BrokerGroup("c", "broker-b", {0: "b:1"})})
    producer = stubs.make_producer({})
    producer.routes.get = lambda topic: route
    producer.send_many([Message("t", f"{i}".encode()) for i in range(20)])
    producer.send(Message("t", b"x"))
    assert {addr for addr, _, _ in producer.brokers.calls} == {"a:1"}


def test_a_group_with_slaves_answering_storage_full_is_not_waited_on_as_an_election():
    route = TopicRoute(
        "t", (QueueLayout("broker-a", 2, 2, 6), QueueLayout("broker-b", 2, 2, 6)),
        {"broker-a": BrokerGroup("c", "broker-a", {0: "a:1", 1: "a:2"}),
         "broker-b": BrokerGroup("c", "broker-b", {0: "b:1", 1: "b:2"})})
    producer = stubs.make_producer({"a:1": FULL, "b:1": FULL})
    producer.routes.get = lambda topic: route
    with pytest.raises(errors.StorageFull) as refused:
        producer.send(Message("t", b"x"))
    assert len(producer.brokers.calls) == 3   # retries spent, no waiting for a new master
    assert refused.value.code == "STORAGE_FULL"


def test_send_many_reports_per_message_outcomes_when_one_group_refuses():
    """Message group "g" hashes to one queue (pinned: FIFO) on the full group; the other
    messages are stored on the other group, and the error says which is which."""
    producer = stubs.make_producer({"b:1": FULL})
    route = producer.routes.get("t")
    group = next(g for g in (f"g{i}" for i in range(100))
                 if group_queue(route, g).broker_name == "broker-b")
    messages = [Message("t", f"{i}".encode(), message_group=group if i % 3 == 0 else "")
                for i in range(12)]
    with pytest.raises(SendManyError) as partial:
        producer.send_many(messages)
    error = partial.value
    assert isinstance(error, errors.StorageFull) and isinstance(error, errors.ServiceUnavailable)
    assert error.code == "STORAGE_FULL" and error.http_status == 507
    # The group's messages (and any others round-robin put in its queue's batch) failed.
    failed, sent = error.failed, error.sent
    assert {0, 3, 6, 9} <= set(failed) and sent and sorted(failed + sent) == list(range(12))
    assert all(error.results[i].broker_name == "broker-a" for i in sent)
    assert all(error.errors[i].code == "STORAGE_FULL" and error.results[i] is None
               for i in failed)
    assert all(error.errors[i] is None for i in sent)
    assert str(error).startswith(f"STORAGE_FULL: {len(failed)} of 12 messages were not sent "
                                 f"({len(sent)} were)")


def test_the_old_except_clause_still_catches_a_partial_failure():
    producer = stubs.make_producer({"b:1": errors.ServiceUnavailable("down")})
    route = producer.routes.get("t")
    on_b, on_a = (next(g for g in (f"g{i}" for i in range(100))
                       if group_queue(route, g).broker_name == name)
                  for name in ("broker-b", "broker-a"))
    with pytest.raises(errors.ServiceUnavailable) as refused:
        producer.send_many([Message("t", b"a", message_group=on_b),
                            Message("t", b"b", message_group=on_a)])
    assert isinstance(refused.value, SendManyError) and refused.value.sent == [1]
