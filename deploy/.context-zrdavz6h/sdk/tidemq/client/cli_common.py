"""What every `tidemq` command shares: global options, output modes, error rendering."""

from __future__ import annotations

import base64
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from tidemq.client.admin import Admin
    from tidemq.client.message import MessageExt

# The clients (gRPC, protobuf stubs, pybreaker and so redis-py) are imported by the commands
# that call them, never at module level: `tidemq --help` and a usage error should not pay for
# them (tests/unit/client/test_lazy_imports.py holds this).

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False, soft_wrap=True)


class Output(StrEnum):
    table = "table"
    json = "json"


@dataclass
class Globals:
    namesrv: str
    config_center: str
    output: Output
    timeout: float


TopicArg = Annotated[str, typer.Argument(help="topic name", show_default=False)]
GroupArg = Annotated[str, typer.Argument(help="consumer group name", show_default=False)]
UNWRAPPED_COLUMNS = frozenset({"msg id", "stored", "address", "master"})  # ids must stay whole
OutputOpt = Annotated[Output | None, typer.Option(
    "--output", "-o", help="table (default) or json; overrides the global --output")]
TIME_HELP = ("ISO 8601 (2026-11-22T05:00:00Z; no zone = UTC), milliseconds since the epoch, "
             "'now', or relative like -15m / -2h / -1d")


def globals_of(ctx: typer.Context) -> Globals:
    return ctx.find_root().obj


def json_mode(ctx: typer.Context, output: Output | None) -> bool:
    return (output or globals_of(ctx).output) == Output.json


@contextmanager
def admin_session(ctx: typer.Context) -> Iterator[Admin]:
    from tidemq.client.admin import Admin

    g = globals_of(ctx)
    with expected_errors(), Admin(g.namesrv, config_center=g.config_center,
                                  timeout=g.timeout) as admin:
        yield admin


@contextmanager
def expected_errors() -> Iterator[None]:
    """Expected failures become one red line and exit status 1, never a traceback."""
    from tidemq.common.errors import TideMQError

    try:
        yield
    except TideMQError as exc:
        err.print(f"[red]error {exc.code}[/red]: {exc.message}")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def emit_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def progress(message: str) -> None:
    err.print(f"[dim]{message}[/dim]")


# Columns a table may leave out, least needed first, so that what stays (broker, queue, offset,
# body, lag...) is readable on an 80-column terminal; `-o json` always has everything.
OPTIONAL_COLUMNS = ("repl offset", "follows", "flags", "quorum", "unique id", "stored", "keys", "cluster", "client", "perm", "read",
                    "write", "protocol", "topics", "last seen", "host", "member", "master",
                    "tag")


class FittedTable:
    """A rich table that fits the terminal: columns of OPTIONAL_COLUMNS (never the first,
    which names the row) are left out, least needed first, until every value fits its line; whatever is still too wide folds. A
    table that left a column out, or must cut a value, ends with a line saying so and that
    `-o json` shows everything — a value is never cut silently."""

    def __init__(self, title: str, columns: list[str], rows: list[list[Any]]) -> None:
        self.title, self.columns, self.rows = title, columns, rows

    def build(self, keep: list[str]) -> Table:
        table = Table(title=self.title, title_justify="left")
        index = [self.columns.index(name) for name in keep]
        for name in keep:
            table.add_column(name, overflow="fold", no_wrap=name in UNWRAPPED_COLUMNS)
        for row in self.rows:
            table.add_row(*(_cell(row[i]) for i in index))
        return table

    def __rich_console__(self, console, options):
        width, keep, dropped = options.max_width, list(self.columns), []
        table = self.build(keep)
        for name in OPTIONAL_COLUMNS:
            if table.__rich_measure__(console, options).maximum <= width:
                break
            if name in keep and name != self.columns[0]:  # the first names the row
                keep.remove(name)
                dropped.append(name)
                table = self.build(keep)
        yield table
        notes = [f"left out {', '.join(dropped)}"] if dropped else []
        if table.__rich_measure__(console, options).minimum > width:
            notes.append("cut values marked …")
        if notes:
            yield Text(f"({'; '.join(notes)} to fit {width} columns: -o json shows every "
                       "field in full)", style="dim")


def table(title: str, columns: list[str], rows: list[list[Any]]) -> FittedTable:
    return FittedTable(title, columns, rows)


def _cell(value: Any) -> str:
    """Tables say yes/no for booleans and '-' for nothing (JSON keeps true/false/null)."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def parse_time(value: str, *, now_ms: int | None = None) -> int:
    """A user's time (see TIME_HELP) as milliseconds since the epoch."""
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    text = value.strip()
    if text == "now":
        return now_ms
    if text.isdigit():
        return int(text)
    relative = re.fullmatch(r"-(\d+)([smhd])", text)
    if relative:
        unit = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}[relative.group(2)]
        return now_ms - int(relative.group(1)) * unit
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(f"{value!r} is not a time: use {TIME_HELP}") from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)


def iso(ms: int) -> str:
    """UTC, millisecond precision: 2026-11-22T04:46:55.806Z."""
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def message_json(message: MessageExt) -> dict[str, Any]:
    try:
        body: dict[str, str] = {"body": message.body.decode("utf-8")}
    except UnicodeDecodeError:
        body = {"body_base64": base64.b64encode(message.body).decode()}
    return {
        "msg_id": message.msg_id, "unique_id": message.unique_id, "topic": message.topic,
        "broker_name": message.broker_name, "queue_id": message.queue_id,
        "queue_offset": message.queue_offset, "tag": message.tags, "keys": message.keys,
        "properties": message.user_properties, "born_timestamp": message.born_timestamp,
        "store_timestamp": message.store_timestamp, "reconsume_times": message.reconsume_times,
        **body,
    }


def body_text(message: MessageExt) -> str:
    row = message_json(message)
    return row.get("body", f"<{len(message.body)} bytes, not UTF-8>")

