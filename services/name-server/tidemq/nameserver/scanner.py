"""Periodic removal of brokers that stopped registering (crashed, partitioned, SIGKILLed)."""

from __future__ import annotations

import threading

from tidemq.common.logs import get_logger
from tidemq.nameserver.registry import RouteRegistry

log = get_logger(__name__)


class ExpiryScanner:
    """Every `interval_s`, drop brokers silent for more than `expiry_s` (ref 10 s / 120 s).
    Both may change while running (`retune`): each round reads them afresh."""

    def __init__(self, registry: RouteRegistry, interval_s: float, expiry_s: float) -> None:
        self.registry = registry
        self.interval_s = interval_s
        self.expiry_ms = int(expiry_s * 1000)
        self._stop = threading.Event()
        self._wake = threading.Event()  # a new interval restarts the current wait
        self._thread = threading.Thread(target=self._run, name="broker-expiry", daemon=True)

    def retune(self, name: str, value: object) -> None:
        """Apply a live setting: `broker_expiry_s` or `scan_interval_s` (seconds)."""
        if name == "broker_expiry_s":
            self.expiry_ms = int(float(value) * 1000)  # type: ignore[arg-type]
        elif name == "scan_interval_s":
            self.interval_s = float(value)  # type: ignore[arg-type]
            self._wake.set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while True:
            woken = self._wake.wait(self.interval_s)
            self._wake.clear()
            if self._stop.is_set():
                return
            if woken:
                continue  # the interval changed: wait the new one from now
            try:
                for addr in self.registry.expire_silent(self.expiry_ms):
                    log.warning("broker expired", broker_addr=addr, silent_ms=self.expiry_ms)
            except Exception:
                log.exception("expiry scan failed")
