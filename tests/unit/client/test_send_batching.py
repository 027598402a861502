"""SendCoalescer: concurrent sends leave together, each answered with its own result; a batch
refused whole is resent one by one; a message group's batches never overlap, so its sends are
stored in the order they were made."""

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

    def __init__(self, *, hold: bool = False) -> None:
        self.batches: list[list[bytes]] = []
        self.stored: list[Message] = []
        self.release = threading.Event()
        if not hold:
            self.release.set()
        self.lock = threading.Lock()
        self.open_groups: set[str] = set()
        self.overlaps = 0

    def send_batch(self, messages):
        group = messages[0].message_group
        with self.lock:
            self.batches.append([m.body for m in messages])
            if group and group in self.open_groups:
                self.overlaps += 1
            self.open_groups.add(group)
        try:
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
       st.integers(1, 4))
def test_each_send_is_answered_once_and_a_groups_sends_keep_their_order(sends, in_flight):
    broker = Broker()
    with ThreadPoolExecutor(4) as pool:
        coalescer = SendCoalescer(broker.send_batch, lambda: pool, in_flight=in_flight)
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

    def send_batch(messages):
        seen.append(caller.get())
        return [("stored", m.body) for m in messages]

    coalescer = SendCoalescer(send_batch, lambda: pool, in_flight=1)
    token = caller.set("first")
    try:
        coalescer.submit(Message("t", b"a")).result(timeout=5)
    finally:
        caller.reset(token)
    assert seen == ["first"]
