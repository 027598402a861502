"""Name-server dynamic settings from the config center, applied live: `broker_expiry_s` and
`scan_interval_s` (the expiry scanner reads both on every round, so a change is safe at once)
and `unclean_election` (the controller reads it at every election).

Off unless `--config-center` is given: the name server is the root of discovery and must start
and serve with nothing else up (the deployments pass it; the follower connects in the
background). Scopes: cluster `<cluster_name>` < group `<config_group>` (default `name-server`).
The following itself is tidemq.configclient's, as in every service.
"""

from __future__ import annotations

from collections.abc import Callable

from tidemq.configclient.live import DynamicSettingsFollower, Rule


def parse_bool(text: str) -> bool:
    value = text.strip().lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ValueError(f"not a boolean: {text!r}")


RULES = {
    "broker_expiry_s": Rule(float, lambda v: 1 <= v <= 86_400, "seconds in [1, 86400]"),
    "scan_interval_s": Rule(float, lambda v: 0.1 <= v <= 3_600, "seconds in [0.1, 3600]"),
    "unclean_election": Rule(parse_bool, lambda v: isinstance(v, bool), "true or false"),
}


class NameServerDynamicSettings(DynamicSettingsFollower):
    def __init__(self, config_center: str, static: dict[str, object],
                 apply: Callable[[str, object], None], *, cluster: str, group: str) -> None:
        super().__init__(config_center, RULES, static, apply, cluster=cluster,
                         broker_group=group)
