"""`tidemq config ...`: read, write, watch and roll back config-center keys.

    tidemq config set /tidemq/topics/orders '{"name":"orders","queues":8,"perm":6,"order":false}'
    tidemq config get /tidemq/topics/ --prefix
    tidemq config watch /tidemq/topics/ --from-revision 1
    tidemq config history /tidemq/config/cluster/c1/retention_hours
    tidemq config rollback /tidemq/config/cluster/c1/retention_hours 12
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from tidemq.common.errors import PreconditionFailed, TideMQError
from tidemq.configclient.client import ConfigClient, Event, KeyValue, PutResult

config_app = typer.Typer(
    name="config", no_args_is_help=True,
    help="Read, write, watch and roll back keys in the config center (topics, groups, "
         "scoped settings).")

Addr = Annotated[str, typer.Option(
    "--config-center", envvar="TIDEMQ_CONFIG_CENTER",
    help="config-center address(es), host:port[,host:port]")]
Output = Annotated[str, typer.Option("--output", "-o", help="table or json")]
DEFAULT_ADDR = "127.0.0.1:7070"
WATCH_ACK_S = 5.0  # how long `watch` waits for the server's acknowledgement before saying so

_out = Console()
_err = Console(stderr=True)


def _kv_json(kv: KeyValue) -> dict[str, Any]:
    try:
        value: Any = kv.value.decode("utf-8")
    except UnicodeDecodeError:
        value = kv.value.hex()
    return {"key": kv.key, "value": value, "create_revision": kv.create_revision,
            "mod_revision": kv.mod_revision, "version": kv.version, "lease": kv.lease}


def _event_json(event: Event) -> dict[str, Any]:
    return {"type": event.type, "revision": event.revision, **_kv_json(event.kv)}


def _run(addr: str, action: Callable[[ConfigClient], None]) -> None:
    try:
        with ConfigClient(addr) as client:
            action(client)
    except TideMQError as exc:
        _err.print(f"[red]error {exc.code}[/red]: {exc.message}", highlight=False)
        raise typer.Exit(1) from None


def _print_kvs(kvs: list[KeyValue], output: str, title: str) -> None:
    if output == "json":
        print(json.dumps([_kv_json(kv) for kv in kvs]))
        return
    table = Table(title=title)
    for column in ("key", "value", "mod rev", "version", "lease"):
        table.add_column(column)
    for kv in kvs:
        row = _kv_json(kv)
        table.add_row(kv.key, str(row["value"]), str(kv.mod_revision), str(kv.version),
                      str(kv.lease or ""))
    _out.print(table)


@config_app.command()
def get(key: str,
        prefix: Annotated[bool, typer.Option("--prefix", help="list every key under KEY")] = False,
        revision: Annotated[int, typer.Option(help="read as of this retained revision")] = 0,
        output: Output = "table", config_center: Addr = DEFAULT_ADDR) -> None:
    """Show one key (or every key under a prefix) with its revisions."""

    def action(client: ConfigClient) -> None:
        if prefix:
            result = client.range(key, revision=revision)
            _print_kvs(result.kvs, output, f"{key}* at revision {result.revision}")
            return
        kv = client.get(key, revision=revision)
        if kv is None:
            when = f" at revision {revision}" if revision else ""
            _err.print(f"[red]error NOT_FOUND[/red]: key {key!r} does not exist{when}")
            raise typer.Exit(1)
        if output == "json":
            print(json.dumps(_kv_json(kv)))
        else:
            _print_kvs([kv], output, key)

    _run(config_center, action)


def _report_write(result: PutResult, key: str, output: str) -> None:
    if not result.succeeded:
        raise PreconditionFailed(f"key {key!r} is at revision {result.current_mod_revision}; "
                                 "nothing was written")
    if output == "json":
        print(json.dumps({"key": key, "revision": result.revision}))
    else:
        _out.print(f"{key} written at revision {result.revision}")


@config_app.command("set")
def set_(key: str,
         value: Annotated[str, typer.Argument(help="the value; '-' reads it from stdin")],
         if_revision: Annotated[int | None, typer.Option(
             help="write only if the key is at this revision (0 = only if absent)")] = None,
         lease: Annotated[int, typer.Option(help="attach the key to this lease")] = 0,
         output: Output = "table", config_center: Addr = DEFAULT_ADDR) -> None:
    """Write a key (compare-and-set with --if-revision)."""
    data = sys.stdin.buffer.read() if value == "-" else value.encode()
    _run(config_center, lambda client: _report_write(
        client.put(key, data, expected_revision=if_revision, lease=lease), key, output))


@config_app.command()
def delete(key: str,
           if_revision: Annotated[int | None, typer.Option(
               help="delete only if the key is at this revision")] = None,
           config_center: Addr = DEFAULT_ADDR) -> None:
    """Delete a key."""

    def action(client: ConfigClient) -> None:
        result = client.delete(key, expected_revision=if_revision)
        if not result.succeeded:
            raise PreconditionFailed(f"key {key!r} is at revision {result.current_mod_revision}")
        _out.print(f"{key} deleted at revision {result.revision}" if result.deleted
                   else f"{key} did not exist")

    _run(config_center, action)


@config_app.command()
def watch(prefix: str,
          from_revision: Annotated[int, typer.Option(
              help="replay changes from this revision (0 = only new changes)")] = 0,
          count: Annotated[int, typer.Option(help="stop after this many events (0 = never)")] = 0,
          output: Output = "table", config_center: Addr = DEFAULT_ADDR) -> None:
    """Print every change under PREFIX as it happens (Ctrl-C to stop)."""

    def action(client: ConfigClient) -> None:
        seen = 0
        with client.watch(prefix, start_revision=from_revision) as changes:
            since = f" from revision {from_revision}" if from_revision else ""
            if changes.wait_established(WATCH_ACK_S):
                _err.print(f"watching {prefix}{since} for changes (Ctrl-C to stop)",
                           highlight=False, style="dim")
            else:
                _err.print(f"waiting for the config center {config_center} to accept the watch "
                           f"of {prefix}{since} (Ctrl-C to stop)", highlight=False, style="dim")
            for event in changes:
                row = _event_json(event)
                if output == "json":
                    print(json.dumps(row), flush=True)
                else:
                    _out.print(f"{row['revision']:>8} {row['type']:<6} {row['key']} "
                               f"{row['value'] if event.type == 'PUT' else ''}", highlight=False)
                seen += 1
                if count and seen >= count:
                    return

    try:
        _run(config_center, action)
    except KeyboardInterrupt:
        raise typer.Exit(130) from None  # 128 + SIGINT, like every other command


@config_app.command()
def history(key: str, limit: Annotated[int, typer.Option(help="last N changes (0 = all)")] = 0,
            output: Output = "table", config_center: Addr = DEFAULT_ADDR) -> None:
    """Show the retained changes of a key, oldest first."""

    def action(client: ConfigClient) -> None:
        events = client.history(key, limit)
        if output == "json":
            print(json.dumps([_event_json(e) for e in events]))
            return
        table = Table(title=f"history of {key}")
        for column in ("revision", "type", "value", "version"):
            table.add_column(column)
        for event in events:
            row = _event_json(event)
            table.add_row(str(event.revision), event.type, str(row["value"]),
                          str(event.kv.version))
        _out.print(table)

    _run(config_center, action)


@config_app.command()
def rollback(key: str, revision: Annotated[int, typer.Argument(
                 help="restore the value the key had at this revision")],
             output: Output = "table", config_center: Addr = DEFAULT_ADDR) -> None:
    """Write again the value a key had at an earlier revision."""
    _run(config_center, lambda client: _report_write(
        client.rollback(key, revision), key, output))


@config_app.command()
def effective(cluster: Annotated[str, typer.Option(help="cluster name")] = "",
              broker_group: Annotated[str, typer.Option(help="broker group name")] = "",
              broker: Annotated[str, typer.Option(help="broker name")] = "",
              output: Output = "table", config_center: Addr = DEFAULT_ADDR) -> None:
    """Show the effective settings (cluster < broker group < broker) and where each came from."""

    def action(client: ConfigClient) -> None:
        result = client.effective_config(cluster=cluster, broker_group=broker_group,
                                         broker=broker)
        rows = [vars(s) for s in result.settings.values()]
        if output == "json":
            print(json.dumps({"revision": result.revision, "settings": rows}))
            return
        table = Table(title=f"effective configuration at revision {result.revision}")
        for column in ("name", "value", "scope", "source_key"):
            table.add_column(column)
        for row in rows:
            table.add_row(*(str(row[c]) for c in ("name", "value", "scope", "source_key")))
        _out.print(table)

    _run(config_center, action)
