"""The broker's wire-protocol settings: a port that cannot be one is refused with its name when
the settings load, not by the event loop when the broker starts."""

from __future__ import annotations

import pytest
from tidemq.broker.settings import BrokerSettings
from tidemq.common.settings import SettingsError, load_settings


@pytest.mark.parametrize("port", ["-2", "65536"])
def test_a_wire_port_out_of_range_is_refused_by_name(port):
    with pytest.raises(SettingsError, match=f"wire_port must be .* got {port}"):
        load_settings(BrokerSettings, ["--wire-port", port])


@pytest.mark.parametrize("port", ["-1", "0", "10913"])
def test_the_documented_values_load(port):
    assert load_settings(BrokerSettings, ["--wire-port", port]).wire_port == int(port)
