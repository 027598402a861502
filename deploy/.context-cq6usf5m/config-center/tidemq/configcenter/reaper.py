"""Lease reaper: every config-center instance revokes expired leases in the background.

The revocation is one idempotent Lua script keyed on Redis's own clock, so several instances
reaping at once never double-delete, and deadlines survive any instance's restart.
"""

from __future__ import annotations

import threading

from tidemq.common.logs import get_logger
from tidemq.configcenter.store import ConfigStore

log = get_logger(__name__)

MAX_BACKOFF_S = 1.0  # longest pause between attempts while Redis fails


class LeaseReaper:
    """Runs `store.reap_expired_leases` every `interval_s` on a daemon thread."""

    def __init__(self, store: ConfigStore, interval_s: float = 0.2) -> None:
        self._store = store
        self._interval_s = interval_s
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lease-reaper", daemon=True)
        self._failing = False

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopped.set()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        wait = self._interval_s
        while not self._stopped.wait(wait):
            try:
                leases, keys = self._store.reap_expired_leases()
            except Exception as exc:  # noqa: BLE001 - a dead reaper would let leases live forever
                if not self._failing:
                    log.warning("lease reaper cannot reap; retrying", error=str(exc),
                                error_type=type(exc).__name__)
                self._failing = True
                wait = max(self._interval_s, min(wait * 2, MAX_BACKOFF_S))
                continue
            wait = self._interval_s
            if self._failing:
                log.info("lease reaper reaping again")
            self._failing = False
            if leases:
                log.info("leases expired", leases=leases, keys_deleted=keys)
