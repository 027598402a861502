"""Where the SDK and the `tidemq` command send their spans (tidemq.client.client_tracing):
the environment first (TIDEMQ_OTLP_ENDPOINT, then the standard OTEL_EXPORTER_OTLP_* names),
then, for the command only, the endpoint file `make up` writes under `.data/run/`."""

from __future__ import annotations

import pytest
from tidemq.client import client_tracing
from tidemq.client.client_tracing import ENDPOINT_FILE, endpoint, endpoint_in_file


@pytest.fixture
def command_settings():
    saved = dict(client_tracing._settings)
    yield
    client_tracing._settings.update(saved)


def _write_endpoint_file(root, address: str) -> None:
    (root / ENDPOINT_FILE).parent.mkdir(parents=True)
    (root / ENDPOINT_FILE).write_text(address + "\n")


def test_the_environment_names_the_endpoint_tidemqs_own_variable_first():
    assert endpoint({}) == ""
    assert endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4317"}) == "collector:4317"
    assert endpoint({"OTEL_EXPORTER_OTLP_ENDPOINT": "a:1",
                     "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "b:2"}) == "b:2"
    assert endpoint({"TIDEMQ_OTLP_ENDPOINT": "127.0.0.1:4317",
                     "OTEL_EXPORTER_OTLP_ENDPOINT": "b:2"}) == "127.0.0.1:4317"
    # set and empty: nothing is exported, even where a standard variable names a collector
    assert endpoint({"TIDEMQ_OTLP_ENDPOINT": "", "OTEL_EXPORTER_OTLP_ENDPOINT": "b:2"}) == ""
    assert endpoint({"TIDEMQ_OTLP_ENDPOINT": "a:1", "OTEL_SDK_DISABLED": "true"}) == ""


def test_only_the_command_reads_make_ups_endpoint_file(tmp_path, command_settings):
    _write_endpoint_file(tmp_path, "127.0.0.1:24317")
    below = tmp_path / "sdk" / "tidemq"
    below.mkdir(parents=True)
    assert endpoint({}, cwd=below) == ""  # an application's SDK: the environment only
    client_tracing.for_command()
    assert endpoint({}, cwd=below) == "127.0.0.1:24317"  # found from a subdirectory
    assert endpoint({"TIDEMQ_OTLP_ENDPOINT": "elsewhere:4317"}, cwd=below) == "elsewhere:4317"
    assert endpoint({"TIDEMQ_OTLP_ENDPOINT": ""}, cwd=below) == ""


def test_no_endpoint_file_means_no_endpoint(tmp_path):
    assert endpoint_in_file(tmp_path) == ""
    (tmp_path / ".data").write_text("not a directory")
    assert endpoint_in_file(tmp_path) == ""
