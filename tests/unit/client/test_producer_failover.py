"""Producer sends across a replica group's master change (route and broker calls replaced by
stand-ins, as in test_producer_retries): the same bytes reach the new master, and waiting for
the election does not use up retries."""

from __future__ import annotations

import pytest
from tidemq.client import Message, Producer
from tidemq.client.routes import BrokerGroup, QueueLayout, TopicRoute
from tidemq.common import errors
from tidemq.v1 import broker_pb2

OLD, NEW, OTHER = "a0:1", "a1:1", "b:1"


def route(addrs: dict[int, str], with_b: bool = False) -> TopicRoute:
    queues = [QueueLayout("broker-a", 2, 2, 6)]
    brokers = {"broker-a": BrokerGroup("c", "broker-a", addrs)}
    if with_b:
        queues.append(QueueLayout("broker-b", 2, 2, 6))
        brokers["broker-b"] = BrokerGroup("c", "broker-b", {0: OTHER})
    return TopicRoute("t", tuple(queues), brokers)


class ElectionRoutes:
    """The old route until `elect_after` refreshes, then the route after the election."""

    def __init__(self, before: TopicRoute, after: TopicRoute, elect_after: int) -> None:
        self.before, self.after, self.elect_after = before, after, elect_after
        self.refreshes = 0

    def get(self, topic):
        return self.after if self.refreshes >= self.elect_after else self.before

    def refresh(self, topic):
        self.refreshes += 1
        return self.get(topic)

    def invalidate(self, topic):
        pass


class Brokers:
    def __init__(self, failures: dict[str, errors.TideMQError],
                 frozen: frozenset[str] = frozenset()) -> None:
        self.failures = failures
        self.frozen = frozen   # never answer: the call waits until it is abandoned
        self.sent: list[tuple[str, bytes]] = []
        self.abandon_checks = 0

    def get(self, addr):
        brokers = self

        class Client:
            def call_unless(self, method, request, *, timeout, abandon, check_every_s,
                            bulk=b""):
                request.records = bulk  # what the channel carries beside the request
                if addr in brokers.frozen:
                    brokers.sent.append((addr, request.records))
                    while not abandon():   # as BrokerChannel.call_unless asks while outstanding
                        brokers.abandon_checks += 1
                        assert brokers.abandon_checks < 100, "never abandoned"
                    raise errors.ServiceUnavailable("abandoned")
                return self.call(method, request, timeout)

            def call(self, method, request, timeout=None, idempotent=False):
                brokers.sent.append((addr, request.records))
                if addr in brokers.failures:
                    raise brokers.failures[addr]
                return broker_pb2.SendResponse(
                    broker_name="broker-b" if addr == OTHER else "broker-a",
                    queue_id=request.queue_id, first_queue_offset=7,
                    physical_offsets=[100], store_host=b"\x7f\0\0\1\0\0\x27\x0f")

        return Client()


def producer_for(routes, failures, retries=0, timeout=5.0) -> Producer:
    producer = Producer("127.0.0.1:1", retries=retries, send_timeout=timeout)
    producer.routes = routes
    producer.brokers = Brokers(failures)
    return producer


@pytest.mark.parametrize("failure", [
    errors.ServiceUnavailable("connection refused"),            # the master died
    errors.PreconditionFailed("not master", code="NOT_MASTER"),  # it stepped down
])
def test_send_follows_the_new_master_of_its_group_with_the_same_bytes(failure):
    routes = ElectionRoutes(route({0: OLD, 2: NEW}), route({0: NEW}), elect_after=3)
    producer = producer_for(routes, {OLD: failure}, retries=0)
    result = producer.send(Message("t", b"payload"))
    assert result.broker_name == "broker-a" and result.queue_offset == 7
    addrs = [addr for addr, _ in producer.brokers.sent]
    assert addrs[-1] == NEW and set(addrs[:-1]) == {OLD}
    assert len({records for _, records in producer.brokers.sent}) == 1  # one unique id


def test_a_group_with_no_master_yet_is_waited_for():
    routes = ElectionRoutes(route({2: NEW, 3: "a2:1"}), route({0: NEW, 3: "a2:1"}),
                            elect_after=2)
    producer = producer_for(routes, {})
    assert producer.send(Message("t", b"x")).broker_name == "broker-a"
    assert [addr for addr, _ in producer.brokers.sent] == [NEW]


def test_election_wait_ends_at_the_send_timeout_with_the_last_error():
    routes = ElectionRoutes(route({0: OLD, 2: NEW}), route({0: OLD, 2: NEW}), elect_after=0)
    producer = producer_for(routes, {OLD: errors.ServiceUnavailable("refused")}, timeout=0.5)
    with pytest.raises(errors.ServiceUnavailable):
        producer.send(Message("t", b"x"))
    assert {addr for addr, _ in producer.brokers.sent} == {OLD}


def test_dead_master_without_slaves_still_uses_up_retries():
    routes = ElectionRoutes(route({0: OLD}), route({0: OLD}), elect_after=0)
    producer = producer_for(routes, {OLD: errors.ServiceUnavailable("refused")}, retries=2)
    with pytest.raises(errors.ServiceUnavailable) as info:
        producer.send(Message("t", b"x"))
    assert len(producer.brokers.sent) == 3 and "3 attempt(s)" in info.value.message


def test_not_enough_replicas_is_retried_on_another_group():
    routes = ElectionRoutes(route({0: OLD, 2: NEW}, with_b=True),
                            route({0: OLD, 2: NEW}, with_b=True), elect_after=0)
    refused = errors.PreconditionFailed("1 of 2 in sync", code="NOT_ENOUGH_REPLICAS")
    producer = producer_for(routes, {OLD: refused}, retries=1)
    results = [producer.send(Message("t", b"x")) for _ in range(4)]
    assert {r.broker_name for r in results} == {"broker-b"}


def test_a_send_to_a_frozen_master_is_abandoned_once_the_group_elected_another():
    """A SIGSTOPped master never answers; once the name servers route the group to a new
    master the send goes there with the same bytes instead of waiting out its timeout."""
    routes = ElectionRoutes(route({0: OLD, 2: NEW}), route({0: NEW}), elect_after=3)
    producer = producer_for(routes, {}, timeout=60)
    producer.brokers = Brokers({}, frozen=frozenset({OLD}))
    result = producer.send(Message("t", b"payload"))
    assert result.broker_name == "broker-a"
    assert [addr for addr, _ in producer.brokers.sent] == [OLD, NEW]
    assert len({records for _, records in producer.brokers.sent}) == 1  # one unique id
