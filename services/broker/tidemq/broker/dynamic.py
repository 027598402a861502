"""Dynamic broker settings from the config center, applied without a restart where safe.

Scopes (SPEC §7): cluster < broker group (the broker name) < broker (`<broker_name>-<id>`), keys
`/tidemq/config/{cluster|group|broker}/<owner>/<setting>`. Only settings the store re-reads
on every use are live — retention age, its deletion hour and the disk-use ratio; the rest
(flush mode, segment size) change the on-disk layout or the write path and need a restart.
A value that does not parse or is out of range is refused and logged, keeping the current
one; an unset value falls back to the broker's static setting.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from tidemq.broker.store import StoreConfig
from tidemq.client.config import ConfigClient
from tidemq.client.config_dynamic import LiveSettings, SettingChange
from tidemq.common.errors import TideMQError
from tidemq.common.logs import get_logger

log = get_logger(__name__)


@dataclass(frozen=True)
class LiveSetting:
    parse: Callable[[str], object]
    valid: Callable[[object], bool]
    rule: str


def _hour(text: str) -> int | None:
    hour = int(text)
    return None if hour < 0 else hour


LIVE_SETTINGS: dict[str, LiveSetting] = {
    "retention_hours": LiveSetting(float, lambda v: v > 0, "a number of hours above 0"),
    "disk_max_used_ratio": LiveSetting(float, lambda v: 0 < v <= 1, "a ratio in (0, 1]"),
    "delete_when_hour": LiveSetting(_hour, lambda v: v is None or 0 <= v <= 23,
                                    "an hour 0..23, or -1 for any time"),
}


def broker_scope_name(broker_name: str, broker_id: int) -> str:
    return f"{broker_name}-{broker_id}"


class DynamicSettings:
    """Keeps `store_config`'s live settings equal to the config center's effective values."""

    def __init__(self, config_center: str, store_config: StoreConfig, *, cluster: str,
                 broker_name: str, broker_id: int, retry_interval_s: float = 2.0) -> None:
        self._config_center = config_center
        self._store_config = store_config
        self._scope = {"cluster": cluster, "broker_group": broker_name,
                       "broker": broker_scope_name(broker_name, broker_id)}
        self._static = {name: getattr(store_config, name) for name in LIVE_SETTINGS}
        self._retry_interval_s = retry_interval_s
        self._stopping = threading.Event()
        self._live: LiveSettings | None = None
        self._client: ConfigClient | None = None
        self._thread = threading.Thread(target=self._connect, daemon=True,
                                        name="dynamic-settings")

    def start(self) -> None:
        """Follow the config center in the background; the broker never waits for it."""
        self._thread.start()

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
            for name in LIVE_SETTINGS:
                self.apply(name, live.get(name))
            return

    def _on_change(self, changes: list[SettingChange]) -> None:
        for change in changes:
            if change.name in LIVE_SETTINGS:
                self.apply(change.name, change.new)

    def apply(self, name: str, text: str | None) -> None:
        spec = LIVE_SETTINGS[name]
        if text is None:
            value = self._static[name]
        else:
            try:
                value = spec.parse(text)
            except ValueError:
                value = None
                ok = False
            else:
                ok = spec.valid(value)
            if not ok:
                log.error("refused dynamic setting", setting=name, value=text, expected=spec.rule)
                return
        old = getattr(self._store_config, name)
        if old != value:
            setattr(self._store_config, name, value)
            log.info("applied dynamic setting", setting=name, old=old, new=value)
