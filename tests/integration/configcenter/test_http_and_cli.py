"""The gateway's /v1/config routes and `tidemq config` against a real config center."""

from __future__ import annotations

import json

import pytest
from flask import Flask
from tidemq.client.cli_config import config_app
from tidemq.common import problems
from tidemq.gateway.config_routes import EXTENSION, config_bp
from typer.testing import CliRunner


@pytest.fixture
def http(shared_client):
    app = Flask("test-gateway")
    problems.install(app)
    app.register_blueprint(config_bp)
    app.extensions[EXTENSION] = shared_client
    return app.test_client()


def test_http_put_get_delete_with_if_match(http):
    created = http.put("/v1/config/tidemq/groups/billing", data=b'{"retry_max": 16}')
    assert created.status_code == 201
    revision = created.get_json()["revision"]
    got = http.get("/v1/config/tidemq/groups/billing")
    assert got.status_code == 200 and got.headers["ETag"] == f'"{revision}"'
    assert got.get_json()["value"] == '{"retry_max": 16}'
    stale = http.put("/v1/config/tidemq/groups/billing", data=b"x",
                     headers={"If-Match": f'"{revision + 1}"'})
    assert stale.status_code == 412
    assert stale.mimetype == "application/problem+json"
    assert f"at revision {revision}" in stale.get_json()["detail"]
    updated = http.put("/v1/config/tidemq/groups/billing", data=b"y",
                       headers={"If-Match": f'"{revision}"'})
    assert updated.status_code == 200
    assert http.put("/v1/config/tidemq/groups/billing", data=b"z",
                    headers={"If-None-Match": "*"}).status_code == 412
    listed = http.get("/v1/config/tidemq/groups/?prefix=true").get_json()
    assert [kv["key"] for kv in listed["kvs"]] == ["/tidemq/groups/billing"]
    deleted = http.delete("/v1/config/tidemq/groups/billing",
                          headers={"If-Match": updated.headers["ETag"]})
    assert deleted.status_code == 200
    missing = http.get("/v1/config/tidemq/groups/billing")
    assert missing.status_code == 404 and missing.get_json()["code"] == "NOT_FOUND"



def test_http_and_cli_read_a_single_key_at_a_revision(http, shared_center):
    """`?revision=` without `prefix=true` (and `get --revision` without `--prefix`) read the key
    as it was then, never silently the current value."""
    first = http.put("/v1/config/rev/k", data=b"one").get_json()["revision"]
    http.put("/v1/config/rev/kk", data=b"sibling")  # a key the exact key prefixes
    http.put("/v1/config/rev/k", data=b"two")
    old = http.get(f"/v1/config/rev/k?revision={first}")
    assert old.status_code == 200 and old.get_json()["value"] == "one"
    assert old.headers["ETag"] == f'"{first}"'
    assert http.get("/v1/config/rev/k").get_json()["value"] == "two"
    before = http.get(f"/v1/config/rev/kk?revision={first}")
    assert before.status_code == 404 and f"at revision {first}" in before.get_json()["detail"]
    assert http.get("/v1/config/rev/k?revision=x").status_code == 400
    runner = CliRunner()
    addr = ["--config-center", shared_center.addr]
    result = runner.invoke(config_app, ["get", "/rev/k", "--revision", str(first), "-o", "json",
                                        *addr])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["value"] == "one"
    missing = runner.invoke(config_app, ["get", "/rev/kk", "--revision", str(first), *addr])
    assert missing.exit_code == 1 and f"at revision {first}" in missing.output

@pytest.mark.parametrize(
    ("method", "path", "headers", "data", "status", "code"),
    [
        ("put", "/v1/config/k", {"If-Match": "abc"}, b"x", 400, "INVALID_ARGUMENT"),
        ("put", "/v1/config/k", {"If-Match": '"-1"'}, b"x", 400, "INVALID_ARGUMENT"),
        ("get", "/v1/config/", {}, None, 400, "INVALID_ARGUMENT"),
        ("put", "/v1/config/" + "k" * 1100, {}, b"x", 400, "INVALID_ARGUMENT"),
        ("put", "/v1/config/big", {}, b"x" * (1024 * 1024 + 1), 413, "MESSAGE_TOO_LARGE"),
        ("delete", "/v1/config/absent", {}, None, 404, "NOT_FOUND"),
    ],
)
def test_http_bad_input_is_a_problem_document(http, method, path, headers, data, status, code):
    response = getattr(http, method)(path, headers=headers, data=data)
    assert response.status_code == status
    assert response.mimetype == "application/problem+json"
    assert response.get_json()["code"] == code


def test_cli_set_get_history_rollback_watch(shared_center):
    runner = CliRunner()
    addr = ["--config-center", shared_center.addr]

    def run(*args: str) -> str:
        result = runner.invoke(config_app, [*args, *addr])
        assert result.exit_code == 0, result.output
        return result.stdout

    key = "/tidemq/config/cluster/c1/disk_max_used_ratio"
    first = json.loads(run("set", key, "0.75", "-o", "json"))
    run("set", key, "0.9")
    assert json.loads(run("get", key, "-o", "json"))[
        "value"] == "0.9"
    history = json.loads(run("history", key, "-o", "json"))
    assert [e["value"] for e in history] == ["0.75", "0.9"]
    run("rollback", key, str(first["revision"]))
    lines = run("watch", "/tidemq/config/", "--from-revision", str(first["revision"]),
                "--count", "3", "-o", "json").splitlines()
    assert [json.loads(line)["value"] for line in lines] == ["0.75", "0.9", "0.75"]
    effective = json.loads(run("effective", "--cluster", "c1", "-o", "json"))
    assert effective["settings"][0]["value"] == "0.75"
    conflict = runner.invoke(config_app, ["set", key, "0.5", "--if-revision", "1", *addr])
    assert conflict.exit_code == 1 and "PRECONDITION_FAILED" in conflict.output


def test_cli_reads_the_address_from_the_environment(shared_center, monkeypatch):
    monkeypatch.setenv("TIDEMQ_CONFIG_CENTER", shared_center.addr)
    result = CliRunner().invoke(config_app, ["get", "/missing"])
    assert result.exit_code == 1 and "NOT_FOUND" in result.output


def test_cli_watch_says_what_it_waits_for_and_ctrl_c_exits_130(shared_center):
    from tests.support.cli import interrupt_when_waiting

    ended = interrupt_when_waiting(
        ["-o", "json", "--config-center", shared_center.addr, "config", "watch",
         "/tidemq/nothing-here/"], "watching /tidemq/nothing-here/ for changes")
    assert ended.returncode == 130, ended.stderr  # was 0
    assert ended.stdout == "" and "Traceback" not in ended.stderr


def _tidemq(center, *args: str, input: str | None = None):
    from tidemq.client.cli import app

    return CliRunner().invoke(app, ["--config-center", center.addr, *args], input=input)


def test_cli_config_set_refuses_an_invalid_setting_before_writing_it(shared_center):
    key = "/tidemq/config/cluster/c9/disk_max_used_ratio"
    for bad in ("abc", "1.5"):
        refused = _tidemq(shared_center, "config", "set", key, bad)
        assert refused.exit_code == 1, refused.output
        assert "error INVALID_SETTING" in refused.stderr and "a ratio in (0, 1]" in refused.stderr
    assert _tidemq(shared_center, "config", "get", key).exit_code == 1  # nothing was written
    http_refused = _tidemq(shared_center, "config", "set",
                           "/tidemq/config/group/gateway/breaker_fail_max", "0")
    assert "an integer 1..10000" in http_refused.stderr


def test_cli_config_set_from_stdin_drops_the_line_end(shared_center):
    key = "/tidemq/config/cluster/c9/retention_hours"
    assert _tidemq(shared_center, "config", "set", key, "-", input="48\n").exit_code == 0
    got = _tidemq(shared_center, "-o", "json", "config", "get", key)
    assert json.loads(got.stdout)["value"] == "48"


def test_the_global_output_option_reaches_config_and_errors_read_alike(shared_center):
    key = "/tidemq/cli/global-output"
    written = _tidemq(shared_center, "-o", "json", "config", "set", key, "v")
    assert json.loads(written.stdout)["key"] == key
    assert json.loads(_tidemq(shared_center, "-o", "json", "config", "get", key).stdout)[
        "value"] == "v"
    deleted = _tidemq(shared_center, "-o", "json", "config", "delete", key)
    assert json.loads(deleted.stdout)["key"] == key
    missing = _tidemq(shared_center, "config", "delete", key)  # said so, exit 1 (was exit 0)
    assert missing.exit_code == 1
    assert missing.stderr.startswith("error NOT_FOUND: key '/tidemq/cli/global-output' does "
                                     "not exist")
