"""How long the broker may keep a caller waiting: the request's remaining deadline less a margin.

A SYNC_MASTER waits up to `sync_replication_timeout_ms` (5 s) for its in-sync replicas and a
SYNC_FLUSH append up to `sync_flush_timeout_ms` (5 s) for its fsync, while the SDK gives a send
3 s. Left alone, a slow replica or disk shows as the client's DEADLINE_EXCEEDED — outcome
unknown — instead of the broker's FLUSH_SLAVE_TIMEOUT / FLUSH_DISK_TIMEOUT: stored on the
master, durability asked for not confirmed. So the broker ends those waits early enough for
its answer to reach the caller before the caller gives up: the remaining deadline less
max(`MIN_MARGIN_S`, `MARGIN_FRACTION` of it) (the answer's way back, the loop's own latency),
and never later than the configured waits (the store applies those).

The deadline is the gRPC call's (`context.time_remaining()`) or the wire protocol's, which
carries one per call (tidemq.common.wire.server.CallContext answers the same question).
"""

from __future__ import annotations

import time

MIN_MARGIN_S = 0.05   # at least this long before the caller's deadline ...
MARGIN_FRACTION = 0.10   # ... or this share of the time it had left, if more


def answer_within(remaining_s: float) -> float:
    """Seconds the broker may wait before answering a caller with `remaining_s` left (0: at
    once)."""
    return max(0.0, remaining_s - max(MIN_MARGIN_S, MARGIN_FRACTION * remaining_s))


def call_deadline(context) -> float | None:
    """The `time.monotonic()` instant the caller of this gRPC or wire call gives up (None:
    it set no deadline)."""
    remaining = context.time_remaining() if context is not None else None
    return None if remaining is None else time.monotonic() + remaining


def answer_within_deadline(deadline: float | None) -> float | None:
    """`answer_within` for the time left now before `deadline` (a `call_deadline`)."""
    return None if deadline is None else answer_within(deadline - time.monotonic())
