"""The collector's settings: documented defaults and the usual override order."""

from __future__ import annotations

from tidemq.common.settings import load_settings
from tidemq.tracecollector.settings import TraceCollectorSettings


def test_defaults_are_the_standard_otlp_and_dashboard_ports():
    settings = load_settings(TraceCollectorSettings, [])
    assert (settings.port, settings.http_port) == (4317, 16686)
    assert settings.retention_spans == 1_000_000


def test_flags_and_environment_override(monkeypatch):
    monkeypatch.setenv("TIDEMQ_RETENTION_HOURS", "6")
    settings = load_settings(TraceCollectorSettings, ["--http-port", "0", "--retention-spans", "10"])
    assert (settings.http_port, settings.retention_spans, settings.retention_hours) == (0, 10, 6.0)
