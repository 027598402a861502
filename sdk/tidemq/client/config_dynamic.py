"""LiveSettings: a service's effective dynamic configuration, kept current from a watch.

Services read retention, disk limits, breaker thresholds... through this instead of reading
keys themselves: it resolves cluster < broker group < broker once, then watches
`/tidemq/config/` from that revision and re-resolves on every change in one of its scopes,
logs what changed (old → new, and which key it now comes from) and calls `on_change`, so a
setting is applied without a restart wherever the service says that is safe.

>>> live = LiveSettings(client, cluster="c1", broker_group="g1", broker="b1",
...                     on_change=lambda changes: store.apply(changes))
>>> live.get("retention_hours", "72")
'48'
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from tidemq.client.config import ConfigClient, ConfigSetting
from tidemq.common.dynamic import AppliedSettings, Rule
from tidemq.common.errors import TideMQError
from tidemq.common.logs import get_logger

log = get_logger(__name__)
CONFIG_ROOT = "/tidemq/config/"


@dataclass(frozen=True)
class SettingChange:
    name: str
    old: str | None  # None = was not set
    new: str | None  # None = no longer set at any scope
    source_key: str  # where the new value comes from ('' when unset)


class LiveSettings:
    """Effective settings for one (cluster, broker group, broker), updated live."""

    def __init__(self, client: ConfigClient, *, cluster: str = "", broker_group: str = "",
                 broker: str = "",
                 on_change: Callable[[list[SettingChange]], None] | None = None) -> None:
        self._client = client
        self._scope = {"cluster": cluster, "broker_group": broker_group, "broker": broker}
        self._prefixes = tuple(
            f"{CONFIG_ROOT}{segment}/{owner}/"
            for segment, owner in (("cluster", cluster), ("group", broker_group),
                                   ("broker", broker)) if owner)
        self._on_change = on_change
        self._lock = threading.Lock()
        effective = client.effective_config(**self._scope)
        self._settings: dict[str, ConfigSetting] = dict(effective.settings)
        self.revision = effective.revision
        self._closed = threading.Event()
        self._watch = client.watch(CONFIG_ROOT, start_revision=effective.revision + 1)
        self._thread = threading.Thread(target=self._follow, daemon=True, name="live-settings")
        self._thread.start()

    def get(self, name: str, default: str | None = None) -> str | None:
        with self._lock:
            setting = self._settings.get(name)
        return setting.value if setting else default

    def snapshot(self) -> dict[str, ConfigSetting]:
        with self._lock:
            return dict(self._settings)

    def close(self) -> None:
        with self._lock:  # never between _follow's closed-check and its next watch
            self._closed.set()
            watch = self._watch
        watch.close()
        self._thread.join(timeout=5)

    def __enter__(self) -> LiveSettings:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _follow(self) -> None:
        while True:
            try:
                for event in self._watch:
                    if event.kv.key.startswith(self._prefixes):
                        self._refresh(event.revision)
                return  # closed
            except TideMQError as exc:  # e.g. compacted after a long absence: re-read, go on
                log.warning("live settings watch ended; re-reading", error=str(exc))
                self._closed.wait(0.2)  # do not spin if the config center keeps failing
            self._watch.close()
            self._refresh(self.revision)
            with self._lock:
                if self._closed.is_set():
                    return
                self._watch = self._client.watch(CONFIG_ROOT, start_revision=self.revision + 1)

    def _refresh(self, revision: int) -> None:
        try:
            effective = self._client.effective_config(**self._scope)
        except TideMQError as exc:
            log.warning("cannot re-read effective settings", error=str(exc))
            return
        with self._lock:
            old, self._settings = self._settings, dict(effective.settings)
            self.revision = max(revision, effective.revision)
        changes = [
            SettingChange(name, old[name].value if name in old else None,
                          new.value if new else None, new.source_key if new else "")
            for name in sorted(set(old) | set(effective.settings))
            for new in [effective.settings.get(name)]
            if (old[name].value if name in old else None) != (new.value if new else None)
        ]
        for change in changes:
            log.info("dynamic setting changed", setting=change.name, old=change.old,
                     new=change.new, source=change.source_key, revision=self.revision)
        if changes and self._on_change is not None:
            try:
                self._on_change(changes)
            except Exception:  # the service's handler must not stop the updates
                log.exception("applying changed settings failed")


SettingRule = Rule  # how a service reads one live setting (parse, check, what is legal)


class DynamicSettingsFollower(AppliedSettings):
    """LiveSettings for a service that must never wait for the config center.

    Connects in the background (retrying until it answers), then calls `apply(name, value)`
    with each rule's effective value at start and on every change — the parsed value, or the
    service's static value when no scope sets it. A value that does not parse or breaks the
    rule is refused and logged, and the value in force stays.

    >>> follower = DynamicSettingsFollower(
    ...     "127.0.0.1:7070", {"breaker_fail_max": SettingRule(int, lambda v: v > 0, "> 0")},
    ...     {"breaker_fail_max": 5}, apply=lambda name, value: ..., cluster="c1").start()
    """

    def __init__(self, config_center: str, rules: dict[str, SettingRule],
                 static: dict[str, object], apply: Callable[[str, object], None], *,
                 cluster: str = "", broker_group: str = "", broker: str = "",
                 retry_interval_s: float = 2.0) -> None:
        super().__init__(rules, static, apply)
        self._config_center = config_center
        self._scope = {"cluster": cluster, "broker_group": broker_group, "broker": broker}
        self._retry_interval_s = retry_interval_s
        self._stopping = threading.Event()
        self._live: LiveSettings | None = None
        self._client: ConfigClient | None = None
        self._thread = threading.Thread(target=self._connect, daemon=True,
                                        name="dynamic-settings")

    def start(self) -> DynamicSettingsFollower:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)
        if self._live is not None:
            self._live.close()
        if self._client is not None:
            self._client.close()

    def _connect(self) -> None:
        while not self._stopping.is_set():
            try:
                self._client = self._client or ConfigClient(self._config_center)
                live = LiveSettings(self._client, **self._scope, on_change=self._on_change)
            except TideMQError as exc:
                log.warning("dynamic settings unavailable; retrying", error=str(exc))
                self._stopping.wait(self._retry_interval_s)
                continue
            self._live = live
            for name in self.rules:
                self.offer(name, live.get(name))
            if self._stopping.is_set():
                live.close()
            return

    def _on_change(self, changes: list[SettingChange]) -> None:
        for change in changes:
            if change.name in self.rules:
                self.offer(change.name, change.new)
