"""Every `tidemq` command that prints a table, rendered at 80 and 120 columns (a pipe counts
as 80): no value is broken over lines, a shortened value ends with the mark …, every line
fits, and `-o wide` shows every value whole. The answers are fixed stand-ins with the long
names a real cluster has (DefaultCluster, SEND_OK, recall handles)."""

from __future__ import annotations

import re
import time

import pytest
from tidemq.client import admin as admin_module
from tidemq.client import cli, cli_common, dead_letters, producer
from tidemq.client.admin import BrokerEntry, GroupSummary
from tidemq.client.cli_common import UNWRAPPED_COLUMNS, FittedTable
from tidemq.client.message import MessageExt, SendResult, SendStatus
from tidemq.common import record
from tidemq.configclient import client as config_client
from tidemq.configclient.client import KeyValue, RangeResult
from typer.testing import CliRunner

from tests.unit.client.test_cli import StubAdmin

NOW_MS = int(time.time() * 1000)
MSG_ID = "7F0000010000C0670000000000000000"


class LongNamesAdmin(StubAdmin):
    def cluster_info(self):
        return [BrokerEntry("DefaultCluster", "broker-a", 0, "127.0.0.1:10911", NOW_MS, 0, 3,
                            True, 0, 0.0, incarnation="5f0c9a7e21d84b3f9c0d6a1e2b3c4d5e:12"),
                BrokerEntry("DefaultCluster", "broker-a", 1, "127.0.0.1:11011", NOW_MS, 1, 3,
                            False, 123456, 12.5, rebuilding=True,
                            incarnation="0a1b2c3d4e5f60718293a4b5c6d7e8f9:1"),
                BrokerEntry("DefaultCluster", "broker-b", 1, "127.0.0.1:12011", NOW_MS, 1, 4,
                            False, None, None, incarnation="9e8d7c6b5a4f30211203f4e5d6c7b8a9:3",
                            group_waiting_for=(0,))]

    def group_list(self):
        return [GroupSummary("billing-reconciliation", "Stable", "averagely", 12, 3,
                             "broker-a", "push", True),
                GroupSummary("audit", "Empty", "", 0, 0, "broker-b", "push", False),
                GroupSummary("invoices-pop-consumers", "", "", 0, 0, "broker-a", "pop", False)]


class StubProducer:
    def __init__(self, *args, **kwargs):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return None

    def send(self, message):
        return SendResult(SendStatus.SEND_OK, MSG_ID, "3347A34416A3E5C601A20194252E0000",
                          "broker-a", 3, 17)


def dead_letter() -> MessageExt:
    return MessageExt("%DLQ%audit", b"remind me about the invoice of order 1 next week", "",
                      ["order-1"], {record.PROP_FIRST_FAILURE_MS: "1795322826000"}, "broker-a",
                      0, 4, MSG_ID, "3347A34416A3E5C601A20194252E0000", 1795322826000,
                      1795322826218, 1)


class StubDeadLetters(StubProducer):
    def list(self, limit):
        return [dead_letter()]


class StubConfigClient(StubProducer):
    def range(self, prefix, *, revision=0, limit=0):
        value = b'{"name":"orders","queues":8,"perm":6,"order":false,"owner":"payments-team"}'
        return RangeResult([KeyValue("/tidemq/topics/orders", value, 3, 7, 2, 0)], 7)


COMMANDS = [
    ("cluster", "list"),
    ("topic", "list"),
    ("topic", "describe", "orders"),
    ("group", "list"),
    ("group", "describe", "billing"),
    ("group", "reset-offsets", "billing", "orders", "--to-time", "1700000000000"),
    ("offset", "for-time", "orders", "--time", "1700000000000"),
    ("message", "query", "orders", "order-1"),
    ("send", "orders", "remind me", "--delay", "10s"),
    ("dlq", "list", "audit"),
    ("config", "get", "/tidemq/topics/", "--prefix"),
]


@pytest.fixture
def run(monkeypatch):
    StubAdmin.calls, StubAdmin.fail_with = [], None
    monkeypatch.setattr(admin_module, "Admin", LongNamesAdmin)
    monkeypatch.setattr(producer, "Producer", StubProducer)
    monkeypatch.setattr(dead_letters, "DeadLetters", StubDeadLetters)
    monkeypatch.setattr(config_client, "ConfigClient", StubConfigClient)
    tables: list[FittedTable] = []
    init = FittedTable.__init__

    def recording(self, *args):
        init(self, *args)
        tables.append(self)

    monkeypatch.setattr(FittedTable, "__init__", recording)

    def invoke(args, width):
        tables.clear()
        monkeypatch.setattr(cli_common.out, "width", width)
        result = CliRunner().invoke(cli.app, list(args))
        assert result.exit_code == 0, (args, result.output)
        assert tables, f"{args} printed no table"
        return result.stdout, list(tables)

    return invoke


def shown(value: str, text: str) -> bool:
    """`value` is on one line whole, or its start is, ending with the cut mark."""
    if value in text:
        return True
    return any(value.startswith(cut[:-1]) for cut in re.findall(r"[^\s│┃][^│\n]*…", text))


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_no_table_breaks_a_value_over_lines(run, args, width):
    text, tables = run(args, width)
    whole = {row[i] for fitted in tables for row in fitted.rows
             for i, column in enumerate(fitted.columns) if column in UNWRAPPED_COLUMNS}
    # an id longer than the line (a recall handle) is alone on its line, never cut or broken
    assert all(len(line) <= width or line.strip() in whole for line in text.splitlines()), text
    left_out = " ".join(re.findall(r"left out (.*?)(?:;| to fit)", " ".join(text.split())))
    for fitted in tables:
        for row in fitted.rows:
            for column, value in zip(fitted.columns, row, strict=True):
                if column in left_out.split(", "):
                    continue
                assert shown(value, text), f"{column}={value!r} broken at {width}:\n{text}"
    if "…" in text:
        assert "cut values marked …" in " ".join(text.split()), text


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_wide_shows_every_value_whole(run, args):
    text, tables = run(["-o", "wide", *args], 80)
    for fitted in tables:
        for row in fitted.rows:
            for value in row:
                assert value in text, f"{value!r} not whole in -o wide:\n{text}"
    assert "left out" not in text and "…" not in text, text


def test_a_table_that_cannot_fit_is_shown_one_field_a_line(run):
    """The delayed send's recall handle stays whole (one copies it into `message recall`):
    at 80 columns the row becomes `column: value` lines."""
    text, _ = run(("send", "orders", "remind me", "--delay", "10s"), 80)
    assert re.search(r"^status: +SEND_OK$", text, re.M), text
    assert re.search(rf"^msg id: +{MSG_ID}$", text, re.M), text
    handle = re.search(r"^recall handle:\n  (\S+)$", text, re.M)
    assert handle and handle[1].startswith("djEK"), text  # whole, on its own line
