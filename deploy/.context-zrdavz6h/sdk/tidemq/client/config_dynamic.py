"""Live settings, re-exported under the SDK's documented name (tidemq.configclient.live)."""

from tidemq.configclient.live import (  # noqa: F401
    DynamicSettingsFollower,
    LiveSettings,
    SettingChange,
    SettingRule,
)
