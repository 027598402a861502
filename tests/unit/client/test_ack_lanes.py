"""AckLane: acks made while an Ack call is on the wire leave together in the next call; each
ack gets its own answer, a failed call fails each of its acks, and every ack is sent once."""

from __future__ import annotations

import threading
from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.client.acks import AckLane, AckLanes
from tidemq.common import errors
from tidemq.common.receipt import MAX_ACK_BATCH

from tests.support.processes import wait_until


class Wire:
    """Stands in for the broker's Ack RPC: records each call and lets the test answer it."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], Future]] = []

    def call(self, handles: list[str]):
        """The blocking call: answered at once, every ack accepted."""
        self.calls.append((list(handles), None))
        return SimpleNamespace(results=[SimpleNamespace(code="", message="") for _ in handles])

    def start(self, handles: list[str]) -> Future:
        call: Future = Future()
        self.calls.append((list(handles), call))
        return call

    def answer(self, index: int, codes: dict[str, str] | None = None) -> None:
        handles, call = self.calls[index]
        codes = codes or {}
        call.set_result(SimpleNamespace(results=[
            SimpleNamespace(receipt_handle=h, code=codes.get(h, ""), message=f"bad {h}")
            for h in handles]))


def test_the_first_ack_leaves_alone_and_the_ones_made_meanwhile_leave_together():
    wire = Wire()
    lane = AckLane(wire.call, wire.start)
    first = lane.submit(["h0"])
    later = [lane.submit([f"h{i}"])[0] for i in range(1, 6)]
    assert [handles for handles, _ in wire.calls] == [["h0"]]
    wire.answer(0)
    assert first[0].result(timeout=1) is None
    assert [handles for handles, _ in wire.calls] == [["h0"], ["h1", "h2", "h3", "h4", "h5"]]
    assert not any(f.done() for f in later)
    wire.answer(1, {"h3": "RECEIPT_HANDLE_EXPIRED"})
    assert [f.result(timeout=1) for i, f in enumerate(later) if i != 2] == [None] * 4
    with pytest.raises(errors.PreconditionFailed, match="bad h3"):
        later[2].result(timeout=1)
    assert len(wire.calls) == 2  # nothing left: the lane is idle again
    lane.submit(["h6"])
    assert wire.calls[2][0] == ["h6"]


def test_a_failed_call_fails_each_of_its_acks_and_the_lane_goes_on():
    wire = Wire()
    lane = AckLane(wire.call, wire.start)
    (first,) = lane.submit(["a"])
    (second,) = lane.submit(["b"])
    wire.calls[0][1].set_exception(errors.ServiceUnavailable("broker down"))
    with pytest.raises(errors.ServiceUnavailable):
        first.result(timeout=1)
    assert wire.calls[1][0] == ["b"]
    wire.answer(1)
    assert second.result(timeout=1) is None


def test_a_call_that_cannot_start_answers_its_acks():
    def refuse(handles):
        raise RuntimeError("channel closed")

    (future,) = AckLane(refuse, refuse).submit(["a"])
    with pytest.raises(errors.ServiceUnavailable, match="channel closed"):
        future.result(timeout=1)


def test_one_call_carries_at_most_the_batch_limit():
    wire = Wire()
    lane = AckLane(wire.call, wire.start)
    lane.submit(["x"])
    lane.submit([f"h{i}" for i in range(MAX_ACK_BATCH + 5)])
    wire.answer(0)
    assert len(wire.calls[1][0]) == MAX_ACK_BATCH
    wire.answer(1)
    assert len(wire.calls[2][0]) == 5


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.booleans(), st.booleans()), min_size=1,
                max_size=30))
def test_every_ack_is_sent_once_and_answered_once(steps):
    """Submissions (waiting or not) interleaved with answers in any order: each handle goes
    in exactly one call, at most one call is open at a time, every future ends up answered,
    and a waiting submission to an idle lane is answered on return."""
    wire = Wire()
    lane = AckLane(wire.call, wire.start)
    futures, names = [], iter(range(10_000))
    for size, answer_first, waiting in steps:
        open_calls = [i for i, (_, call) in enumerate(wire.calls)
                      if call is not None and not call.done()]
        assert len(open_calls) <= 1
        if answer_first and open_calls:
            wire.answer(open_calls[0])
        handles = [f"h{next(names)}" for _ in range(size)]
        idle = not any(call is not None and not call.done() for _, call in wire.calls)
        submitted = lane.submit(handles, waiting=waiting)
        if waiting and idle:
            assert all(f.done() for f in submitted)
        futures += list(zip(handles, submitted, strict=True))
    while open_calls := [i for i, (_, call) in enumerate(wire.calls)
                         if call is not None and not call.done()]:
        wire.answer(open_calls[0])
    sent = [h for handles, _ in wire.calls for h in handles]
    assert sorted(sent) == sorted(h for h, _ in futures)
    assert all(f.done() and f.result() is None for _, f in futures)


def test_a_waiting_ack_on_an_idle_lane_is_made_on_the_callers_thread():
    wire = Wire()
    lane = AckLane(wire.call, wire.start)
    (future,) = lane.submit(["a"], waiting=True)
    assert future.result(timeout=0) is None
    assert wire.calls == [(["a"], None)]  # the blocking call, no future started


def locate(text: str) -> tuple[str, str]:
    """"broker:handle" texts; "junk" is not a handle."""
    if text == "junk":
        raise errors.InvalidArgument("not a handle", code="INVALID_RECEIPT_HANDLE")
    broker, _, handle = text.partition(":")
    return broker, handle


def addr_of(broker: str) -> str:
    """Every broker group but "gone" has a route."""
    if broker == "gone":
        raise errors.ServiceUnavailable("no route to gone")
    return broker


def test_routed_acks_fail_alone_for_a_bad_text_and_together_for_an_unroutable_group():
    wire = Wire()
    lanes = AckLanes(lambda addr: SimpleNamespace(call=lambda m, r: wire.call(
        list(r.receipt_handles)), start=lambda m, r: wire.start(list(r.receipt_handles))))

    futures = lanes.submit_routed("g", ["a:1", "junk", "gone:2", "a:3", "gone:4"], locate,
                                  lambda broker: f"{addr_of(broker)}:9", waiting=True)
    assert futures[0].result(timeout=1) is None and futures[3].result(timeout=1) is None
    assert futures[1].exception().code == "INVALID_RECEIPT_HANDLE"
    assert all(isinstance(futures[i].exception(), errors.ServiceUnavailable) for i in (2, 4))
    assert wire.calls == [(["1", "3"], None)]  # one call for broker a, the bad ones never sent


def test_a_held_batch_is_acked_in_calls_of_its_own_per_broker_group():
    """`ack_routed`: a batch skips the lanes; each broker group's handles go in calls of at
    most MAX_ACK_BATCH, all started before any answer, each handle answered as a single ack
    of it would be."""
    wire = Wire()
    lanes = AckLanes(lambda addr: SimpleNamespace(start=lambda m, r: wire.start(
        [f"{addr}/{h}" for h in r.receipt_handles])))

    texts = ([f"a:{i}" for i in range(MAX_ACK_BATCH + 1)] + ["junk", "b:x", "gone:1", "c:y"])
    starting = threading.Thread(target=lambda: results.extend(lanes.ack_routed(
        "g", texts, locate, addr_of)))
    results: list = []
    starting.start()
    wait_until(lambda: len(wire.calls) == 4)  # a twice (the limit), b, c: before any answer
    assert [len(handles) for handles, _ in wire.calls] == [MAX_ACK_BATCH, 1, 1, 1]
    wire.answer(0)
    wire.answer(1, {"a/1024": "RECEIPT_HANDLE_EXPIRED"})
    wire.answer(2)
    wire.calls[3][1].set_exception(errors.ServiceUnavailable("c is down"))
    starting.join(5)
    assert results[:MAX_ACK_BATCH] == [None] * MAX_ACK_BATCH
    assert results[MAX_ACK_BATCH].code == "RECEIPT_HANDLE_EXPIRED"
    assert [type(e).__name__ if e else None for e in results[MAX_ACK_BATCH + 1:]] == [
        "InvalidArgument", None, "ServiceUnavailable", "ServiceUnavailable"]
