"""The `tidemq` command line without a cluster: help text, argument validation, error
rendering and JSON shapes. Only here is Admin replaced, by a stub returning fixed answers."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import typer
from tidemq.client import admin as admin_module
from tidemq.client import cli
from tidemq.client.admin import (
    BrokerEntry,
    GroupDescription,
    GroupMember,
    GroupQueueLag,
    QueueOffsetEntry,
    QueueStatus,
    TopicDescription,
    TopicSummary,
)
from tidemq.client.message import MessageExt, MessageQueue
from tidemq.client.routes import BrokerGroup, QueueLayout, TopicRoute
from tidemq.common import errors
from typer.main import get_command
from typer.testing import CliRunner

ROUTE = TopicRoute("orders", (QueueLayout("broker-a", 2, 2, 6),),
                   {"broker-a": BrokerGroup("c1", "broker-a", {0: "127.0.0.1:10911"})})


class StubAdmin:
    """Fixed answers; records calls so tests can check what the CLI asked for."""

    calls: list[tuple] = []
    fail_with: errors.TideMQError | None = None

    def __init__(self, namesrv, *, config_center, timeout):
        self.calls.append(("init", namesrv, config_center, timeout))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def query_by_key(self, topic, key, begin_ms, end_ms, max_results):
        self._maybe_fail()
        return [MessageExt(topic, b'{"id": 1, "customer": "Ada", "total": 42.5}', "created",
                           [key], {}, "broker-a", 3, 17, "7F0000010000C0670000000000000000",
                           "3347A34416A3E5C601A20194252E0000", 1795322826000, 1795322826218, 0)]

    def cluster_info(self):
        self._maybe_fail()
        return [BrokerEntry("c1", "broker-a", 0, "127.0.0.1:10911", 0)]

    def list_topics(self):
        self._maybe_fail()
        return [TopicSummary("orders", 2, 6, False, ("broker-a",)),
                TopicSummary("SCHEDULE_TOPIC_XXXX", 338, 6, False, ("broker-a",)),
                TopicSummary("%DLQ%billing", 1, 6, False, ("broker-a",))]

    config_unavailable = None   # set by a test: the config center did not answer

    def describe_topic(self, name):
        self._maybe_fail()
        return TopicDescription(name, ROUTE, [QueueStatus("broker-a", 0, 0, 5),
                                              QueueStatus("broker-a", 1, 2, 2)],
                                config_unavailable=self.config_unavailable)

    def create_topic(self, name, queues, order=False, wait=True, progress=None, config=None):
        self._maybe_fail()
        self.calls.append(("create_topic", name, queues, order, wait))
        return ROUTE if wait else None

    def delete_topic(self, name, progress=None):
        self._maybe_fail()
        self.calls.append(("delete_topic", name))

    def delete_group_offsets(self, topic, group=""):
        self.calls.append(("delete_group_offsets", topic, group))
        return {"broker-a": ["billing"]}

    def offset_for_timestamp(self, topic, timestamp_ms):
        self._maybe_fail()
        self.calls.append(("offset_for_timestamp", topic, timestamp_ms))
        return [QueueOffsetEntry(topic, "broker-a", 0, 3)]

    def reset_group_offsets(self, group, topic, timestamp_ms, progress=None):
        self._maybe_fail()
        self.calls.append(("reset", group, topic, timestamp_ms))
        return [QueueOffsetEntry(topic, "broker-a", 0, 1)]

    def group_describe(self, group):
        self._maybe_fail()
        if group == "popper":   # never joined the coordinator
            return GroupDescription(group, "broker-a", "Dead", "", 0, "", [], [
                GroupQueueLag("orders", "broker-a", 3, 1, 2, "")])
        member = GroupMember("m-1", "client", "10.0.0.1", [MessageQueue("orders", "broker-a", 0)])
        return GroupDescription(group, "broker-a", "Stable", "averagely", 3, "m-1", [member], [
            GroupQueueLag("orders", "broker-a", 0, 4, 10, "m-1"),
            GroupQueueLag("orders", "broker-a", 1, None, 7, ""),
        ])

    def _maybe_fail(self):
        if self.fail_with is not None:
            raise self.fail_with


@pytest.fixture
def run(monkeypatch):
    StubAdmin.calls = []
    StubAdmin.fail_with = None
    monkeypatch.setattr(admin_module, "Admin", StubAdmin)  # cli_common imports it per command
    runner = CliRunner()

    def invoke(*args: str, expect: int = 0, input: str | None = None):
        result = runner.invoke(cli.app, list(args), input=input)
        assert result.exit_code == expect, (args, result.output)
        return result

    return invoke


def _all_command_paths(group=None, prefix=()):
    group = group or get_command(cli.app)
    for name, command in group.commands.items():
        yield (*prefix, name)
        if hasattr(command, "commands"):
            yield from _all_command_paths(command, (*prefix, name))


def test_every_command_has_help_that_explains(run):
    paths = list(_all_command_paths())
    assert {("topic", "create"), ("group", "reset-offsets"), ("message", "query"),
            ("offset", "for-time"), ("config", "get"), ("consume",), ("send",)} <= set(paths)
    for path in paths:
        result = run(*path, "--help")
        assert "Usage: tidemq " + " ".join(path) in result.stdout
        summary = get_command(cli.app)
        for part in path:
            summary = summary.commands[part]
        assert summary.help, f"tidemq {' '.join(path)} has no help text"
        if path[0] != "config":  # the config sub-app is another engineer's; judged there
            for param in summary.params:
                assert getattr(param, "help", None), f"{path} {param.name} has no help"


def test_global_options_reach_admin(run):
    run("--namesrv", "h1:1;h2:2", "--config-center", "cc:7", "--timeout", "2.5", "cluster", "list")
    assert StubAdmin.calls[0] == ("init", "h1:1;h2:2", "cc:7", 2.5)


def test_global_config_center_reaches_the_config_sub_app_and_is_not_leaked(run, monkeypatch):
    import os

    from tidemq.configclient import client as config_client

    seen = []

    class StubConfigClient:
        def __init__(self, addr, **kwargs):
            seen.append(addr)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return None

        def get(self, key):
            return None

    monkeypatch.delenv("TIDEMQ_CONFIG_CENTER", raising=False)
    monkeypatch.setattr(config_client, "ConfigClient", StubConfigClient)  # imported per command
    # A missing key is the sub-app's business (its exit status is not what is tested here).
    CliRunner().invoke(cli.app, ["--config-center", "cc-global:7070", "config", "get", "/x"])
    assert seen == ["cc-global:7070"]
    assert "TIDEMQ_CONFIG_CENTER" not in os.environ


def test_env_vars_supply_addresses(run, monkeypatch):
    monkeypatch.setenv("TIDEMQ_NAMESRV_ADDRS", "env-ns:9876")
    monkeypatch.setenv("TIDEMQ_CONFIG_CENTER", "env-cc:7070")
    run("topic", "list")
    assert StubAdmin.calls[0][1:3] == ("env-ns:9876", "env-cc:7070")


def test_tidemq_error_is_one_red_line_with_code_and_status_1(run):
    StubAdmin.fail_with = errors.TopicNotExist("topic 'nope' does not exist")
    result = run("topic", "describe", "nope", expect=1)
    assert result.stderr.strip() == "error TOPIC_NOT_EXIST: topic 'nope' does not exist"
    assert result.stdout == "" and "Traceback" not in result.output


def test_unreachable_service_message_names_the_address(run):
    StubAdmin.fail_with = errors.ServiceUnavailable("no name server answered: 10.9.9.9:9876: down")
    result = run("cluster", "list", expect=1)
    assert "SERVICE_UNAVAILABLE" in result.stderr and "10.9.9.9:9876" in result.stderr


@pytest.mark.parametrize("args", [
    ["topic", "create", "t", "--queues", "0"],
    ["topic", "create", "t", "--queues", "5000"],
    ["offset", "for-time", "t", "--time", "yesterday-ish"],
    ["group", "reset-offsets", "g", "t"],
    ["consume", "t", "--offset", "3"],
    ["consume", "t", "--queue", "0", "--offset", "3", "--from-beginning"],
    ["send", "t"],
    ["send", "t", "body", "--property", "novalue"],
    ["-o", "yaml", "topic", "list"],
])
def test_bad_usage_is_one_error_line_and_status_1(run, args):
    """As the README promises for every failure: `error CODE: sentence`, exit 1 (was click's
    four-line usage block and status 2)."""
    result = run(*args, expect=1)
    assert "Traceback" not in result.output and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("error INVALID_ARGUMENT: ") and "--help')" in line, line


def test_a_bare_group_still_shows_its_help(run):
    assert "reset-offsets" in run("group", expect=0).output


def test_topic_create_passes_arguments_and_prints_json(run):
    body = json.loads(run("topic", "create", "orders", "--queues", "2", "--order",
                          "-o", "json").stdout)
    assert body == {"name": "orders", "queues": 2, "order": True, "brokers": ["broker-a"],
                    "config": {}}
    assert ("create_topic", "orders", 2, True, True) in StubAdmin.calls


def test_topic_delete_asks_unless_yes(run):
    run("topic", "delete", "orders", input="n\n", expect=1)
    assert ("delete_topic", "orders") not in StubAdmin.calls
    run("topic", "delete", "orders", input="y\n")
    run("topic", "delete", "orders", "--yes")
    assert StubAdmin.calls.count(("delete_topic", "orders")) == 2
    assert StubAdmin.calls.count(("delete_group_offsets", "orders", "")) == 2
    run("topic", "delete", "orders", "--yes", "--keep-offsets")
    assert StubAdmin.calls.count(("delete_group_offsets", "orders", "")) == 2


def test_topic_describe_says_why_settings_are_missing(run, monkeypatch):
    failure = {"code": "SERVICE_UNAVAILABLE", "detail": "config center 127.0.0.1:7070 is down"}
    monkeypatch.setattr(StubAdmin, "config_unavailable", failure)
    shown = run("topic", "describe", "orders")
    assert "settings not shown: the config center did not answer" in shown.output
    assert "SERVICE_UNAVAILABLE: config center 127.0.0.1:7070 is down" in shown.output
    described = json.loads(run("topic", "describe", "orders", "-o", "json").stdout)
    assert described["config"] == {} and described["config_unavailable"] == failure


def test_json_shapes(run):
    assert json.loads(run("-o", "json", "topic", "list").stdout) == [
        {"name": "orders", "queues": 2, "perm": 6, "order": False, "brokers": ["broker-a"]}]
    described = json.loads(run("topic", "describe", "orders", "--output", "json").stdout)
    assert described["name"] == "orders"  # one vocabulary with GET /v1/topics/{topic}
    assert described["brokers"] == [{"broker_name": "broker-a", "cluster": "c1",
                                     "addrs": {"0": "127.0.0.1:10911"}, "read_queue_nums": 2,
                                     "write_queue_nums": 2, "perm": 6}]
    assert described["queues"][0] == {"broker_name": "broker-a", "queue_id": 0,
                                      "min_offset": 0, "max_offset": 5, "messages": 5}
    (broker,) = json.loads(run("-o", "json", "cluster", "list").stdout)
    assert broker["role"] == "master" and broker["addr"] == "127.0.0.1:10911"
    group = json.loads(run("-o", "json", "group", "describe", "billing").stdout)
    assert group["total_lag"] == 6 and group["members"][0]["queues"] == ["orders@broker-a#0"]
    assert group["offsets"][1] == {"topic": "orders", "broker_name": "broker-a", "queue_id": 1,
                                   "committed": None, "max_offset": 7, "member_id": "",
                                   "unacked": None, "lag": None, "orphaned": False}


def test_topic_list_leaves_the_brokers_own_topics_to_all(run):
    shown = run("topic", "list")
    assert "orders" in shown.stdout and "SCHEDULE_TOPIC" not in shown.stdout
    assert "2 topic(s) of the brokers' own not listed; --all lists them" in shown.output
    names = [t["name"] for t in json.loads(run("-o", "json", "topic", "list", "--all").stdout)]
    assert names == ["orders", "SCHEDULE_TOPIC_XXXX", "%DLQ%billing"]


def test_a_group_that_never_joined_the_coordinator_is_not_called_dead(run):
    text = " ".join(run("group", "describe", "popper").stdout.split())
    assert "no members in the group coordinator (pop, pull and HTTP consumers do not join it)" \
        in text and "Dead" not in text and "total lag 1" in text


def test_tables_for_people(run):
    text = run("group", "describe", "billing").stdout
    assert "total lag 6" in text and "m-1 (leader)" in text
    assert "orders" in run("topic", "list").stdout


def test_times_are_parsed_before_any_remote_call(run):
    run("-o", "json", "offset", "for-time", "orders", "--time", "2026-11-22T05:00:00Z")
    expected = int(datetime(2026, 11, 22, 5, tzinfo=UTC).timestamp() * 1000)
    assert ("offset_for_timestamp", "orders", expected) in StubAdmin.calls
    run("group", "reset-offsets", "g", "orders", "--to-time", "1700000000000")
    assert ("reset", "g", "orders", 1_700_000_000_000) in StubAdmin.calls


@pytest.mark.parametrize(("text", "expected"), [
    ("now", 1_000_000_000),
    ("1234", 1234),
    ("-15m", 1_000_000_000 - 900_000),
    ("-2h", 1_000_000_000 - 7_200_000),
    ("1970-01-01T00:00:01", 1000),          # no zone = UTC
    ("1970-01-01T01:00:01+01:00", 1000),
])
def test_parse_time(text, expected):
    assert cli.parse_time(text, now_ms=1_000_000_000) == expected


def test_parse_time_rejects_nonsense():
    with pytest.raises(typer.BadParameter, match="is not a time"):
        cli.parse_time("tuesday")


def test_store_host_maps_to_the_registered_broker():
    from tidemq.common import record

    brokers = [BrokerEntry("c", "a", 0, "127.0.0.1:1000", 0),
               BrokerEntry("c", "b", 0, "127.0.0.1:2000", 0)]
    assert admin_module.broker_for_store_host(record.pack_host("127.0.0.1", 2000),
                                              brokers).broker_name == "b"
    with pytest.raises(errors.NotFound, match="127.0.0.1:3000"):
        admin_module.broker_for_store_host(record.pack_host("127.0.0.1", 3000), brokers)


def test_assignment_json_is_parsed_leniently():
    raw = json.dumps({"queues": [["t", "broker-a", 1]]}).encode()
    assert admin_module.parse_assignment(raw) == [MessageQueue("t", "broker-a", 1)]
    assert admin_module.parse_assignment(b"") == []
    assert admin_module.parse_assignment(b"not json") == []
    assert admin_module.parse_subscription(b'{"topics": ["b", "a"]}') == ["a", "b"]
    assert admin_module.parse_subscription(b"[]") == []


def test_tables_fit_80_columns_and_say_what_they_leave_out(run):
    """Broker, offset and msg id stay whole on an 80-column terminal, the body is shortened
    with a visible mark; the columns left out to get there are named, with the hint to use
    -o wide / -o json (was: the body folded into two-character slivers)."""
    text = run("message", "query", "orders", "order-1").stdout
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80, text
    (row,) = [line for line in lines if "7F0000010000C0670000000000000000" in line]
    assert '{"id": 1,' in row and "… │" in row, text
    assert "left out stored, tag" in text and "cut values marked …" in text, text
    assert "-o wide or -o json show it all" in " ".join(text.split()), text
    wide = run("message", "query", "orders", "order-1", "-o", "wide").stdout
    assert '{"id": 1, "customer": "Ada", "total": 42.5}' in wide, wide
    assert "…" not in wide and "left out" not in wide, wide
    described = run("group", "describe", "billing").stdout
    assert max(len(line) for line in described.splitlines()) <= 80, described
