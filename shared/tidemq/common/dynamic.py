"""Scoped dynamic settings followed live from the config center on the raw protos.

For services that must start and serve with nothing else up (the name server, the trace
collector, whose image carries no client library), so this does not use tidemq.client's
LiveSettings / DynamicSettingsFollower (same log lines, same rules otherwise).
Scopes (SPEC §7): `/tidemq/config/cluster/<cluster>/` < `/tidemq/config/group/<group>/`.

It is state based, which keeps it short: read the effective config, watch `/tidemq/config/`
and re-read on any change in one of our scopes; after any stream fault (or a refused watch),
re-read and watch again (a re-read covers whatever the gap held, so nothing needs replaying).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

import grpc
from tidemq.common.logs import get_logger
from tidemq.common.rpc import GRPC_OPTIONS
from tidemq.v1 import config_pb2, config_pb2_grpc

log = get_logger(__name__)

CONFIG_ROOT = "/tidemq/config/"
RETRY_MIN_S, RETRY_MAX_S = 0.2, 2.0


@dataclass(frozen=True)
class Rule:
    parse: Callable[[str], object]
    valid: Callable[[object], bool]
    legal: str


class AppliedSettings:
    """A service's live settings: their rules, static values and the values in force. `offer`
    is the one place a new value is parsed, checked, applied and logged (here, and in
    tidemq.client's DynamicSettingsFollower)."""

    def __init__(self, rules: dict[str, Rule], static: dict[str, object],
                 apply: Callable[[str, object], None]) -> None:
        self.rules = dict(rules)
        self.current = dict(static)
        self._static = dict(static)
        self._apply = apply

    def offer(self, name: str, text: str | None) -> bool:
        """Apply `text` (None = unset: the static value) if legal; True if it is in force."""
        rule = self.rules[name]
        if text is None:
            value = self._static[name]
        else:
            try:
                value = rule.parse(text)
                ok = rule.valid(value)
            except ValueError:
                ok = False
            if not ok:
                log.error("refused dynamic setting", setting=name, value=text,
                          expected=rule.legal, in_force=self.current[name], pid=os.getpid())
                return False
        old = self.current[name]
        if old != value:
            self._apply(name, value)
            self.current[name] = value
            log.info("applied dynamic setting", setting=name, old=old, new=value,
                     pid=os.getpid())
        return True


class SettingsFollower(AppliedSettings):
    """Keeps `current` (and, through `apply`, the service) equal to the effective values of
    the settings named in `rules`; unset = the static value, an illegal value is refused."""

    def __init__(self, config_center: str, rules: dict[str, Rule], static: dict[str, object],
                 apply: Callable[[str, object], None], *, cluster: str, group: str,
                 call_timeout_s: float = 3.0) -> None:
        super().__init__(rules, static, apply)
        self._request = config_pb2.EffectiveConfigRequest(cluster=cluster, broker_group=group)
        self._prefixes = (f"{CONFIG_ROOT}cluster/{cluster}/", f"{CONFIG_ROOT}group/{group}/")
        self._call_timeout_s = call_timeout_s
        # A private channel: closing it is the one way to end a blocked watch from stop().
        self._channel = grpc.insecure_channel(config_center, options=GRPC_OPTIONS)
        self._stub = config_pb2_grpc.ConfigServiceStub(self._channel)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="dynamic-settings")

    def start(self) -> SettingsFollower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._channel.close()
        self._thread.join(timeout=5)

    def _run(self) -> None:
        backoff = RETRY_MIN_S
        while not self._stop.is_set():
            try:
                revision = self.refresh()
                backoff = RETRY_MIN_S
                self._follow(revision)
            except (grpc.RpcError, ValueError) as exc:
                if self._stop.is_set():
                    return
                detail = exc.details() if isinstance(exc, grpc.RpcError) else str(exc)
                log.warning("dynamic settings unavailable; retrying", error=detail,
                            retry_in_s=backoff)
                self._stop.wait(backoff)
                backoff = min(backoff * 2, RETRY_MAX_S)

    def refresh(self) -> int:
        """Read the effective settings and apply ours; the revision they were read at."""
        reply = self._stub.EffectiveConfig(self._request, timeout=self._call_timeout_s)
        values = {s.name: s.value for s in reply.settings}
        for name in self.rules:
            self.offer(name, values.get(name))
        return reply.revision

    def _follow(self, revision: int) -> None:
        request = config_pb2.WatchRequest(prefix=CONFIG_ROOT, start_revision=revision + 1)
        for reply in self._stub.Watch(request):
            if reply.compacted:
                return  # re-read and watch from now
            if any(e.kv.key.startswith(self._prefixes) for e in reply.events):
                self.refresh()
