"""`tidemq`: administer a TideMQ cluster from the shell (like kafka-topics / mqadmin).

    tidemq cluster list
    tidemq topic create orders --queues 8
    tidemq send orders '{"id": 1}' --tag created --key order-1
    tidemq consume orders --from-beginning --max 10
    tidemq group describe billing -o json

Every command prints a rich table, or JSON with `--output json`. Expected failures print one
red line `error CODE: sentence` and exit with status 1; bad usage exits with status 2.
"""

from __future__ import annotations

import base64
import json
import os
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from tidemq.client.admin import DEFAULT_CONFIG_CENTER, Admin
from tidemq.client.cli_config import config_app
from tidemq.client.consumer import PullConsumer
from tidemq.client.message import Message, MessageExt, MessageQueue
from tidemq.client.producer import Producer
from tidemq.common.errors import InvalidArgument, TideMQError

DEFAULT_NAMESRV = "127.0.0.1:9876;127.0.0.1:9877"
CONSUME_GROUP = "tidemq-cli"
FOLLOW_POLL_S = 1.0   # long-poll hold per queue while following; Ctrl-C waits at most this

out = Console(highlight=False, soft_wrap=True)
err = Console(stderr=True, highlight=False)


class Output(StrEnum):
    table = "table"
    json = "json"


@dataclass
class Globals:
    namesrv: str
    config_center: str
    output: Output
    timeout: float


app = typer.Typer(
    name="tidemq", no_args_is_help=True, rich_markup_mode=None,
    help="Administer a TideMQ cluster: topics, messages, consumer groups, offsets and "
         "config-center keys. Addresses come from --namesrv / --config-center or the "
         "TIDEMQ_NAMESRV_ADDRS / TIDEMQ_CONFIG_CENTER environment variables.")
cluster_app = typer.Typer(no_args_is_help=True, help="Brokers registered with the name servers.")
topic_app = typer.Typer(no_args_is_help=True,
                        help="Create, list, describe and delete topics (defined in config-center).")
group_app = typer.Typer(no_args_is_help=True,
                        help="Consumer groups: members, assignment, committed offsets and lag.")
offset_app = typer.Typer(no_args_is_help=True, help="Find queue offsets by time.")
message_app = typer.Typer(no_args_is_help=True, help="Look up stored messages by id or key.")
app.add_typer(cluster_app, name="cluster")
app.add_typer(topic_app, name="topic")
app.add_typer(group_app, name="group")
app.add_typer(offset_app, name="offset")
app.add_typer(message_app, name="message")
app.add_typer(config_app, name="config")

OutputOpt = Annotated[Output | None, typer.Option(
    "--output", "-o", help="table (default) or json; overrides the global --output")]
TIME_HELP = ("ISO 8601 (2026-11-22T05:00:00Z; no zone = UTC), milliseconds since the epoch, "
             "'now', or relative like -15m / -2h / -1d")


@app.callback()
def root(
    ctx: typer.Context,
    namesrv: Annotated[str, typer.Option(
        "--namesrv", envvar="TIDEMQ_NAMESRV_ADDRS",
        help="name server addresses, host:port;host:port")] = DEFAULT_NAMESRV,
    config_center: Annotated[str, typer.Option(
        "--config-center", envvar="TIDEMQ_CONFIG_CENTER",
        help="config-center address(es), host:port[,host:port]")] = DEFAULT_CONFIG_CENTER,
    output: Annotated[Output, typer.Option(
        "--output", "-o", help="table for people, json for scripts")] = Output.table,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0.1, help="deadline of each remote call, in seconds")] = 5.0,
) -> None:
    ctx.obj = Globals(namesrv, config_center, output, timeout)
    # `tidemq config ...` reads its address from this variable: keep one global flag.
    os.environ["TIDEMQ_CONFIG_CENTER"] = config_center


def main() -> None:
    app(prog_name="tidemq")


# -- plumbing ------------------------------------------------------------------------------

def _globals(ctx: typer.Context) -> Globals:
    return ctx.find_root().obj


def _json_mode(ctx: typer.Context, output: Output | None) -> bool:
    return (output or _globals(ctx).output) == Output.json


@contextmanager
def _admin(ctx: typer.Context) -> Iterator[Admin]:
    g = _globals(ctx)
    with _errors(), Admin(g.namesrv, config_center=g.config_center, timeout=g.timeout) as admin:
        yield admin


@contextmanager
def _errors() -> Iterator[None]:
    """Expected failures become one red line and exit status 1, never a traceback."""
    try:
        yield
    except TideMQError as exc:
        err.print(f"[red]error {exc.code}[/red]: {exc.message}")
        raise typer.Exit(1) from None
    except KeyboardInterrupt:
        raise typer.Exit(130) from None


def _emit_json(value: Any) -> None:
    print(json.dumps(value, indent=2, default=str))


def _progress(message: str) -> None:
    err.print(f"[dim]{message}[/dim]")


def _table(title: str, columns: list[str], rows: list[list[Any]]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("-" if cell is None else str(cell) for cell in row))
    return table


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


def _iso(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


def message_json(message: MessageExt) -> dict[str, Any]:
    try:
        body: dict[str, str] = {"body": message.body.decode("utf-8")}
    except UnicodeDecodeError:
        body = {"body_base64": base64.b64encode(message.body).decode()}
    return {
        "msg_id": message.msg_id, "unique_id": message.unique_id, "topic": message.topic,
        "broker_name": message.broker_name, "queue_id": message.queue_id,
        "queue_offset": message.queue_offset, "tags": message.tags, "keys": message.keys,
        "properties": message.user_properties, "born_timestamp": message.born_timestamp,
        "store_timestamp": message.store_timestamp, "reconsume_times": message.reconsume_times,
        **body,
    }


def _body_text(message: MessageExt) -> str:
    row = message_json(message)
    return row.get("body", f"<{len(message.body)} bytes, not UTF-8>")


# -- cluster -------------------------------------------------------------------------------

@cluster_app.command("list")
def cluster_list(ctx: typer.Context, output: OutputOpt = None) -> None:
    """Every broker registered with the name servers: cluster, group, id, role, address."""
    with _admin(ctx) as admin:
        brokers = admin.cluster_info()
    if _json_mode(ctx, output):
        return _emit_json([{**vars(b), "role": b.role} for b in brokers])
    now = int(time.time() * 1000)
    out.print(_table("Brokers", ["cluster", "broker", "id", "role", "address", "last seen"], [
        [b.cluster, b.broker_name, b.broker_id, b.role, b.addr,
         f"{(now - b.last_update_ms) / 1000:.1f} s ago" if b.last_update_ms else None]
        for b in brokers]))


# -- topics --------------------------------------------------------------------------------

@topic_app.command("create")
def topic_create(
    ctx: typer.Context, name: Annotated[str, typer.Argument(help="topic name, [A-Za-z0-9_%|-]")],
    queues: Annotated[int, typer.Option("--queues", "-q", min=1, max=1024,
                                        help="queues per broker group")] = 8,
    order: Annotated[bool, typer.Option("--order", help="mark as an ordered topic")] = False,
    no_wait: Annotated[bool, typer.Option(
        "--no-wait", help="return once defined; don't wait for a broker to serve it")] = False,
    output: OutputOpt = None,
) -> None:
    """Define a topic in config-center and wait until the name servers route it."""
    with _admin(ctx) as admin:
        route = admin.create_topic(name, queues, order=order, wait=not no_wait,
                                   progress=_progress)
    brokers = sorted({q.broker_name for q in route.queues}) if route else []
    if _json_mode(ctx, output):
        return _emit_json({"topic": name, "queues": queues, "order": order, "brokers": brokers})
    served = f"; served by {', '.join(brokers)}" if brokers else ""
    out.print(f"[green]created[/green] topic {name} with {queues} queues{served}")


@topic_app.command("list")
def topic_list(ctx: typer.Context, output: OutputOpt = None) -> None:
    """Topics defined in config-center and the broker groups that serve each."""
    with _admin(ctx) as admin:
        topics = admin.list_topics()
    if _json_mode(ctx, output):
        return _emit_json([{**vars(t), "broker_names": list(t.broker_names)} for t in topics])
    out.print(_table("Topics", ["topic", "queues", "perm", "order", "brokers"], [
        [t.name, t.queues, t.perm, "yes" if t.order else "no",
         ", ".join(t.broker_names) or "(not routed yet)"] for t in topics]))


@topic_app.command("describe")
def topic_describe(ctx: typer.Context, name: str, output: OutputOpt = None) -> None:
    """Route and per-queue offsets: min, max (next to write) and stored message count."""
    with _admin(ctx) as admin:
        description = admin.describe_topic(name)
    route = description.route
    if _json_mode(ctx, output):
        return _emit_json({
            "topic": name,
            "brokers": {b.broker_name: {"cluster": b.cluster, "addrs": b.addrs}
                        for b in route.brokers.values()},
            "queues": [{**vars(q), "messages": q.messages} for q in description.queues]})
    out.print(_table(f"Topic {name}: route", ["broker", "cluster", "read", "write", "perm",
                                              "master"], [
        [q.broker_name, route.brokers[q.broker_name].cluster if q.broker_name in route.brokers
         else None, q.read_queue_nums, q.write_queue_nums, q.perm,
         route.brokers[q.broker_name].master_addr if q.broker_name in route.brokers else None]
        for q in route.queues]))
    out.print(_table("Queues", ["broker", "queue", "min offset", "max offset", "messages"], [
        [q.broker_name, q.queue_id, q.min_offset, q.max_offset, q.messages]
        for q in description.queues]))


@topic_app.command("delete")
def topic_delete(
    ctx: typer.Context, name: str,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="don't ask for confirmation")] = False,
) -> None:
    """Delete a topic definition; brokers stop serving it (stored messages age out)."""
    if not yes:
        typer.confirm(f"Delete topic {name!r}?", abort=True)
    with _admin(ctx) as admin:
        admin.delete_topic(name, progress=_progress)
    out.print(f"[green]deleted[/green] topic {name}")


# -- send / consume ------------------------------------------------------------------------

def _property(value: str) -> tuple[str, str]:
    name, sep, prop = value.partition("=")
    if not sep or not name:
        raise typer.BadParameter(f"{value!r} must look like name=value")
    return name, prop


@app.command("send")
def send(
    ctx: typer.Context, topic: str,
    body: Annotated[str | None, typer.Argument(help="message body (omit with --file)")] = None,
    file: Annotated[Path | None, typer.Option(
        "--file", "-f", help="send one message per line of this file ('-' = stdin)",
        allow_dash=True)] = None,
    tag: Annotated[str, typer.Option("--tag", "-t", help="message tag")] = "",
    key: Annotated[list[str] | None, typer.Option("--key", "-k", help="key (repeatable)")] = None,
    prop: Annotated[list[str] | None, typer.Option(
        "--property", "-p", help="user property name=value (repeatable)")] = None,
    output: OutputOpt = None,
) -> None:
    """Send a message (or every line of --file) and print where each was stored."""
    if (body is None) == (file is None):
        raise typer.BadParameter("give either BODY or --file, not both or neither")
    properties = dict(_property(p) for p in prop or [])
    if file is None:
        bodies = [body.encode()]
    else:
        text = typer.get_text_stream("stdin").read() if str(file) == "-" else file.read_text()
        bodies = [line.encode() for line in text.splitlines() if line]
    messages = [Message(topic, b, tags=tag, keys=key or [], properties=properties) for b in bodies]
    g = _globals(ctx)
    with _errors(), Producer(g.namesrv, send_timeout=g.timeout) as producer:
        results = []
        for start in range(0, len(messages), 256):
            results += producer.send_many(messages[start:start + 256]) \
                if len(messages) > 1 else [producer.send(messages[0])]
            if len(messages) > 256:
                _progress(f"sent {len(results)}/{len(messages)}")
    if _json_mode(ctx, output):
        return _emit_json([{"status": r.status.name, "msg_id": r.msg_id, "unique_id": r.unique_id,
                            "broker_name": r.broker_name, "queue_id": r.queue_id,
                            "queue_offset": r.queue_offset} for r in results])
    out.print(_table("Sent", ["status", "msg id", "broker", "queue", "offset"], [
        [r.status.name, r.msg_id, r.broker_name, r.queue_id, r.queue_offset]
        for r in results[-20:]]))
    if len(results) > 20:
        out.print(f"... {len(results)} messages sent; the last 20 are shown")


def _start_offsets(consumer: PullConsumer, queues: list[MessageQueue], offset: int | None,
                   from_beginning: bool) -> dict[MessageQueue, int]:
    if offset is not None:
        return {mq: offset for mq in queues}
    starts = {}
    for broker_name in sorted({mq.broker_name for mq in queues}):
        bounds = consumer.queue_offsets(queues[0].topic, broker_name)
        for mq in queues:
            if mq.broker_name == broker_name and mq.queue_id in bounds:
                low, high = bounds[mq.queue_id]
                starts[mq] = low if from_beginning else high
    return starts


@app.command("consume")
def consume(
    ctx: typer.Context, topic: str,
    broker: Annotated[str | None, typer.Option(help="only this broker group")] = None,
    queue: Annotated[int | None, typer.Option(min=0, help="only this queue id")] = None,
    offset: Annotated[int | None, typer.Option(
        min=0, help="start at this queue offset (needs --queue)")] = None,
    from_beginning: Annotated[bool, typer.Option(
        "--from-beginning", help="start at the oldest stored message")] = False,
    max_messages: Annotated[int, typer.Option(
        "--max", "-n", min=0, help="stop after this many messages (0 = no limit)")] = 0,
    follow: Annotated[bool, typer.Option(
        "--follow", "-F", help="keep waiting for new messages until Ctrl-C or --max")] = False,
    tag_expression: Annotated[str, typer.Option(
        "--tags", help="tag filter, e.g. 'created || paid'")] = "*",
    output: OutputOpt = None,
) -> None:
    """Print messages pulled from a topic's queues. Starts at the end of each queue (only new
    messages, like kafka-console-consumer) unless --from-beginning or --offset is given;
    without --follow it stops once it has read up to where the queues were at start. Offsets
    are not committed."""
    if offset is not None and queue is None:
        raise typer.BadParameter("--offset needs --queue (offsets are per queue)")
    if offset is not None and from_beginning:
        raise typer.BadParameter("--offset and --from-beginning exclude each other")
    json_mode = _json_mode(ctx, output)
    g = _globals(ctx)
    with _errors(), PullConsumer(g.namesrv, consumer_group=CONSUME_GROUP,
                                 timeout=g.timeout) as consumer:
        queues = [mq for mq in consumer.fetch_queues(topic)
                  if (broker is None or mq.broker_name == broker)
                  and (queue is None or mq.queue_id == queue)]
        if not queues:
            raise InvalidArgument(f"topic {topic!r} has no queue matching --broker/--queue",
                                  code="QUEUE_NOT_FOUND")
        positions = _start_offsets(consumer, queues, offset, from_beginning)
        ends = _start_offsets(consumer, queues, None, False) if not follow else {}
        printed = _pump(consumer, positions, ends, follow=follow, max_messages=max_messages,
                        tag_expression=tag_expression, json_mode=json_mode)
    if not json_mode:
        err.print(f"[dim]{printed} message(s)[/dim]")


def _pump(consumer: PullConsumer, positions: dict[MessageQueue, int],
          ends: dict[MessageQueue, int], *, follow: bool, max_messages: int,
          tag_expression: str, json_mode: bool) -> int:
    """Round-robin pulls over the queues; prints messages; returns how many it printed.

    While following, a round that found nothing makes the next round's first pull a long
    poll (held by the broker until a message arrives), so an idle tail costs no busy loop.
    """
    printed, idle = 0, False
    while positions and (not max_messages or printed < max_messages):
        found_any = False
        for index, mq in enumerate(list(positions)):
            limit = min(32, max_messages - printed) if max_messages else 32
            if limit <= 0:
                break
            hold = FOLLOW_POLL_S if follow and idle and index == 0 else 0.0
            result = consumer.pull(mq, positions[mq], limit, tag_expression=tag_expression,
                                   long_poll=hold)
            for message in result.messages[:limit]:
                _print_message(message, json_mode)
                printed += 1
            found_any = found_any or bool(result.messages)
            positions[mq] = result.next_offset
            if not follow and positions[mq] >= ends.get(mq, 0):
                del positions[mq]
        idle = not found_any
        if follow and len(positions) > 1:  # rotate so each queue gets the long poll in turn
            first = next(iter(positions))
            positions[first] = positions.pop(first)
    return printed


def _print_message(message: MessageExt, json_mode: bool) -> None:
    if json_mode:
        print(json.dumps(message_json(message)), flush=True)
        return
    where = f"{message.broker_name}#{message.queue_id}@{message.queue_offset}"
    labels = " ".join(filter(None, [f"tags={message.tags}" if message.tags else "",
                                    f"keys={','.join(message.keys)}" if message.keys else ""]))
    out.print(f"[cyan]{where}[/cyan] [dim]{labels}[/dim] {_body_text(message)}")


# -- groups --------------------------------------------------------------------------------

@group_app.command("list")
def group_list(ctx: typer.Context, output: OutputOpt = None) -> None:
    """Consumer groups known to the coordinators, with state and member count."""
    with _admin(ctx) as admin:
        groups = admin.group_list()
    if _json_mode(ctx, output):
        return _emit_json([vars(g) for g in groups])
    out.print(_table("Consumer groups", ["group", "state", "protocol", "generation", "members",
                                         "coordinator"],
                     [[g.group_id, g.state, g.protocol_name, g.generation_id, g.members,
                       g.coordinator] for g in groups]))


@group_app.command("describe")
def group_describe(ctx: typer.Context, group: str, output: OutputOpt = None) -> None:
    """Members and their queues, and per queue the committed offset, max offset and lag."""
    with _admin(ctx) as admin:
        d = admin.group_describe(group)
    if _json_mode(ctx, output):
        return _emit_json({
            "group": d.group_id, "coordinator": d.coordinator, "state": d.state,
            "protocol": d.protocol_name, "generation": d.generation_id, "leader": d.leader_id,
            "members": [{"member_id": m.member_id, "client_id": m.client_id,
                         "client_host": m.client_host, "topics": m.topics,
                         "queues": [str(q) for q in m.queues]}
                        for m in d.members],
            "offsets": [{**vars(o), "lag": o.lag} for o in d.offsets],
            "total_lag": d.total_lag})
    out.print(f"group [bold]{d.group_id}[/bold]: {d.state}, generation {d.generation_id}, "
              f"protocol {d.protocol_name or '-'}, coordinator {d.coordinator}")
    out.print(_table("Members", ["member", "client", "host", "topics", "queues"], [
        [m.member_id + (" (leader)" if m.member_id == d.leader_id else ""), m.client_id,
         m.client_host, ", ".join(m.topics), " ".join(str(q) for q in m.queues)]
        for m in d.members]))
    out.print(_table(f"Offsets (total lag {d.total_lag})", [
        "topic", "broker", "queue", "committed", "max offset", "lag", "member"], [
        [o.topic, o.broker_name, o.queue_id, o.committed, o.max_offset, o.lag,
         o.member_id or None] for o in d.offsets]))


@group_app.command("reset-offsets")
def group_reset_offsets(
    ctx: typer.Context, group: str, topic: str,
    to_time: Annotated[str, typer.Option("--to-time", help=TIME_HELP)],
    output: OutputOpt = None,
) -> None:
    """Move the group's committed offsets of TOPIC to the first message stored at or after
    --to-time, backwards or forwards. Stop the group's consumers first."""
    timestamp_ms = parse_time(to_time)
    with _admin(ctx) as admin:
        entries = admin.reset_group_offsets(group, topic, timestamp_ms, progress=_progress)
    _print_offsets(ctx, output, f"{group} reset to {_iso(timestamp_ms)}", entries)


def _print_offsets(ctx: typer.Context, output: Output | None, title: str, entries) -> None:
    if _json_mode(ctx, output):
        return _emit_json([vars(e) for e in entries])
    out.print(_table(title, ["topic", "broker", "queue", "offset"],
                     [[e.topic, e.broker_name, e.queue_id, e.offset] for e in entries]))


@offset_app.command("for-time")
def offset_for_time(
    ctx: typer.Context, topic: str,
    at: Annotated[str, typer.Option("--time", help=TIME_HELP)],
    output: OutputOpt = None,
) -> None:
    """Per queue, the offset of the first message stored at or after --time."""
    timestamp_ms = parse_time(at)
    with _admin(ctx) as admin:
        entries = admin.offset_for_timestamp(topic, timestamp_ms)
    _print_offsets(ctx, output, f"{topic} at {_iso(timestamp_ms)}", entries)


# -- messages ------------------------------------------------------------------------------

@message_app.command("view")
def message_view(ctx: typer.Context,
                 msg_id: Annotated[str, typer.Argument(help="offset message id (32 hex)")],
                 output: OutputOpt = None) -> None:
    """Show one message by its offset message id (as printed by `tidemq send`)."""
    with _admin(ctx) as admin:
        message = admin.view_message(msg_id)
    row = message_json(message)
    if _json_mode(ctx, output):
        return _emit_json(row)
    row["born_timestamp"] = _iso(message.born_timestamp)
    row["store_timestamp"] = _iso(message.store_timestamp)
    table = Table(title=f"Message {message.msg_id}", title_justify="left", show_header=False)
    table.add_column("field", style="bold")
    table.add_column("value", overflow="fold")
    for name, value in row.items():
        table.add_row(name, json.dumps(value) if isinstance(value, list | dict) else str(value))
    out.print(table)


@message_app.command("query")
def message_query(
    ctx: typer.Context, topic: str, key: str,
    begin: Annotated[str | None, typer.Option(help="stored at or after; " + TIME_HELP)] = None,
    end: Annotated[str | None, typer.Option(help="stored before (default now)")] = None,
    max_results: Annotated[int, typer.Option("--max", min=1, max=1000,
                                             help="at most this many")] = 32,
    output: OutputOpt = None,
) -> None:
    """Messages of TOPIC carrying KEY (every broker group is asked), oldest first."""
    begin_ms = parse_time(begin) if begin else 0
    end_ms = parse_time(end) if end else 0
    with _admin(ctx) as admin:
        messages = admin.query_by_key(topic, key, begin_ms, end_ms, max_results)
    if _json_mode(ctx, output):
        return _emit_json([message_json(m) for m in messages])
    out.print(_table(f"{topic} key={key}", ["stored", "msg id", "broker", "queue", "offset",
                                            "tags", "body"], [
        [_iso(m.store_timestamp), m.msg_id, m.broker_name, m.queue_id, m.queue_offset,
         m.tags, _body_text(m)[:80]] for m in messages]))
