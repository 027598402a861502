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

from tidemq.common.setting_rules import NAME_SERVER_RULES
from tidemq.configclient.live import DynamicSettingsFollower

RULES = NAME_SERVER_RULES  # defined with every service's in tidemq.common.setting_rules


class NameServerDynamicSettings(DynamicSettingsFollower):
    def __init__(self, config_center: str, static: dict[str, object],
                 apply: Callable[[str, object], None], *, cluster: str, group: str) -> None:
        super().__init__(config_center, RULES, static, apply, cluster=cluster,
                         broker_group=group)
