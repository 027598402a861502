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
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from tidemq.client.cli_common import Output as OutputMode
from tidemq.client.cli_common import err, expected_errors, json_mode, table
from tidemq.client.defaults import DEFAULT_CONFIG_CENTER

if TYPE_CHECKING:  # the client is imported by the commands that use it (cli_common)
    from tidemq.configclient.client import ConfigClient, Event, KeyValue, PutResult

config_app = typer.Typer(
    name="config", no_args_is_help=True,
    help="Read, write, watch and roll back keys in the config center (topics, groups, "
         "scoped settings).")

Addr = Annotated[str, typer.Option(
    "--config-center", envvar="TIDEMQ_CONFIG_CENTER",
    help="config-center address(es), host:port[,host:port]")]
Output = Annotated[OutputMode | None, typer.Option(
    "--output", "-o", help="table, wide or json (default: the global --output)",
    show_default=False)]
DEFAULT_ADDR = DEFAULT_CONFIG_CENTER
WATCH_ACK_S = 5.0  # how long `watch` waits for the server's acknowledgement before saying so

_out = Console(highlight=False, soft_wrap=True)  # tables fit themselves (cli_common)


def _json(ctx: typer.Context, output: str | None) -> bool:
    """This command's -o, else the global one (`tidemq -o json config ...`)."""
    return json_mode(ctx, output)


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
    """Every config command's call: the CLI's one error printer (`error CODE: sentence`,
    exit 1; Ctrl-C exits 130)."""
    from tidemq.configclient.client import ConfigClient

    with expected_errors(), ConfigClient(addr) as client:
        action(client)


def _print_kvs(kvs: list[KeyValue], as_json: bool, title: str) -> None:
    if as_json:
        print(json.dumps([_kv_json(kv) for kv in kvs]))
        return
    _out.print(table(title, ["key", "value", "mod rev", "version", "lease"], [
        [kv.key, _kv_json(kv)["value"], kv.mod_revision, kv.version, kv.lease or ""]
        for kv in kvs]))


@config_app.command()
def get(ctx: typer.Context, key: str,
        prefix: Annotated[bool, typer.Option("--prefix", help="list every key under KEY")] = False,
        revision: Annotated[int, typer.Option(help="read as of this retained revision")] = 0,
        output: Output = None, config_center: Addr = DEFAULT_ADDR) -> None:
    """Show one key (or every key under a prefix) with its revisions."""

    def action(client: ConfigClient) -> None:
        if prefix:
            result = client.range(key, revision=revision)
            _print_kvs(result.kvs, _json(ctx, output), f"{key}* at revision {result.revision}")
            return
        kv = client.get(key, revision=revision)
        if kv is None:
            from tidemq.common.errors import NotFound

            when = f" at revision {revision}" if revision else ""
            raise NotFound(f"key {key!r} does not exist{when}")
        if _json(ctx, output):
            print(json.dumps(_kv_json(kv)))
        else:
            _print_kvs([kv], False, key)

    _run(config_center, action)


def _report_write(result: PutResult, key: str, as_json: bool) -> None:
    if not result.succeeded:
        from tidemq.common.errors import PreconditionFailed

        raise PreconditionFailed(f"key {key!r} is at revision {result.current_mod_revision}; "
                                 "nothing was written")
    if as_json:
        print(json.dumps({"key": key, "revision": result.revision}))
    else:
        _out.print(f"{key} written at revision {result.revision}")


@config_app.command("set")
def set_(ctx: typer.Context, key: str,
         value: Annotated[str, typer.Argument(help="the value; '-' reads it from stdin")],
         if_revision: Annotated[int | None, typer.Option(
             help="write only if the key is at this revision (0 = only if absent)")] = None,
         lease: Annotated[int, typer.Option(help="attach the key to this lease")] = 0,
         output: Output = None, config_center: Addr = DEFAULT_ADDR) -> None:
    """Write a key (compare-and-set with --if-revision)."""
    data = _stdin_value() if value == "-" else value.encode()
    _run(config_center, lambda client: _report_write(
        client.put(key, data, expected_revision=if_revision, lease=lease), key,
        _json(ctx, output)))


def _stdin_value() -> bytes:
    """What `echo 12 | tidemq config set KEY -` means: the value without the line's end."""
    data = sys.stdin.buffer.read()
    return data.removesuffix(b"\n").removesuffix(b"\r")


@config_app.command()
def delete(ctx: typer.Context, key: str,
           if_revision: Annotated[int | None, typer.Option(
               help="delete only if the key is at this revision")] = None,
           output: Output = None, config_center: Addr = DEFAULT_ADDR) -> None:
    """Delete a key."""

    def action(client: ConfigClient) -> None:
        from tidemq.common.errors import NotFound, PreconditionFailed

        result = client.delete(key, expected_revision=if_revision)
        if not result.succeeded:
            raise PreconditionFailed(f"key {key!r} is at revision {result.current_mod_revision}")
        if not result.deleted:
            raise NotFound(f"key {key!r} does not exist; nothing was deleted")
        if _json(ctx, output):
            print(json.dumps({"key": key, "revision": result.revision}))
        else:
            _out.print(f"{key} deleted at revision {result.revision}")

    _run(config_center, action)


@config_app.command()
def watch(ctx: typer.Context, prefix: str,
          from_revision: Annotated[int, typer.Option(
              help="replay changes from this revision (0 = only new changes)")] = 0,
          count: Annotated[int, typer.Option(help="stop after this many events (0 = never)")] = 0,
          output: Output = None, config_center: Addr = DEFAULT_ADDR) -> None:
    """Print every change under PREFIX as it happens (Ctrl-C to stop)."""

    def action(client: ConfigClient) -> None:
        seen = 0
        with client.watch(prefix, start_revision=from_revision) as changes:
            since = f" from revision {from_revision}" if from_revision else ""
            if changes.wait_established(WATCH_ACK_S):
                err.print(f"watching {prefix}{since} for changes (Ctrl-C to stop)",
                           highlight=False, style="dim")
            else:
                err.print(f"waiting for the config center {config_center} to accept the watch "
                           f"of {prefix}{since} (Ctrl-C to stop)", highlight=False, style="dim")
            for event in changes:
                row = _event_json(event)
                if _json(ctx, output):
                    print(json.dumps(row), flush=True)
                else:
                    _out.print(f"{row['revision']:>8} {row['type']:<6} {row['key']} "
                               f"{row['value'] if event.type == 'PUT' else ''}", highlight=False)
                seen += 1
                if count and seen >= count:
                    return

    _run(config_center, action)  # Ctrl-C: 130, as everywhere


@config_app.command()
def history(ctx: typer.Context, key: str,
            limit: Annotated[int, typer.Option(help="last N changes (0 = all)")] = 0,
            output: Output = None, config_center: Addr = DEFAULT_ADDR) -> None:
    """Show the retained changes of a key, oldest first."""

    def action(client: ConfigClient) -> None:
        events = client.history(key, limit)
        if _json(ctx, output):
            print(json.dumps([_event_json(e) for e in events]))
            return
        _out.print(table(f"history of {key}", ["revision", "type", "value", "version"], [
            [event.revision, event.type, _event_json(event)["value"], event.kv.version]
            for event in events]))

    _run(config_center, action)


@config_app.command()
def rollback(ctx: typer.Context, key: str, revision: Annotated[int, typer.Argument(
                 help="restore the value the key had at this revision")],
             output: Output = None, config_center: Addr = DEFAULT_ADDR) -> None:
    """Write again the value a key had at an earlier revision."""
    _run(config_center, lambda client: _report_write(
        client.rollback(key, revision), key, _json(ctx, output)))


@config_app.command()
def effective(ctx: typer.Context,
              cluster: Annotated[str, typer.Option(help="cluster name")] = "",
              broker_group: Annotated[str, typer.Option(help="broker group name")] = "",
              broker: Annotated[str, typer.Option(help="broker name")] = "",
              output: Output = None, config_center: Addr = DEFAULT_ADDR) -> None:
    """Show the effective settings (cluster < broker group < broker) and where each came from."""

    def action(client: ConfigClient) -> None:
        result = client.effective_config(cluster=cluster, broker_group=broker_group,
                                         broker=broker)
        rows = [vars(s) for s in result.settings.values()]
        if _json(ctx, output):
            print(json.dumps({"revision": result.revision, "settings": rows}))
            return
        columns = ["name", "value", "scope", "source_key"]
        _out.print(table(f"effective configuration at revision {result.revision}", columns,
                         [[row[c] for c in columns] for row in rows]))

    _run(config_center, action)
