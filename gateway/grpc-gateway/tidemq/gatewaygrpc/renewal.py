"""auto_renew: messages a push consumer received stay invisible until it acks or gives them
back, however long its listener runs (RocketMQ 5's ReceiveMessage `auto_renew`).

The gateway remembers each such message by the receipt handle it handed out and, shortly
before the invisible time runs out, extends it on the broker; each extension gives a new
broker handle, so an ack or change of invisible time later names the client's original handle
and `take` turns it into the latest one. Holding stops after `max_hold_ms` (the message is then
delivered again) and when the client acks or changes the invisible time itself. No gRPC here;
`renew(group, topic, receipt, invisible_ms) -> new receipt` is the proxy's change of
invisible time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from tidemq.common import errors
from tidemq.common.logs import get_logger
from tidemq.gatewaygrpc import metrics

log = get_logger(__name__)

Renew = Callable[[str, str, str, int], str]
GONE = frozenset({"RECEIPT_HANDLE_EXPIRED", "INVALID_RECEIPT_HANDLE", "NOT_FOUND"})


@dataclass(slots=True)
class Held:
    group: str
    topic: str
    receipt: str       # the latest one
    invisible_ms: int
    due: float         # monotonic s: renew at or after this
    until: float       # monotonic s: stop holding then
    # held while extending: `take` waits for it, so an ack never uses a handle just replaced
    lock: threading.Lock = field(default_factory=threading.Lock)


class Renewals:
    def __init__(self, renew: Renew, *, max_hold_ms: int, tick_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.renew, self.max_hold_ms, self.tick_s, self.clock = renew, max_hold_ms, tick_s, clock
        self._held: dict[str, Held] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _due(self, now: float, invisible_ms: int) -> float:
        """Renew with a third of the invisible time left (and a tick to spare)."""
        return now + max(invisible_ms * 2 / 3000 - self.tick_s, 0.0)

    def track(self, group: str, topic: str, receipt: str, invisible_ms: int) -> None:
        now = self.clock()
        with self._lock:
            self._held[receipt] = Held(group, topic, receipt, invisible_ms,
                                       self._due(now, invisible_ms),
                                       now + self.max_hold_ms / 1000)

    def take(self, receipt: str) -> str:
        """Stop holding the message handed out as `receipt`; its latest receipt handle."""
        with self._lock:
            held = self._held.pop(receipt, None)
        if held is None:
            return receipt
        with held.lock:
            return held.receipt

    def held(self) -> int:
        with self._lock:
            return len(self._held)

    def renew_due(self) -> int:
        """Extend every message due; the number extended."""
        now = self.clock()
        with self._lock:
            due = [(original, h) for original, h in self._held.items() if h.due <= now]
        renewed = 0
        for original, held in due:
            if now >= held.until:
                self.take(original)   # held long enough: it is delivered again
                continue
            with held.lock:
                with self._lock:
                    if original not in self._held:  # acked meanwhile
                        continue
                try:
                    held.receipt = self.renew(held.group, held.topic, held.receipt,
                                              held.invisible_ms)
                except errors.TideMQError as exc:
                    if exc.code in GONE:
                        with self._lock:
                            self._held.pop(original, None)
                    else:
                        log.info("auto-renew failed; trying again", error=str(exc))
                    continue
                held.due = self._due(self.clock(), held.invisible_ms)
                renewed += 1
        return renewed

    def start(self) -> Renewals:
        self._thread = threading.Thread(target=self._run, name="rmq-auto-renew", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.tick_s):
            try:
                metrics.AUTO_RENEWALS.inc(self.renew_due())
            except Exception:
                log.exception("auto-renew round failed")

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
