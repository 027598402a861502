"""Trace-collector dynamic settings from the config center, applied live: `retention_spans`,
`retention_hours` and `retention_mb` (the store reads its retention policy on every batch and every idle
enforcement, so a change is safe at once; a tighter bound is enforced immediately).

Off unless `--config-center` is given: the collector receives every service's spans and must
start with nothing else up (the follower connects in the background). Scopes: cluster
`<cluster_name>` < group `<config_group>` (default `trace-collector`). The following itself is
tidemq.configclient's, as in every service.
"""

from __future__ import annotations

import dataclasses
import sqlite3

from tidemq.common.logs import get_logger
from tidemq.common.setting_rules import TRACE_COLLECTOR_RULES
from tidemq.configclient.live import DynamicSettingsFollower
from tidemq.tracecollector.settings import TraceCollectorSettings
from tidemq.tracecollector.store import SpanStore

log = get_logger(__name__)

RULES = TRACE_COLLECTOR_RULES  # with every service's in tidemq.common.setting_rules
_FIELDS = {"retention_spans": "max_spans", "retention_hours": "max_age_hours",
           "retention_mb": "max_bytes"}
BYTES_PER_MB = 1024 * 1024


def policy_value(name: str, value: object) -> object:
    """A setting's value as the RetentionPolicy field holds it (MiB → bytes)."""
    return int(float(value) * BYTES_PER_MB) if name == "retention_mb" else value  # type: ignore[arg-type]


def follow_retention(settings: TraceCollectorSettings, store: SpanStore) -> DynamicSettingsFollower:
    def apply(name: str, value: object) -> None:
        store.retention = dataclasses.replace(store.retention,
                                              **{_FIELDS[name]: policy_value(name, value)})
        try:
            store.enforce_retention()  # a tighter bound applies now, not at the next batch
        except sqlite3.Error as exc:  # e.g. closing down: the next batch enforces it anyway
            log.warning("retention not enforced yet", setting=name, error=str(exc))

    static = {name: getattr(settings, name) for name in RULES}
    return DynamicSettingsFollower(settings.config_center, RULES, static, apply,
                                   cluster=settings.cluster_name,
                                   broker_group=settings.config_group).start()
