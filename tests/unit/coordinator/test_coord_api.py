"""The documented examples run, and the real-time ticker drives a group without a fake clock."""

from __future__ import annotations

import doctest

import pytest
from tidemq.broker.coordinator import (
    UNKNOWN_MEMBER_ID,
    CoordinatorConfig,
    CoordinatorTicker,
    GroupCoordinator,
    GroupState,
    coordinator,
    ticker,
)
from tidemq.common import placement


@pytest.mark.parametrize("module", [coordinator, placement, ticker])
def test_docstring_examples_run(module):
    outcome = doctest.testmod(module)
    assert outcome.attempted > 0 and outcome.failed == 0


def test_ticker_completes_a_rebalance_in_real_time():
    group_coordinator = GroupCoordinator(
        CoordinatorConfig(initial_rebalance_delay_ms=50, min_session_timeout_ms=100)
    )
    running = CoordinatorTicker(group_coordinator, interval_ms=10).start()
    try:
        joining = group_coordinator.join_group(
            "rt", UNKNOWN_MEMBER_ID, [("averagely", b"")], session_timeout_ms=5_000
        )
        joined = joining.result(timeout=10)  # bounded wait, answered by the ticker thread
        synced = group_coordinator.sync_group("rt", joined.member_id, joined.generation_id, {})
        assert synced.result(timeout=10).assignment == b""
        assert group_coordinator.describe_group("rt").state is GroupState.STABLE
    finally:
        running.stop()


def test_ticker_rejects_a_nonsense_interval():
    with pytest.raises(ValueError):
        CoordinatorTicker(GroupCoordinator(), interval_ms=0)
