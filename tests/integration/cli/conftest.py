"""The `tidemq` command line run in-process (typer's CliRunner, the console script's code path)
against the module's own `cluster` fixture."""

from __future__ import annotations

import json

import pytest
from tidemq.client.cli import app
from typer.testing import CliRunner


@pytest.fixture(scope="module")
def tidemq(cluster):
    """`tidemq(*args, expect=0, input=None)` runs one command against `cluster` and asserts its
    exit code; `.json(*args)` and `.json_input(*args, input=...)` parse its `-o json` output."""
    runner = CliRunner()
    base = ["--namesrv", cluster.namesrv_addrs, "--config-center", cluster.config_center.addr]

    def run(*args: str, expect: int = 0, input: str | None = None):
        result = runner.invoke(app, [*base, *args], input=input)
        assert result.exit_code == expect, (args, result.output, result.exception)
        return result

    def run_json(*args: str):
        return json.loads(run("-o", "json", *args).stdout)

    def run_json_input(*args: str, input: str):
        return json.loads(run("-o", "json", *args, input=input).stdout)

    run.json = run_json
    run.json_input = run_json_input
    return run
