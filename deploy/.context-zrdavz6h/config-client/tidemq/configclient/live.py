"""LiveSettings: a service's effective dynamic configuration, kept current from a watch.

Services read retention, disk limits, breaker thresholds... through this instead of reading
keys themselves. Scopes (docs/config-center.md, "Dynamic settings"): cluster < broker group <
broker, keys `/tidemq/config/{cluster|group|broker}/<owner>/<setting>`. It resolves them once,
then follows `/tidemq/config/` (a `Follower`) and re-resolves on every change in one of its
scopes, logs what changed (old → new, and which key it now comes from) and calls `on_change`,
so a setting is applied without a restart wherever the service says that is safe.

>>> live = LiveSettings(client, cluster="c1", broker_group="g1", broker="b1",
...                     on_change=lambda changes: store.apply(changes))
>>> live.get("retention_hours", "72")
'48'
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from tidemq.common import setting_rules as rules
from tidemq.common.errors import TideMQError
from tidemq.common.kv import Event
from tidemq.common.logs import get_logger
from tidemq.configclient.client import ConfigClient, ConfigSetting
from tidemq.configclient.follow import Follower

log = get_logger(__name__)
CONFIG_ROOT = "/tidemq/config/"


@dataclass(frozen=True)
class SettingChange:
    name: str
    old: str | None  # None = was not set
    new: str | None  # None = no longer set at any scope
    source_key: str  # where the new value comes from ('' when unset)


class LiveSettings:
    """Effective settings for one (cluster, broker group, broker), updated live.

    With `read_now` (the default) the first read happens in the constructor and raises if the
    config center does not answer; without it, it happens in the background (retried), and
    `on_change` reports the settings it finds set as changes from unset."""

    def __init__(self, client: ConfigClient, *, cluster: str = "", broker_group: str = "",
                 broker: str = "",
                 on_change: Callable[[list[SettingChange]], None] | None = None,
                 read_now: bool = True, retry_max_s: float = 2.0) -> None:
        self._client = client
        self._scope = {"cluster": cluster, "broker_group": broker_group, "broker": broker}
        self._prefixes = tuple(
            f"{CONFIG_ROOT}{segment}/{owner}/"
            for segment, owner in (("cluster", cluster), ("group", broker_group),
                                   ("broker", broker)) if owner)
        self._on_change = on_change
        self._lock = threading.Lock()
        self._settings: dict[str, ConfigSetting] = {}
        self.revision = 0
        self._follower = Follower(client, CONFIG_ROOT, read=self._read, on_event=self._on_event,
                                  name="live-settings", retry_max_s=retry_max_s)
        self._follower.start(self._read(initial=True) if read_now else None)

    def get(self, name: str, default: str | None = None) -> str | None:
        with self._lock:
            setting = self._settings.get(name)
        return setting.value if setting else default

    def snapshot(self) -> dict[str, ConfigSetting]:
        with self._lock:
            return dict(self._settings)

    def close(self) -> None:
        self._follower.close()

    def __enter__(self) -> LiveSettings:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _on_event(self, event: Event) -> None:
        if event.kv.key.startswith(self._prefixes):
            try:
                self._read(event.revision)
            except TideMQError as exc:  # the next change (or fault) re-reads
                log.warning("cannot re-read effective settings", error=str(exc))

    def _read(self, revision: int = 0, *, initial: bool = False) -> int:
        effective = self._client.effective_config(**self._scope)
        with self._lock:
            old, self._settings = self._settings, dict(effective.settings)
            self.revision = max(revision, effective.revision, self.revision)
        if initial:
            return self.revision
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
        return self.revision


Rule = rules.Rule  # one home for the rules: tidemq.common.setting_rules
SettingRule = Rule


class AppliedSettings:
    """A service's live settings: their rules, static values and the values in force. `offer`
    is the one place a new value is parsed, checked, applied and logged."""

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

    def __init__(self, config_center: str, rules: dict[str, Rule],
                 static: dict[str, object], apply: Callable[[str, object], None], *,
                 cluster: str = "", broker_group: str = "", broker: str = "",
                 retry_interval_s: float = 2.0) -> None:
        super().__init__(rules, static, apply)
        self._config_center = config_center
        self._scope = {"cluster": cluster, "broker_group": broker_group, "broker": broker}
        self._retry_interval_s = retry_interval_s
        self._client: ConfigClient | None = None
        self._live: LiveSettings | None = None

    def start(self) -> DynamicSettingsFollower:
        self._client = ConfigClient(self._config_center)
        self._live = LiveSettings(self._client, **self._scope, on_change=self._on_change,
                                  read_now=False, retry_max_s=self._retry_interval_s)
        return self

    def stop(self) -> None:
        if self._live is not None:
            self._live.close()
        if self._client is not None:
            self._client.close()

    def _on_change(self, changes: list[SettingChange]) -> None:
        for change in changes:
            if change.name in self.rules:
                self.offer(change.name, change.new)
