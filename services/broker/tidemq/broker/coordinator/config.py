"""Coordinator settings: Kafka's reference defaults, all overridable (tests shrink the times)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CoordinatorConfig:
    """Timing rules of group membership; every value is in milliseconds.

    initial_rebalance_delay_ms: how long the first rebalance of an Empty group waits for more
        consumers (Kafka group.initial.rebalance.delay.ms = 3000), extended by the same amount
        while new members keep arriving, up to the group's rebalance timeout.
    min_session_timeout_ms / max_session_timeout_ms: accepted range of a member's session
        timeout (Kafka group.min/max.session.timeout.ms = 6000 / 300000); outside it a join
        fails with INVALID_SESSION_TIMEOUT.
    default_session_timeout_ms / heartbeat_interval_ms: the client-side reference values
        (10 s session, 3 s heartbeat) exported here so SDK and broker agree on them.
    """

    initial_rebalance_delay_ms: int = 3_000
    min_session_timeout_ms: int = 6_000
    max_session_timeout_ms: int = 300_000
    default_session_timeout_ms: int = 10_000
    heartbeat_interval_ms: int = 3_000

    def __post_init__(self) -> None:
        if self.initial_rebalance_delay_ms < 0:
            raise ValueError("initial_rebalance_delay_ms must be >= 0")
        if not 0 < self.min_session_timeout_ms <= self.max_session_timeout_ms:
            raise ValueError("need 0 < min_session_timeout_ms <= max_session_timeout_ms")
