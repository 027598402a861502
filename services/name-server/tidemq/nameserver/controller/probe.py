"""The active controller's own probe of every master: a gRPC health check each interval.

A frozen master's kernel still accepts TCP connections (the listen backlog), so only an
answer at the application level tells a serving master from a frozen one: a check that is
not answered within the timeout failed. A refused connection means nothing listens at the
master's address any more (its process is gone). One thread runs the rounds; each master's
check runs on a small pool so one that hangs does not delay the others.

A target is a master *incarnation*: (address, identity of its registration). A restarted
master comes back at the same address under a new identity, and starts from nothing: a check
of the previous process that finishes late (refused, after a long failing streak) is kept
under the old identity and never reported for the new one.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from tidemq.common.logs import get_logger
from tidemq.common.rpc import client_security, open_channel

from .detection import Probe

log = get_logger(__name__)


def check(addr: str, timeout_s: float) -> tuple[bool, bool]:
    """(answered SERVING, refused) for one health check on a fresh channel (a fresh TCP
    connection: a channel kept open would hide a refused address behind its back-off)."""
    security = dataclasses.replace(client_security(), credentials=None)
    try:
        with open_channel(addr, security, options=[]) as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=""), timeout=timeout_s)
    except grpc.RpcError as exc:
        refused = exc.code() == grpc.StatusCode.UNAVAILABLE and \
            "refused" in (exc.details() or "").lower()
        return False, refused
    return reply.status == health_pb2.HealthCheckResponse.SERVING, False


Target = tuple[str, str]   # (address, incarnation identity)


class MasterProber:
    """Probes `targets()` (master incarnations) every `interval_s` while running."""

    def __init__(self, targets: Callable[[], set[Target]], *, interval_s: float = 0.5,
                 timeout_s: float = 1.0,
                 check: Callable[[str, float], tuple[bool, bool]] = check) -> None:
        self.targets = targets
        self.interval_s = interval_s
        self.timeout_s = timeout_s
        self._check = check
        self._lock = threading.Lock()
        self._failing_since: dict[Target, float | None] = {}   # None = last check answered
        self._refused: dict[Target, bool] = {}
        self._answered: set[Target] = set()   # answered at least once
        self._busy: set[Target] = set()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(8, thread_name_prefix="master-probe")
        self._thread = threading.Thread(target=self._run, name="master-prober", daemon=True)

    def start(self) -> MasterProber:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(self.timeout_s + 2)
        self._pool.shutdown(wait=False, cancel_futures=True)

    def reset(self) -> None:
        """Forget every result (a new term as controller starts from nothing)."""
        with self._lock:
            self._failing_since.clear()
            self._refused.clear()
            self._answered.clear()

    def probe(self, addr: str, identity: str) -> Probe | None:
        """How the checks of the incarnation `identity` at `addr` stand now; None = no check
        of it finished yet."""
        target = (addr, identity)
        with self._lock:
            if target not in self._failing_since:
                return None
            since = self._failing_since[target]
            failing = 0.0 if since is None else time.monotonic() - since
            return Probe(failing, self._refused.get(target, False), target in self._answered)

    def _run(self) -> None:
        while not self._stop.is_set():
            targets = {target for target in self.targets() if target[0]}
            with self._lock:
                for target in set(self._failing_since) - targets:
                    self._failing_since.pop(target, None)
                    self._refused.pop(target, None)
                self._answered &= targets
                due = targets - self._busy
                self._busy |= due
            for target in due:
                self._pool.submit(self._one, target)
            self._stop.wait(self.interval_s)   # the probing period

    def _one(self, target: Target) -> None:
        addr = target[0]
        started = time.monotonic()
        try:
            ok, refused = self._check(addr, self.timeout_s)
        except Exception as exc:  # a probe must never kill the prober
            log.warning("master probe failed unexpectedly", addr=addr, error=str(exc))
            ok, refused = False, False
        with self._lock:
            self._busy.discard(target)
            if ok:
                self._failing_since[target] = None
                self._answered.add(target)
            else:
                # Failing since this check began (a timeout covers its whole wait).
                previous = self._failing_since.get(target)
                self._failing_since[target] = previous if previous is not None else started
            self._refused[target] = refused and not ok
