"""A Fetch that found too little waits on the brokers' long polls, not on a timer.

Each partition's wait is a Pull its broker holds until a message at or past the fetch position
is there or the hold ends (Messaging.pull's long poll), so a record produced during the wait
answers the Fetch at once. The SDK's calls block: a held Pull occupies a thread of the
gateway's pool until its broker answers. Hence two bounds: one Fetch holds at most PER_FETCH
partitions and the gateway at most MAX_HELD at once (the pool also parks JoinGroups); a
partition waited on by several Fetches at the same position (consumers of one partition, a
Fetch retried after its deadline) shares one held Pull. Partitions left without a hold (a
wide Fetch, or no slot free) are read again every SWEEP_S by the caller, as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from tidemq.common.logs import get_logger
from tidemq.common.quotas import END_CLIENT
from tidemq.gatewaykafka import metrics
from tidemq.gatewaykafka.backend import KafkaBackend

log = get_logger(__name__)

PER_FETCH = 16      # partitions one Fetch holds a long poll on
MAX_HELD = 64       # long polls held at once by the gateway (threads of its pool)
SWEEP_S = 0.05      # partitions without a hold are read again this often

Position = tuple[str, int, int]   # topic, partition, offset


class FetchWaits:
    def __init__(self, backend: KafkaBackend, run: Callable[..., Awaitable[Any]], *,
                 per_fetch: int = PER_FETCH, max_held: int = MAX_HELD) -> None:
        self.backend, self.run = backend, run
        self.per_fetch, self.max_held = per_fetch, max_held
        self._held: dict[Position, asyncio.Future] = {}

    async def wait(self, positions: Sequence[Position], timeout_s: float) -> None:
        """Return when a long poll finds data at one of `positions`, after `timeout_s`, or
        after SWEEP_S when some position has no hold (the caller then reads them all)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        holds = [h for h in (self._hold(p, timeout_s) for p in positions[:self.per_fetch])
                 if h is not None]
        unheld = len(holds) < len(positions)
        pending = set(holds)
        while True:
            left = deadline - loop.time()
            if left <= 0:
                return
            if not pending:   # every hold ended empty (a broker's hold is capped) or none
                await asyncio.sleep(min(SWEEP_S, left))
                return
            done, pending = await asyncio.wait(
                pending, timeout=min(left, SWEEP_S) if unheld else left,
                return_when=asyncio.FIRST_COMPLETED)
            if any(h.result() for h in done) or (unheld and not done):
                return

    def _hold(self, position: Position, timeout_s: float) -> asyncio.Future | None:
        """The long poll in flight at `position`, started if none is and a slot is free."""
        held = self._held.get(position)
        if held is not None and not held.done():
            return held
        if len(self._held) >= self.max_held:
            return None
        held = asyncio.ensure_future(self._long_poll(position, timeout_s))
        self._held[position] = held
        metrics.FETCH_HOLDS.set(len(self._held))
        held.add_done_callback(lambda _: self._release(position, held))
        return held

    def _release(self, position: Position, held: asyncio.Future) -> None:
        if self._held.get(position) is held:
            del self._held[position]
        metrics.FETCH_HOLDS.set(len(self._held))

    async def _long_poll(self, position: Position, timeout_s: float) -> bool:
        # shared by every Fetch waiting there: made as the gateway, not charged to (or held
        # for) the client whose Fetch happened to start it (its own task's context)
        END_CLIENT.set(None)
        topic, index, offset = position
        try:
            mq = await self.run(self.backend.partition, topic, index)
            found = await self.run(self.backend.wait_for_data, mq, offset, timeout_s)
        except Exception as exc:   # the caller's next read reports the partition's error
            log.info("fetch_long_poll_failed", topic=topic, partition=index, error=str(exc))
            metrics.FETCH_LONG_POLLS.labels("failed").inc()
            return False
        metrics.FETCH_LONG_POLLS.labels("data" if found else "empty").inc()
        return found
