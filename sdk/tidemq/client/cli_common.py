"""What every `tidemq` command shares: global options, output modes, error rendering."""

from __future__ import annotations

import base64
import json
import re
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.table import Table
from rich.text import Text
from typer._click.exceptions import (  # typer's own click (it vendors one)
    ClickException,
    NoArgsIsHelpError,
    UsageError,
)
from typer.core import TyperGroup

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
    wide = "wide"
    json = "json"


@dataclass
class Globals:
    namesrv: str
    config_center: str
    output: Output
    timeout: float


TopicArg = Annotated[str, typer.Argument(help="topic name", show_default=False)]
GroupArg = Annotated[str, typer.Argument(help="consumer group name", show_default=False)]
# ids one copies into the next command: never shortened
UNWRAPPED_COLUMNS = frozenset({"msg id", "stored", "address", "master", "member", "recall handle",
                               "receipt handle"})
OutputOpt = Annotated[Output | None, typer.Option(
    "--output", "-o", help="table (default; fitted to the terminal), wide (every column in full) or json; "
         "overrides the global --output")]
TIME_HELP = ("ISO 8601 (2026-11-22T05:00:00Z; no zone = UTC), milliseconds since the epoch, "
             "'now', or relative like -15m / -2h / -1d")


def globals_of(ctx: typer.Context) -> Globals:
    return ctx.find_root().obj


def json_mode(ctx: typer.Context, output: Output | str | None) -> bool:
    """Whether this command prints JSON (its own -o, else the global one); the mode is also
    what its tables are rendered in (`wide`: every column in full)."""
    root = getattr(ctx.find_root().obj, "output", None)
    _mode["output"] = Output(output or root or Output.table)
    return _mode["output"] == Output.json


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


class OneLineErrors(TyperGroup):
    """The `tidemq` command group: a usage error (a missing argument, an unknown option, a value
    that does not parse) is one line `error INVALID_ARGUMENT: sentence (see 'tidemq ... --help')`
    on stderr and exit status 1, like every other failure, instead of click's usage block and
    status 2. Help for a bare group (`tidemq topic`) is still shown."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True,
             **extra):
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode, **extra)
        try:
            result = super().main(args, prog_name, complete_var, False, **extra)
        except NoArgsIsHelpError as exc:
            exc.show()
            sys.exit(0)
        except UsageError as exc:
            err.print(Text(f"error INVALID_ARGUMENT: {usage_sentence(exc)}"))
            sys.exit(1)
        except ClickException as exc:  # a file that cannot be opened, ...
            err.print(Text(f"error INVALID_ARGUMENT: {exc.format_message()}"))
            sys.exit(1)
        except typer.Abort:
            err.print(Text("error ABORTED: nothing was done"))
            sys.exit(1)
        sys.exit(result if isinstance(result, int) and not isinstance(result, bool) else 0)


def usage_sentence(exc) -> str:
    """click's message as a sentence, naming the command's --help."""
    message = exc.format_message().strip().rstrip(".")
    command = exc.ctx.command_path if exc.ctx is not None else "tidemq"
    return f"{message} (see '{command} --help')"


def emit_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def progress(message: str) -> None:
    err.print(f"[dim]{message}[/dim]")


# Columns a table may leave out, least needed first, so that what stays (broker, queue, offset,
# body, lag...) is readable on an 80-column terminal; `-o wide` and `-o json` have everything.
OPTIONAL_COLUMNS = ("repl offset", "follows", "flags", "quorum", "unique id", "stored", "keys",
                    "cluster", "client", "perm", "read", "write", "protocol", "topics",
                    "last seen", "incarnation", "epoch", "lag bytes", "host", "member", "master",
                    "tag")
CUT = "…"          # the mark a shortened value ends with
MIN_CUT = 10       # a shortened value keeps at least this many columns (its mark included)


_mode = {"output": Output.table}  # this invocation's output mode (json_mode records it)


def render_mode() -> str:
    """The running command's output mode: its own -o, else the global one ('table')."""
    return _mode["output"]


def _frame(widths: list[int]) -> int:
    """The width of a rich table (heavy head, edges, one space of padding) of these columns."""
    return sum(widths) + 3 * len(widths) + 1


def _cut(value: str, width: int) -> str:
    if cell_len(value) <= width:
        return value
    return set_cell_size(value, width - 1) + CUT


def _note(console, options, what: str, width: int):
    """The line under a fitted table, wrapped between words (the console does not wrap)."""
    text = Text(f"({what} to fit {width} columns; -o wide or -o json show it all)", style="dim")
    yield from console.render(text, options.update(no_wrap=False, overflow="fold"))


class FittedTable:
    """A rich table that fits the terminal (a pipe counts as 80 columns) without ever breaking
    a value over lines: each row is one line. To get there, columns of OPTIONAL_COLUMNS (never
    the first, which names the row) are left out, least needed first; then long values are
    shortened, each ending with the visible mark …, down to MIN_CUT columns (values of
    UNWRAPPED_COLUMNS, ids one copies, never); where even that cannot fit, every row is shown
    as `column: value` lines instead. A line under the table says what was left out or cut and
    that `-o wide` / `-o json` show every field in full. `-o wide` prints the whole table,
    however wide."""

    def __init__(self, title: str, columns: list[str], rows: list[list[Any]]) -> None:
        self.title, self.columns = title, columns
        self.rows = [[_cell(value) for value in row] for row in rows]

    def natural(self, index: int) -> int:
        return max([cell_len(self.columns[index]),
                    *(cell_len(row[index]) for row in self.rows)])

    def build(self, keep: list[int], widths: list[int]) -> Table:
        table = Table(title=self.title, title_justify="left")
        for i, width in zip(keep, widths, strict=True):
            table.add_column(self.columns[i], no_wrap=True, overflow="ellipsis",
                             min_width=width, max_width=width)
        for row in self.rows:
            table.add_row(*(Text(_cut(row[i], w)) for i, w in zip(keep, widths, strict=True)))
        return table

    def fit(self, width: int) -> tuple[list[int], list[int], list[str]] | None:
        """The columns kept, their widths and those left out; None: no table fits."""
        keep = list(range(len(self.columns)))
        natural = {i: self.natural(i) for i in keep}
        dropped: list[str] = []
        for name in OPTIONAL_COLUMNS:
            if _frame([natural[i] for i in keep]) <= width:
                return keep, [natural[i] for i in keep], dropped
            if name in self.columns[1:] and self.columns.index(name) in keep:
                keep.remove(self.columns.index(name))
                dropped.append(name)
        floor = {i: natural[i] if self.columns[i] in UNWRAPPED_COLUMNS
                 else min(natural[i], max(cell_len(self.columns[i]), MIN_CUT)) for i in keep}
        widths = {i: floor[i] for i in keep}
        spare = width - _frame(list(widths.values()))
        if spare < 0:
            return None
        while spare > 0:  # the room left goes round the shortened columns, one at a time
            short = [i for i in keep if widths[i] < natural[i]]
            if not short:
                break
            for i in short[:spare]:
                widths[i] += 1
            spare -= len(short[:spare])
        return keep, [widths[i] for i in keep], dropped

    def __rich_console__(self, console, options):
        width = options.max_width
        if render_mode() == Output.wide:
            keep = list(range(len(self.columns)))
            natural = [self.natural(i) for i in keep]
            yield from console.render(self.build(keep, natural),
                                      options.update_width(max(width, _frame(natural))))
            return
        fitted = self.fit(width)
        if fitted is None:
            yield from self.vertical(console, options)
            return
        keep, widths, dropped = fitted
        yield self.build(keep, widths)
        notes = [f"left out {', '.join(dropped)}"] if dropped else []
        if any(cell_len(row[i]) > w for row in self.rows
               for i, w in zip(keep, widths, strict=True)):
            notes.append(f"cut values marked {CUT}")
        if notes:
            yield from _note(console, options, "; ".join(notes), width)

    def vertical(self, console, options):
        """Every row as `column: value` lines (a terminal too narrow for the table)."""
        width = options.max_width
        label = max(cell_len(name) for name in self.columns) + 2
        cut = False
        yield Text(self.title, style="italic")
        for n, row in enumerate(self.rows):
            if n:
                yield Text("")
            for name, value in zip(self.columns, row, strict=True):
                room = max(width - label, MIN_CUT)
                if name in UNWRAPPED_COLUMNS and cell_len(value) > room:
                    # an id one copies: whole and alone on its line (the terminal wraps it)
                    yield Text(f"{name}:")
                    yield Text(f"  {value}", no_wrap=True, overflow="ignore")
                    continue
                cut |= cell_len(value) > room
                yield Text(f"{name + ':':<{label}}{_cut(value, room)}", no_wrap=True,
                           overflow="ignore")
        if cut:
            yield from _note(console, options, f"cut values marked {CUT}", width)
        else:
            yield from _note(console, options, "one field a line", width)


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

