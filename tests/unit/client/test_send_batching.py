"""SendCoalescer: concurrent sends leave together, each answered with its own result; a batch
refused whole is resent one by one; a message group's batches never overlap, so its sends are
stored in the order they were made; a topic keeps one batch on the wire per broker group (a
second once a full batch waits), and a group that hangs holds only its own batch."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor, wait

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.client.message import Message
from tidemq.client.send_batching import MAX_BATCH_MESSAGES, SendCoalescer
from tidemq.common import errors

from tests.support.processes import wait_until


class Broker:
    """Stands in for Producer.send_batch: stores each batch whole (or refuses it whole)."""

    def __init__(self, *, hold: bool = False, hold_group: str | None = None) -> None:
        self.batches: list[list[bytes]] = []
        self.groups: list[str] = []  # the broker group each batch was sent to
        self.on_wire = 0
        self.hold_group = hold_group  # only this group's batches wait for `release`
        self.stored: list[Message] = []
        self.release = threading.Event()
        if not hold and hold_group is None:
            self.release.set()
        self.lock = threading.Lock()
        self.open_groups: set[str] = set()
        self.overlaps = 0

    def send_batch(self, messages, broker_name=""):
        group = messages[0].message_group
        with self.lock:
            self.batches.append([m.body for m in messages])
            self.groups.append(broker_name)
            self.on_wire += 1
            if group and group in self.open_groups:
                self.overlaps += 1
            self.open_groups.add(group)
        try:
            if self.hold_group is None or broker_name == self.hold_group:
                self.release.wait(10)
            if any(m.body.startswith(b"bad") for m in messages):
                raise errors.InvalidArgument("a bad message")
            if any(m.body.startswith(b"lost") for m in messages):
                raise errors.DeadlineExceeded("no answer")
            with self.lock:
                self.stored += messages
            return [("stored", m.body) for m in messages]
        finally:
            with self.lock:
                self.open_groups.discard(group)
                self.on_wire -= 1


@pytest.fixture
def pool():
    with ThreadPoolExecutor(4) as executor:
        yield executor


def test_sends_made_while_a_batch_is_on_the_wire_leave_together(pool):
    broker = Broker(hold=True)
    coalescer = SendCoalescer(broker.send_batch, lambda: pool, in_flight=1)
    futures = [coalescer.submit(Message("t", f"m{i}".encode())) for i in range(10)]
    wait_until(lambda: len(broker.batches) == 1, 5, message="the first batch on the wire")
    broker.release.set()
    assert [f.result(timeout=5) for f in futures] == [("stored", f"m{i}".encode())
                                                      for i in range(10)]
    assert broker.batches == [[b"m0"], [f"m{i}".encode() for i in range(1, 10)]]


def test_a_batch_refused_whole_is_resent_one_by_one(pool):
    broker = Broker(hold=True)
    coalescer = SendCoalescer(broker.send_batch, lambda: pool, in_flight=1)
    first = coalescer.submit(Message("t", b"first"))
    rest = [coalescer.submit(Message("t", body)) for body in (b"a", b"bad", b"c")]
    wait_until(lambda: len(broker.batches) == 1, 5, message="the first batch on the wire")
    broker.release.set()
    assert first.result(timeout=5) == ("stored", b"first")
    assert rest[0].result(timeout=5) == ("stored", b"a")
    with pytest.raises(errors.InvalidArgument):
        rest[1].result(timeout=5)
    assert rest[2].result(timeout=5) == ("stored", b"c")
    assert [m.body for m in broker.stored] == [b"first", b"a", b"c"]


def test_an_unanswered_batch_fails_each_of_its_sends_and_is_not_resent(pool):
    broker = Broker()
    coalescer = SendCoalescer(broker.send_batch, lambda: pool, in_flight=1)
    futures = [coalescer.submit(Message("t", b"lost"))]
    with pytest.raises(errors.DeadlineExceeded):
        futures[0].result(timeout=5)
    assert broker.batches == [[b"lost"]]


def test_a_batch_carries_at_most_the_limit(pool):
    broker = Broker(hold=True)
    coalescer = SendCoalescer(broker.send_batch, lambda: pool, in_flight=1)
    futures = [coalescer.submit(Message("t", b"x")) for _ in range(MAX_BATCH_MESSAGES + 3)]
    broker.release.set()
    wait(futures, timeout=10)
    assert [len(b) for b in broker.batches] == [1, MAX_BATCH_MESSAGES, 2]


def test_a_closed_pool_fails_the_send(pool):
    pool.shutdown()
    coalescer = SendCoalescer(Broker().send_batch, lambda: pool, in_flight=2)
    with pytest.raises(RuntimeError):
        coalescer.submit(Message("t", b"x")).result(timeout=5)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["t1", "t2"]), st.sampled_from(["", "g1", "g2"]),
                          st.sampled_from([b"ok", b"ok", b"ok", b"bad"])),
                min_size=1, max_size=40),
       st.integers(1, 4), st.sampled_from([(), ("a",), ("a", "b")]))
def test_each_send_is_answered_once_and_a_groups_sends_keep_their_order(sends, in_flight,
                                                                        groups):
    broker = Broker()
    with ThreadPoolExecutor(4) as pool:
        coalescer = SendCoalescer(broker.send_batch, lambda: pool, in_flight=in_flight,
                                  brokers=lambda topic: groups)
        messages = [Message(topic, body + f"-{i}".encode(), message_group=group)
                    for i, (topic, group, body) in enumerate(sends)]
        futures = [coalescer.submit(m) for m in messages]
        wait(futures, timeout=20)
    for message, future in zip(messages, futures, strict=True):
        if message.body.startswith(b"bad"):
            assert isinstance(future.exception(), errors.InvalidArgument)
        else:
            assert future.result() == ("stored", message.body)
    assert broker.overlaps == 0
    assert all(len({m.topic for m in broker.stored if m.body in batch}) <= 1
               for batch in broker.batches)
    for group in ("g1", "g2"):
        for topic in ("t1", "t2"):
            made = [m.body for m in messages if (m.topic, m.message_group) == (topic, group)
                    and not m.body.startswith(b"bad")]
            stored = [m.body for m in broker.stored if (m.topic, m.message_group) ==
                      (topic, group)]
            assert stored == made


def test_a_batch_is_sent_in_its_first_callers_context(pool):
    """So its publish span joins that caller's trace (gateway-grpc relaying one client)."""
    import contextvars

    caller = contextvars.ContextVar("caller", default="none")
    seen = []

    def send_batch(messages, broker_name):
        seen.append(caller.get())
        return [("stored", m.body) for m in messages]

    coalescer = SendCoalescer(send_batch, lambda: pool, in_flight=1)
    token = caller.set("first")
    try:
        coalescer.submit(Message("t", b"a")).result(timeout=5)
    finally:
        caller.reset(token)
    assert seen == ["first"]


def test_one_batch_per_broker_group_is_on_the_wire_and_the_rest_waits_for_it(pool):
    """However many calls `in_flight` allows: 1 555 one-message batches of 20 000 sends
    at 4 calls per group made the per-call cost dominate."""
    broker = Broker(hold=True)
    coalescer = SendCoalescer(broker.send_batch, lambda: pool, in_flight=4,
                              brokers=lambda topic: ("a",))
    futures = [coalescer.submit(Message("t", f"m{i}".encode())) for i in range(10)]
    wait_until(lambda: len(broker.batches) == 1, 5, message="the first batch on the wire")
    assert broker.on_wire == 1
    broker.release.set()
    assert [f.result(timeout=5) for f in futures] == [("stored", f"m{i}".encode())
                                                      for i in range(10)]
    assert broker.batches == [[b"m0"], [f"m{i}".encode() for i in range(1, 10)]]
    assert broker.groups == ["a", "a"]


def test_a_full_batch_waiting_goes_on_the_wire_beside_the_first(pool):
    broker = Broker(hold=True)
    coalescer = SendCoalescer(broker.send_batch, lambda: pool, in_flight=4,
                              brokers=lambda topic: ("a",))
    futures = [coalescer.submit(Message("t", b"x")) for _ in range(MAX_BATCH_MESSAGES + 3)]
    wait_until(lambda: broker.on_wire == 2, 5, message="a full batch beside the first")
    assert [len(b) for b in broker.batches] == [1, MAX_BATCH_MESSAGES]
    broker.release.set()
    wait(futures, timeout=10)
    assert [len(b) for b in broker.batches] == [1, MAX_BATCH_MESSAGES, 2]


def test_lone_sends_take_the_idle_broker_groups_in_turn(pool):
    broker = Broker()
    coalescer = SendCoalescer(broker.send_batch, lambda: pool, in_flight=4,
                              brokers=lambda topic: ("a", "b"))
    for i in range(4):
        assert coalescer.submit(Message("t", f"m{i}".encode())).result(timeout=5)
        # a future is answered just before its batch is accounted for: until then its group
        # is busy, and the next lone send would go elsewhere
        wait_until(lambda: coalescer.batches_on_wire == 0, 5, message="the batch accounted for")
    assert broker.groups == ["a", "b", "a", "b"]


def test_a_hung_broker_group_holds_only_its_own_batch(pool):
    """No head-of-line blocking: while group a does not answer, the topic's other sends go
    to group b, wave after wave (at 4 calls per group, a would soon hold every call)."""
    broker = Broker(hold_group="a")
    coalescer = SendCoalescer(broker.send_batch, lambda: pool, in_flight=4,
                              brokers=lambda topic: ("a", "b"))
    sends: dict[bytes, object] = {}

    def on_b_answered() -> bool:
        with broker.lock:
            on_a = {body for batch, group in zip(broker.batches, broker.groups, strict=True)
                    if group == "a" for body in batch}
        return all(future.done() for body, future in sends.items() if body not in on_a)

    for wave in range(5):
        for i in range(8):
            body = f"w{wave}-{i}".encode()
            sends[body] = coalescer.submit(Message("t", body))
        wait_until(on_b_answered, 5, message=f"wave {wave} answered by group b")
    assert broker.groups.count("a") == 1
    waiting = [body for body, future in sends.items() if not future.done()]
    assert waiting == broker.batches[broker.groups.index("a")]
    broker.release.set()
    assert all(future.result(timeout=5) == ("stored", body) for body, future in sends.items())


def test_a_send_cancelled_while_it_waits_is_not_sent(pool):
    broker = Broker(hold=True)
    coalescer = SendCoalescer(broker.send_batch, lambda: pool, in_flight=1)
    first = coalescer.submit(Message("t", b"first"))
    rest = [coalescer.submit(Message("t", body)) for body in (b"a", b"b", b"c")]
    wait_until(lambda: len(broker.batches) == 1, 5, message="the first batch on the wire")
    assert rest[1].cancel()
    broker.release.set()
    assert [f.result(timeout=5) for f in (first, rest[0], rest[2])] == [
        ("stored", b"first"), ("stored", b"a"), ("stored", b"c")]
    assert broker.batches == [[b"first"], [b"a", b"c"]]


def test_a_waiting_send_that_leaves_alone_is_sent_on_the_callers_thread(pool):
    threads: list[int] = []
    broker = Broker()
    original = broker.send_batch

    def send_batch(messages, broker_name=""):
        threads.append(threading.get_ident())
        return original(messages, broker_name)

    coalescer = SendCoalescer(send_batch, lambda: pool, in_flight=2)
    future = coalescer.submit(Message("t", b"alone"), waiting=True)
    assert future.done() and future.result() == ("stored", b"alone")
    assert threads == [threading.get_ident()]
    assert coalescer.batches_on_wire == 0


def test_a_waiting_send_behind_a_batch_on_the_wire_joins_the_next_batch(pool):
    broker = Broker(hold=True)
    coalescer = SendCoalescer(broker.send_batch, lambda: pool, in_flight=1)
    first = coalescer.submit(Message("t", b"m0"))
    wait_until(lambda: len(broker.batches) == 1, 5, message="the first batch on the wire")
    queued = [coalescer.submit(Message("t", b"m1"))]
    waiting = pool.submit(lambda: coalescer.submit(Message("t", b"m2"), waiting=True).result(5))
    wait_until(lambda: sum(len(lane.queued) for lane in coalescer._lanes.values()) == 2, 5,
               message="both sends queued behind the batch on the wire")
    broker.release.set()
    assert first.result(5) == ("stored", b"m0") and queued[0].result(5) == ("stored", b"m1")
    assert waiting.result(5) == ("stored", b"m2")
    assert broker.batches == [[b"m0"], [b"m1", b"m2"]]


def test_a_waiting_send_refused_fails_alone_and_frees_the_lane(pool):
    broker = Broker()
    coalescer = SendCoalescer(broker.send_batch, lambda: pool, in_flight=1)
    with pytest.raises(errors.InvalidArgument):
        coalescer.submit(Message("t", b"bad"), waiting=True).result()
    assert coalescer.batches_on_wire == 0
    assert coalescer.submit(Message("t", b"ok"), waiting=True).result() == ("stored", b"ok")


def test_sends_for_different_end_clients_of_a_gateway_are_never_batched_together(pool):
    """A gateway's sends on behalf of two clients: each batch is one client's, sent in its
    context, so the broker charges it to that client's quotas (docs/quotas.md)."""
    from tidemq.common.quotas import END_CLIENT, on_behalf_of

    broker = Broker(hold=True)
    senders: list[set] = []
    real = broker.send_batch

    def send_batch(messages, broker_name=""):
        end = END_CLIENT.get()
        senders.append({(end.client_id if end else None, m.body[:1]) for m in messages})
        return real(messages, broker_name)

    coalescer = SendCoalescer(send_batch, lambda: pool, in_flight=1)
    futures = []
    with on_behalf_of("a"):
        futures.append(coalescer.submit(Message("t", b"a0")))
    wait_until(lambda: len(broker.batches) == 1, 5, message="the first batch on the wire")
    for i in range(1, 6):
        for who in ("a", "b"):
            with on_behalf_of(who):
                futures.append(coalescer.submit(Message("t", f"{who}{i}".encode())))
    broker.release.set()
    wait(futures, timeout=10)
    assert all(f.result() for f in futures)
    assert all(len(batch) == 1 for batch in senders), senders   # one client per batch
    assert {("a", b"a"), ("b", b"b")} == set().union(*senders)
