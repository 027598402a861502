"""Per-queue consumption state of a PushConsumer: what was pulled and not yet consumed.

The commit point of a queue is its lowest pending offset (or the next pull offset when
nothing is pending), so a message that failed or is still being consumed is never committed
past: at-least-once. Pending counts/bytes drive flow control (pulls pause above the limits).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from tidemq.client.message import MessageExt, MessageQueue


class ProcessQueue:
    def __init__(self, mq: MessageQueue, next_offset: int) -> None:
        self.mq = mq
        self.next_offset = next_offset
        self.dropped = False
        self._pending: dict[int, int] = {}  # queue offset -> body size
        self._bytes = 0
        self._space = threading.Condition()

    def add(self, messages: Iterable[MessageExt], next_offset: int) -> None:
        with self._space:
            for m in messages:
                if m.queue_offset not in self._pending:
                    self._pending[m.queue_offset] = len(m.body)
                    self._bytes += len(m.body)
            self.next_offset = next_offset

    def done(self, offsets: Iterable[int]) -> None:
        with self._space:
            for offset in offsets:
                self._bytes -= self._pending.pop(offset, 0)
            self._space.notify_all()

    def commit_offset(self) -> int:
        with self._space:
            return min(self._pending) if self._pending else self.next_offset

    def pending(self) -> tuple[int, int]:
        with self._space:
            return len(self._pending), self._bytes

    def wait_for_space(self, max_messages: int, max_bytes: int, timeout: float) -> bool:
        """Block while over the flow-control limits; False if still over after `timeout`."""
        with self._space:
            return self._space.wait_for(
                lambda: self.dropped or (len(self._pending) < max_messages
                                         and self._bytes < max_bytes), timeout)

    def drop(self) -> None:
        with self._space:
            self.dropped = True
            self._space.notify_all()
