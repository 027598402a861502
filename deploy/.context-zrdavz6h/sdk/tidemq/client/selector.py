"""Queue selection: round-robin with fault avoidance, and selectors for ordered messages.

Round-robin spreads load over the writable queues of every master (docs/client.md); on a retry the
broker that just failed is skipped, and brokers marked slow or whose circuit breaker is open
are avoided while any other is left. Selectors choose a queue from an argument instead, so
the same key always lands in the same queue (ordered messages).
"""

from __future__ import annotations

import itertools
import random
import threading
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from tidemq.client.fault import LatencyFaultTolerance
from tidemq.client.message import Message, MessageQueue
from tidemq.common.errors import InvalidArgument, ServiceUnavailable


class MessageQueueSelector:
    """Choose one of `queues` for `message` given the caller's `arg` (ordered sends)."""

    def select(self, queues: Sequence[MessageQueue], message: Message, arg: Any) -> MessageQueue:
        raise NotImplementedError


def stable_hash(arg: Any) -> int:
    """A hash that is the same in every process (Python's str hash is salted per process)."""
    if isinstance(arg, int) and not isinstance(arg, bool):
        return abs(arg)
    raw = arg if isinstance(arg, bytes) else str(arg).encode()
    return zlib.crc32(raw)


class SelectByHash(MessageQueueSelector):
    """hash(arg) % n: the same arg (e.g. an order id) always maps to the same queue."""

    def select(self, queues, message, arg):
        return queues[stable_hash(arg) % len(queues)]


class SelectRandom(MessageQueueSelector):
    def __init__(self, rng: random.Random | None = None) -> None:
        self._rng = rng or random.Random()

    def select(self, queues, message, arg):
        return self._rng.choice(list(queues))


class SelectByFunction(MessageQueueSelector):
    """Wrap a plain function `(queues, message, arg) -> MessageQueue`."""

    def __init__(self, function: Callable[[Sequence[MessageQueue], Message, Any], MessageQueue]):
        self._function = function

    def select(self, queues, message, arg):
        chosen = self._function(queues, message, arg)
        if chosen not in queues:
            raise InvalidArgument(f"selector returned {chosen!r}, which is not a writable queue")
        return chosen


class RoundRobinPicker:
    """Round-robin over writable queues, avoiding failed, slow and breaker-open brokers."""

    def __init__(self, faults: LatencyFaultTolerance | None = None,
                 is_broker_open: Callable[[str], bool] = lambda broker_name: False,
                 start: int | None = None) -> None:
        self.faults = faults
        self._is_broker_open = is_broker_open
        self._counter = itertools.count(random.randrange(1 << 16) if start is None else start)
        self._lock = threading.Lock()

    def _next(self) -> int:
        with self._lock:
            return next(self._counter)

    def pick(self, queues: Sequence[MessageQueue], last_failed_broker: str = "",
             open_brokers: frozenset[str] | None = None) -> MessageQueue:
        """The next queue; `open_brokers` is a snapshot of breaker-open groups (else asked)."""
        if not queues:
            raise ServiceUnavailable("the topic has no writable queue on any master")
        is_open = open_brokers.__contains__ if open_brokers is not None else self._is_broker_open
        start = self._next()
        n = len(queues)
        for i in range(n):
            mq = queues[(start + i) % n]
            if mq.broker_name == last_failed_broker or is_open(mq.broker_name):
                continue
            if self.faults is None or self.faults.is_available(mq.broker_name):
                return mq
        # Every broker is avoided: prefer one that did not just fail and is not known dead.
        others = [mq for mq in queues if mq.broker_name != last_failed_broker]
        alive = [mq for mq in others if not is_open(mq.broker_name)]
        pool = alive or others or list(queues)
        if self.faults is not None:
            best = self.faults.least_bad(sorted({mq.broker_name for mq in pool}))
            pool = [mq for mq in pool if mq.broker_name == best] or pool
        return pool[start % len(pool)]
