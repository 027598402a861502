"""Controller leadership: `/tidemq/controller/leader` created only if absent, under a lease.

Whoever creates the key is the active controller until its lease ends. The holder renews
every TTL/3 and counts itself active only until `renewal sent + TTL` of its last successful
renewal (the store's deadline is at least that late), so a controller cut off from the config
center stops acting before anyone else can be granted the key. Losing the key any other way
(revoked, deleted by an operator, taken by another lease) also ends leadership at the next
renewal. Standbys watch the key and try to create it when it is deleted.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable

from tidemq.common import errors
from tidemq.common.logs import get_logger
from tidemq.configclient.client import ConfigClient

log = get_logger(__name__)

LEADER_KEY = "/tidemq/controller/leader"


class Leadership:
    """One name server's claim on the controller key."""

    def __init__(self, client: ConfigClient, addr: str, ttl_s: int, *,
                 on_lost: Callable[[], None] = lambda: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.addr = addr
        self.ttl_s = max(int(ttl_s), 1)
        self._on_lost = on_lost
        self._clock = clock
        self._lease = 0
        self._claim = 0  # the leader key's create revision while it is ours
        self._held_until = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def held(self) -> bool:
        with self._lock:
            return self._lease != 0 and self._clock() < self._held_until

    @property
    def lease(self) -> int:
        """The lease this controller holds the key under (0 = none): names its term."""
        with self._lock:
            return self._lease

    def check(self) -> None:
        """Raise NotController unless the lease is still certainly ours (before any write)."""
        if not self.held():
            raise NotController(self.leader_addr())

    def fence(self) -> tuple[str, str, int]:
        """The compare that fences a controller write: the leader key still has the create
        revision of our claim. A controller deposed meanwhile (its lease ended, another
        created the key) writes nothing, whatever its own clock believes."""
        self.check()
        with self._lock:
            return (LEADER_KEY, "create", self._claim)

    def leader_addr(self) -> str:
        """The active controller's address as the key says ('' = none right now)."""
        try:
            kv = self.client.get(LEADER_KEY)
        except errors.TideMQError:
            return ""
        if kv is None:
            return ""
        try:
            return str(kv.json().get("addr", ""))
        except ValueError:
            return ""

    def leader_revision(self) -> int:
        """The key's mod revision now (0 = absent): where a standby starts watching."""
        kv = self.client.get(LEADER_KEY)
        return kv.mod_revision if kv else 0

    def try_acquire(self) -> bool:
        """Create the key under a fresh lease if nobody holds it; True = now active."""
        started = self._clock()
        lease = self.client.lease_grant(self.ttl_s)
        try:
            result = self.client.put(LEADER_KEY, {"addr": self.addr}, expected_revision=0,
                                     lease=lease)
        except errors.TideMQError:
            self._revoke_quietly(lease)
            raise
        if not result.succeeded:
            self._revoke_quietly(lease)
            return False
        with self._lock:
            self._lease, self._held_until = lease, started + self.ttl_s
            self._claim = result.revision
        self._stop.clear()
        self._thread = threading.Thread(target=self._keepalive, args=(lease,), daemon=True,
                                        name="controller-lease")
        self._thread.start()
        log.info("controller lease acquired", addr=self.addr, lease=lease, ttl_s=self.ttl_s)
        return True

    def release(self) -> None:
        """Give the key up now (clean shutdown) so a standby takes over without waiting."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=self.client.timeout + 1)
        with self._lock:
            lease, self._lease = self._lease, 0
        if lease:
            self._revoke_quietly(lease)
            log.info("controller lease released", addr=self.addr, lease=lease)

    def _lose(self, lease: int, why: str) -> None:
        with self._lock:
            if self._lease != lease:
                return
            self._lease = 0
        log.warning("controller lease lost; no longer acting", addr=self.addr, lease=lease,
                    reason=why)
        self._revoke_quietly(lease)
        self._on_lost()

    def _keepalive(self, lease: int) -> None:
        interval = self.ttl_s / 3
        while not self._stop.wait(interval):
            sent = self._clock()
            try:
                ttl = self.client.lease_keepalive(lease)
                kv = self.client.get(LEADER_KEY) if ttl else None
            except errors.TideMQError as exc:
                if self._clock() >= self._held_until:
                    return self._lose(lease, f"config center unreachable past the TTL: {exc}")
                interval = max(self.ttl_s / 10, 0.1)
                continue
            if not ttl:
                return self._lose(lease, "lease expired")
            if kv is None or kv.lease != lease:
                return self._lose(lease, "leader key gone or held by another lease")
            with self._lock:
                self._held_until = sent + ttl
            interval = self.ttl_s / 3

    def _revoke_quietly(self, lease: int) -> None:
        with contextlib.suppress(errors.TideMQError):
            self.client.lease_revoke(lease)


class NotController(errors.PreconditionFailed):
    """This name server is not the active controller; the sentence names the one that is."""

    code = "NOT_CONTROLLER"

    def __init__(self, active_addr: str) -> None:
        self.active_addr = active_addr
        where = f"the active controller is {active_addr}" if active_addr else \
            "no controller is active right now (an election is in progress)"
        super().__init__(f"this name server is not the active controller; {where}")
