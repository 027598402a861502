"""Drives a GroupCoordinator with a fake clock: no sleeps, every timer fires on `advance`."""

from __future__ import annotations

import itertools
from concurrent.futures import Future

from tidemq.broker.coordinator import (
    UNKNOWN_MEMBER_ID,
    CoordinatorConfig,
    GroupCoordinator,
    GroupState,
    JoinResult,
)

from tests.support.clock import FakeClock

GROUP = "orders-consumers"
PROTOCOLS = [("averagely", b"topic=orders")]
SESSION_MS = 10_000
REBALANCE_MS = 20_000
INITIAL_DELAY_MS = 3_000


class Harness:
    """A coordinator, its fake clock, and the states it passed through."""

    def __init__(self, initial_delay_ms: int = INITIAL_DELAY_MS) -> None:
        self.clock = FakeClock(1_000_000)
        self.transitions: list[tuple[str, GroupState, GroupState]] = []
        self.rebalances: list[tuple[str, str, str]] = []   # (group, reason, member id)
        counter = itertools.count(1)
        self.coordinator = GroupCoordinator(
            CoordinatorConfig(
                initial_rebalance_delay_ms=initial_delay_ms,
                min_session_timeout_ms=100,
            ),
            now_ms=self.clock,
            member_id_factory=lambda client_id: f"{client_id or 'member'}-{next(counter)}",
            on_transition=lambda group, old, new: self.transitions.append((group, old, new)),
            on_rebalance=lambda group, reason, member: self.rebalances.append(
                (group, reason, member)),
        )

    def advance(self, ms: int) -> None:
        self.clock.advance(ms)
        self.coordinator.tick()

    def join(
        self,
        member_id: str = UNKNOWN_MEMBER_ID,
        client_id: str = "",
        protocols=None,
        group: str = GROUP,
        session_ms: int = SESSION_MS,
    ) -> Future[JoinResult]:
        return self.coordinator.join_group(
            group,
            member_id,
            PROTOCOLS if protocols is None else protocols,
            session_timeout_ms=session_ms,
            rebalance_timeout_ms=REBALANCE_MS,
            client_id=client_id,
            client_software=f"{client_id} 1.0" if client_id else "",
        )

    def advance_until_done(self, *futures: Future, step_ms: int = 1_000) -> int:
        """Advance the clock in steps until every future is done; returns ms advanced."""
        waited = 0
        while not all(f.done() for f in futures):
            assert waited <= REBALANCE_MS + INITIAL_DELAY_MS, "delayed join never completed"
            self.advance(step_ms)
            waited += step_ms
        return waited

    def state(self, group: str = GROUP) -> GroupState:
        return self.coordinator.describe_group(group).state

    def form_stable_group(self, *client_ids: str) -> dict[str, JoinResult]:
        """Join every client, let the initial delay pass, sync; returns results by client id."""
        futures = {client: self.join(client_id=client) for client in client_ids}
        self.advance_until_done(*futures.values())
        joined = {client: f.result(timeout=0) for client, f in futures.items()}
        leader = next(r for r in joined.values() if r.is_leader)
        plan = {r.member_id: r.member_id.encode() for r in joined.values()}
        syncs = [
            self.coordinator.sync_group(GROUP, r.member_id, r.generation_id, plan)
            for r in joined.values()
            if not r.is_leader
        ]
        self.coordinator.sync_group(GROUP, leader.member_id, leader.generation_id, plan).result(0)
        for sync in syncs:
            sync.result(timeout=0)
        assert self.state() is GroupState.STABLE
        return joined
