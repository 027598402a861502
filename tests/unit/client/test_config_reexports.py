"""The SDK's documented config-center names keep working after the move to
tidemq.configclient: user code importing them from tidemq.client gets the same objects."""

from __future__ import annotations

import tidemq.configclient.client as client
import tidemq.configclient.groups as groups
import tidemq.configclient.live as live
import tidemq.configclient.mirror as mirror
from tidemq.client.config_dynamic import DynamicSettingsFollower, LiveSettings, SettingRule
from tidemq.client.config_groups import GROUP_PREFIX, SubscriptionGroupConfig, SubscriptionGroups
from tidemq.client.config_mirror import PrefixMirror
from tidemq.configclient.client import ConfigClient, KeyValue, Lease, Watch, WatchCompacted


def test_documented_names_are_the_config_clients():
    assert (ConfigClient, KeyValue, Lease, Watch, WatchCompacted) == (
        client.ConfigClient, client.KeyValue, client.Lease, client.Watch, client.WatchCompacted)
    assert (LiveSettings, DynamicSettingsFollower, SettingRule) == (
        live.LiveSettings, live.DynamicSettingsFollower, live.Rule)
    assert (SubscriptionGroups, SubscriptionGroupConfig, GROUP_PREFIX) == (
        groups.SubscriptionGroups, groups.SubscriptionGroupConfig, groups.GROUP_PREFIX)
    assert PrefixMirror is mirror.PrefixMirror
