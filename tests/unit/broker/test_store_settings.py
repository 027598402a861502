"""Compaction and pop-state settings the change added: a value that cannot be one is refused
with its name when the settings load (a 0 ms compaction interval would spin the compactor)."""

from __future__ import annotations

import pytest
from tidemq.broker.settings import BrokerSettings
from tidemq.common.settings import SettingsError, load_settings


@pytest.mark.parametrize(("flag", "value", "says"), [
    ("--compaction-interval-ms", "0", "compaction_interval_ms must be >= 1"),
    ("--compaction-io-mib-s", "-1", "compaction_io_mib_s >= 0"),
    ("--pop-expired-kept-ms", "-5", "pop_expired_kept_ms must be >= 0, got -5"),
    ("--compaction-relocate-max-live-ratio", "3",
     "compaction_relocate_max_live_ratio must be within 0..1, got 3.0"),
])
def test_bad_values_are_refused_by_name(flag, value, says):
    with pytest.raises(SettingsError, match=says):
        load_settings(BrokerSettings, [flag, value])


def test_the_defaults_and_no_io_limit_load():
    loaded = load_settings(BrokerSettings, ["--compaction-io-mib-s", "0"])
    assert (loaded.compaction_interval_ms, loaded.compaction_io_mib_s,
            loaded.pop_expired_kept_ms) == (10_000, 0.0, 600_000)
