"""Dynamic broker settings from the config center, applied without a restart where safe.

Scopes (docs/config-center.md): cluster < broker group (the broker name) < broker
(`<broker_name>-<id>`), keys `/tidemq/config/{cluster|group|broker}/<owner>/<setting>`. Only settings the store re-reads
on every use are live — retention age, its deletion hour and the disk-use ratio — plus the
tracing sampler's `trace_quiet_operations`; the rest
(flush mode, segment size) change the on-disk layout or the write path and need a restart.
A value that does not parse or is out of range is refused and logged, keeping the current
one; an unset value falls back to the broker's static setting. The following itself (connect
in the background, parse, check, log) is tidemq.configclient.live's, as in the gateway.
"""

from __future__ import annotations

from tidemq.broker.store import StoreConfig
from tidemq.common.sampling import QUIET_BY_DEFAULT
from tidemq.common.setting_rules import (
    BROKER_RULES,
    TRACE_QUIET_OPERATIONS,
    parse_quiet_operations,
)
from tidemq.common.tracing import set_quiet_operations
from tidemq.configclient.live import DynamicSettingsFollower

LIVE_SETTINGS = BROKER_RULES  # defined with every service's in tidemq.common.setting_rules


def broker_scope_name(broker_name: str, broker_id: int) -> str:
    return f"{broker_name}-{broker_id}"


class DynamicSettings:
    """Keeps `store_config`'s live settings equal to the config center's effective values."""

    def __init__(self, config_center: str, store_config: StoreConfig, *, cluster: str,
                 broker_name: str, broker_id: int, retry_interval_s: float = 2.0,
                 quiet_operations: str = ",".join(QUIET_BY_DEFAULT)) -> None:
        self._store_config = store_config
        static = {name: getattr(store_config, name) for name in LIVE_SETTINGS
                  if name != TRACE_QUIET_OPERATIONS}
        static[TRACE_QUIET_OPERATIONS] = parse_quiet_operations(quiet_operations)
        self._follower = DynamicSettingsFollower(
            config_center, LIVE_SETTINGS, static, self._set, cluster=cluster,
            broker_group=broker_name, broker=broker_scope_name(broker_name, broker_id),
            retry_interval_s=retry_interval_s)

    def start(self) -> None:
        """Follow the config center in the background; the broker never waits for it."""
        self._follower.start()

    def stop(self) -> None:
        self._follower.stop()

    def apply(self, name: str, text: str | None) -> bool:
        """Apply one setting's text (None = unset); False if it was refused."""
        return self._follower.offer(name, text)

    def _set(self, name: str, value: object) -> None:
        if name == TRACE_QUIET_OPERATIONS:  # the sampler's, not the store's
            set_quiet_operations(value)  # type: ignore[arg-type]
        else:
            setattr(self._store_config, name, value)
