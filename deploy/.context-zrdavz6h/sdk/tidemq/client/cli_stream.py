"""`tidemq send` and `tidemq consume`: the producer and pull consumer on the command line."""

from __future__ import annotations

import base64
import binascii
import json
import os
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from tidemq.client.cli_common import (
    OutputOpt,
    TopicArg,
    body_text,
    emit_json,
    err,
    expected_errors,
    globals_of,
    iso,
    json_mode,
    message_json,
    out,
    progress,
    table,
)
from tidemq.common import delays

if TYPE_CHECKING:  # the clients are imported by the commands that use them (cli_common)
    from tidemq.client.consumer import PullConsumer
    from tidemq.client.message import MessageExt, MessageQueue

CONSUME_GROUP = "tidemq-cli"
FOLLOW_POLL_S = 1.0   # long-poll hold per queue while following; Ctrl-C waits at most this


def _property(value: str) -> tuple[str, str]:
    name, sep, prop = value.partition("=")
    if not sep or not name:
        raise typer.BadParameter(f"{value!r} must look like name=value")
    return name, prop


def send(
    ctx: typer.Context, topic: TopicArg,
    body: Annotated[str | None, typer.Argument(help="message body (omit with --file)")] = None,
    file: Annotated[Path | None, typer.Option(
        "--file", "-f", help="send one message per line of this file ('-' = stdin); any "
                             "bytes, UTF-8 or not", allow_dash=True)] = None,
    raw: Annotated[bool, typer.Option(
        "--raw", help="with --file: the whole file is one message, byte for byte")] = False,
    base64_body: Annotated[bool, typer.Option(
        "--base64", help="BODY (or each line of --file) is base64: send the decoded bytes")
    ] = False,
    tag: Annotated[str, typer.Option("--tag", "-t", help="message tag")] = "",
    key: Annotated[list[str] | None, typer.Option("--key", "-k", help="key (repeatable)")] = None,
    prop: Annotated[list[str] | None, typer.Option(
        "--property", "-p", help="user property name=value (repeatable)")] = None,
    delay: Annotated[str | None, typer.Option(
        "--delay", help="deliver this long from now, e.g. 250ms, 10s, 5m, 2h (an exact "
                        "time; docs/scheduled.md)")] = None,
    delay_level: Annotated[int, typer.Option(
        "--delay-level", help="RocketMQ delay level 1..18 (1s 5s 10s 30s 1m ... 2h)")] = 0,
    deliver_at: Annotated[str | None, typer.Option(
        "--deliver-at", help="deliver at this time: epoch ms or ISO 8601 "
                             "(2026-11-24T08:00:00Z)")] = None,
    output: OutputOpt = None,
) -> None:
    """Send a message (or every line of --file, or a whole file with --raw) and print where
    each was stored. With --delay, --delay-level or --deliver-at it stays invisible until
    then."""
    from tidemq.client.message import Message
    from tidemq.client.producer import Producer
    from tidemq.common.errors import InvalidArgument

    if (body is None) == (file is None):
        raise typer.BadParameter("give either BODY or --file, not both or neither")
    deliver_at_ms = _deliver_at_ms(delay, deliver_at, delay_level)
    if raw and file is None:
        raise typer.BadParameter("--raw goes with --file", param_hint="--raw")
    properties = dict(_property(p) for p in prop or [])
    bodies = _bodies(body, file, raw=raw, base64_body=base64_body)
    g = globals_of(ctx)
    with expected_errors():
        if not bodies:
            raise InvalidArgument(f"{file} has no non-empty line: nothing to send",
                                  code="MESSAGE_BODY_EMPTY")
        messages = [Message(topic, b, tags=tag, keys=key or [], properties=properties,
                            delay_level=delay_level, deliver_at_ms=deliver_at_ms)
                    for b in bodies]
        with Producer(g.namesrv, send_timeout=g.timeout) as producer:
            results = []
            for start in range(0, len(messages), 256):
                results += producer.send_many(messages[start:start + 256]) \
                    if len(messages) > 1 else [producer.send(messages[0])]
                if len(messages) > 256:
                    progress(f"sent {len(results)}/{len(messages)}")
    scheduled = messages[0].scheduled   # recallable until due: `message recall`
    if json_mode(ctx, output):
        return emit_json([{"status": r.status.name, "msg_id": r.msg_id, "unique_id": r.unique_id,
                           "broker_name": r.broker_name, "queue_id": r.queue_id,
                           "queue_offset": r.queue_offset,
                           **({"recall_handle": r.recall_handle(topic)} if scheduled else {})}
                          for r in results])
    out.print(table("Sent", ["status", "msg id", "broker", "queue", "offset"]
                    + (["recall handle"] if scheduled else []), [
        [r.status.name, r.msg_id, r.broker_name, r.queue_id, r.queue_offset]
        + ([r.recall_handle(topic)] if scheduled else []) for r in results[-20:]]))
    if len(results) > 20:
        out.print(f"... {len(results)} messages sent; the last 20 are shown")


def recall(ctx: typer.Context,
           handle: Annotated[str, typer.Argument(
               help="the recall handle `tidemq send --delay ...` printed")],
           output: OutputOpt = None) -> None:
    """Take back a delayed message before it is delivered (refused once it is due)."""
    from tidemq.client.producer import Producer

    g = globals_of(ctx)
    with expected_errors(), Producer(g.namesrv, send_timeout=g.timeout) as producer:
        delivery_ms = producer.recall(handle)
    if json_mode(ctx, output):
        return emit_json({"recalled": True, "delivery_ms": delivery_ms})
    out.print(f"[green]recalled[/green]: it would have been delivered at {iso(delivery_ms)}")


def _deliver_at_ms(delay: str | None, deliver_at: str | None, delay_level: int) -> int:
    """The exact delivery time --delay or --deliver-at ask for (0: none)."""
    if sum(bool(x) for x in (delay, deliver_at, delay_level)) > 1:
        raise typer.BadParameter("give one of --delay, --delay-level and --deliver-at")
    if delay:
        try:
            return int(time.time() * 1000) + delays.parse_duration_ms(delay)
        except ValueError as exc:
            raise typer.BadParameter(str(exc), param_hint="--delay") from None
    if not deliver_at:
        return 0
    if deliver_at.isdigit():
        return int(deliver_at)
    try:
        moment = datetime.fromisoformat(deliver_at.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(f"{deliver_at!r} is neither epoch ms nor an ISO 8601 time",
                                 param_hint="--deliver-at") from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # a local time, as the shell user means it
    return int(moment.timestamp() * 1000)


def _bodies(body: str | None, file: Path | None, *, raw: bool,
            base64_body: bool) -> list[bytes]:
    """Message bodies as bytes: the argument as the shell gave it (os.fsencode keeps bytes
    that are not UTF-8), or the file's lines (or whole content) read as bytes."""
    if file is None:
        chunks = [os.fsencode(body or "")]
    else:
        try:
            data = (typer.get_binary_stream("stdin").read() if str(file) == "-"
                    else file.read_bytes())
        except OSError as exc:
            raise typer.BadParameter(f"cannot read {file}: {exc.strerror}",
                                     param_hint="--file") from None
        chunks = [data] if raw else [line for line in data.splitlines() if line]
    if not base64_body:
        return chunks
    try:
        return [base64.b64decode(chunk, validate=True) for chunk in chunks]
    except binascii.Error as exc:
        raise typer.BadParameter(f"not base64: {exc}", param_hint="--base64") from None


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


def consume(
    ctx: typer.Context, topic: TopicArg,
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
    sql: Annotated[str | None, typer.Option(
        "--sql", help="SQL92 filter over the message properties, evaluated by the broker, "
                      "e.g. \"amount > 100 AND region IN ('eu')\" (docs/filters.md); "
                      "excludes --tags")] = None,
    output: OutputOpt = None,
) -> None:
    """Print messages pulled from a topic's queues. Starts at the end of each queue (only new
    messages, like kafka-console-consumer) unless --from-beginning or --offset is given;
    without --follow it stops once it has read up to where the queues were at start. Offsets
    are not committed."""
    from tidemq.client.consumer import PullConsumer
    from tidemq.common.errors import InvalidArgument

    if offset is not None and queue is None:
        raise typer.BadParameter("--offset needs --queue (offsets are per queue)")
    if offset is not None and from_beginning:
        raise typer.BadParameter("--offset and --from-beginning exclude each other")
    if sql is not None and tag_expression.strip() not in ("", "*"):
        raise typer.BadParameter("--sql and --tags exclude each other (TAGS can be used in SQL)")
    selector = (sql, "SQL92") if sql is not None else (tag_expression, "TAG")
    as_json = json_mode(ctx, output)
    g = globals_of(ctx)
    with expected_errors(), PullConsumer(g.namesrv, consumer_group=CONSUME_GROUP,
                                 timeout=g.timeout) as consumer:
        queues = [mq for mq in consumer.fetch_queues(topic)
                  if (broker is None or mq.broker_name == broker)
                  and (queue is None or mq.queue_id == queue)]
        if not queues:
            raise InvalidArgument(f"topic {topic!r} has no queue matching --broker/--queue",
                                  code="QUEUE_NOT_FOUND")
        positions = _start_offsets(consumer, queues, offset, from_beginning)
        ends = _start_offsets(consumer, queues, None, False) if not follow else {}
        if follow:  # stderr, so `-o json` output stays one message per line
            if sql is not None:
                shown = f" matching {sql}"
            elif tag_expression.strip() in ("", "*"):
                shown = ""
            else:
                shown = f" tagged {tag_expression}"
            err.print(f"[dim]following {len(positions)} queue(s) of {topic}: waiting for new "
                      f"messages{shown} (Ctrl-C to stop)[/dim]")
        printed = _pump(consumer, positions, ends, follow=follow, max_messages=max_messages,
                        selector=selector, as_json=as_json)
    if not as_json:
        err.print(f"[dim]{printed} message(s)[/dim]")


def _pump(consumer: PullConsumer, positions: dict[MessageQueue, int],
          ends: dict[MessageQueue, int], *, follow: bool, max_messages: int,
          selector: tuple[str, str], as_json: bool) -> int:
    """Round-robin pulls over the queues; prints messages; returns how many it printed.

    While following, a round that found nothing makes the next round's first pull a long
    poll (held by the broker until a message arrives), so an idle tail costs no busy loop.
    `selector` is (expression, expression type: TAG or SQL92).
    """
    expression, expression_type = selector
    printed, idle = 0, False
    while positions and (not max_messages or printed < max_messages):
        found_any = False
        for index, mq in enumerate(list(positions)):
            limit = min(32, max_messages - printed) if max_messages else 32
            if limit <= 0:
                break
            hold = FOLLOW_POLL_S if follow and idle and index == 0 else 0.0
            result = consumer.pull(mq, positions[mq], limit, tag_expression=expression,
                                   expression_type=expression_type, long_poll=hold)
            for message in result.messages[:limit]:
                _print_message(message, as_json)
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


def _print_message(message: MessageExt, as_json: bool) -> None:
    if as_json:
        print(json.dumps(message_json(message)), flush=True)
        return
    where = f"{message.broker_name}#{message.queue_id}@{message.queue_offset}"
    labels = " ".join(filter(None, [f"tags={message.tags}" if message.tags else "",
                                    f"keys={','.join(message.keys)}" if message.keys else ""]))
    out.print(f"[cyan]{where}[/cyan] [dim]{labels}[/dim] {body_text(message)}")

