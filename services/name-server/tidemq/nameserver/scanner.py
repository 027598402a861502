"""Periodic removal of brokers that stopped registering (crashed, partitioned, SIGKILLed)."""

from __future__ import annotations

import threading

from tidemq.common.logs import get_logger
from tidemq.nameserver.registry import RouteRegistry

log = get_logger(__name__)


class ExpiryScanner:
    """Every `interval_s`, drop brokers silent for more than `expiry_s` (ref 10 s / 120 s)."""

    def __init__(self, registry: RouteRegistry, interval_s: float, expiry_s: float) -> None:
        self.registry = registry
        self.interval_s = interval_s
        self.expiry_ms = int(expiry_s * 1000)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="broker-expiry", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            try:
                for addr in self.registry.expire_silent(self.expiry_ms):
                    log.warning("broker expired", broker_addr=addr, silent_ms=self.expiry_ms)
            except Exception:
                log.exception("expiry scan failed")
