"""The gateway's dynamic settings: circuit-breaker thresholds and the tracing sampler's
`trace_quiet_operations` from the config center, live.

Scopes (docs/config-center.md): `/tidemq/config/cluster/<cluster_name>/<setting>` <
`/tidemq/config/group/<config_group>/<setting>` (default group `gateway`, so gateways can be tuned apart from
brokers). Each gunicorn worker runs its own follower (built after the fork, in the worker's
backend), so every worker applies a change; each logs it with its pid. Unset → the static
`--breaker-*` value. A value that does not parse or is out of range is refused and logged.
"""

from __future__ import annotations

from tidemq.common import rpc
from tidemq.common.setting_rules import (
    GATEWAY_RULES,
    TRACE_QUIET_OPERATIONS,
    parse_quiet_operations,
)
from tidemq.common.tracing import set_quiet_operations
from tidemq.configclient.live import DynamicSettingsFollower
from tidemq.gateway.settings import GatewaySettings

BREAKER_RULES = GATEWAY_RULES  # defined with every service's in tidemq.common.setting_rules


def apply_breaker_setting(name: str, value: object) -> None:
    """Every breaker this worker has, and every one it makes later, gets the new threshold."""
    if name == "breaker_fail_max":
        rpc.retune_breakers(fail_max=int(value))  # type: ignore[arg-type]
    elif name == "breaker_reset_s":
        rpc.retune_breakers(reset_timeout_s=float(value))  # type: ignore[arg-type]
    elif name == TRACE_QUIET_OPERATIONS:  # this worker's sampler
        set_quiet_operations(value)  # type: ignore[arg-type]


def follow_breaker_settings(settings: GatewaySettings) -> DynamicSettingsFollower:
    static = {"breaker_fail_max": settings.breaker_fail_max,
              "breaker_reset_s": settings.breaker_reset_s,
              TRACE_QUIET_OPERATIONS: parse_quiet_operations(settings.trace_quiet_operations)}
    return DynamicSettingsFollower(settings.config_center, BREAKER_RULES, static,
                                   apply_breaker_setting, cluster=settings.cluster_name,
                                   broker_group=settings.config_group).start()
