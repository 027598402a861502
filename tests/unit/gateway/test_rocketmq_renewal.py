"""auto_renew bookkeeping of gateway-grpc, on a hand-moved clock: a held message is extended
before its invisible time runs out, an ack gets the latest handle and ends the holding, and
holding stops at the limit or when the broker says the handle is gone."""

from __future__ import annotations

import pytest
from tidemq.common import errors
from tidemq.gatewaygrpc.renewal import Renewals

from tests.support.clock import FakeClock


class Broker:
    """The proxy's change of invisible time, as a recording function: each call is a new
    handle (`h1`, `h2`, ...), or the error set in `fail`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, int]] = []
        self.fail: errors.TideMQError | None = None

    def __call__(self, group: str, topic: str, receipt: str, invisible_ms: int) -> str:
        if self.fail is not None:
            raise self.fail
        self.calls.append((receipt, invisible_ms))
        return f"h{len(self.calls)}"


@pytest.fixture
def setup():
    clock = FakeClock(100.0)
    broker = Broker()
    renewals = Renewals(broker, max_hold_ms=60_000, tick_s=1.0, clock=clock)
    return clock, broker, renewals


def test_extended_before_it_runs_out_and_ack_gets_the_latest(setup):
    clock, broker, renewals = setup
    renewals.track("g", "t", "h0", 9_000)      # due with a third left, a tick early: +5 s
    clock.advance(4.9)
    assert renewals.renew_due() == 0
    clock.advance(0.2)
    assert renewals.renew_due() == 1 and broker.calls == [("h0", 9_000)]
    clock.advance(5.1)
    assert renewals.renew_due() == 1 and broker.calls[-1] == ("h1", 9_000)
    assert renewals.take("h0") == "h2" and renewals.held() == 0
    assert renewals.take("h0") == "h0"        # not held (any more): itself


def test_holding_stops_at_the_limit(setup):
    clock, broker, renewals = setup
    renewals.track("g", "t", "h0", 30_000)
    clock.advance(61)
    assert renewals.renew_due() == 0 and renewals.held() == 0 and broker.calls == []


@pytest.mark.parametrize(("error", "still_held"), [
    (errors.PreconditionFailed("late", code="RECEIPT_HANDLE_EXPIRED"), 0),
    (errors.ServiceUnavailable("broker down"), 1),
])
def test_a_gone_handle_is_dropped_a_failed_call_retried(setup, error, still_held):
    clock, broker, renewals = setup
    renewals.track("g", "t", "h0", 3_000)
    clock.advance(3)
    broker.fail = error
    assert renewals.renew_due() == 0 and renewals.held() == still_held
