"""`tidemq dlq list|requeue GROUP`: a consumer group's dead letters (`%DLQ%<group>`)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Annotated

import typer
from tidemq.client.cli_common import (
    GroupArg,
    OutputOpt,
    body_text,
    emit_json,
    expected_errors,
    globals_of,
    iso,
    json_mode,
    message_json,
    out,
    table,
)

if TYPE_CHECKING:  # the client is imported by the commands that use it (cli_common)
    from tidemq.client.dead_letters import DeadLetters

dlq_app = typer.Typer(no_args_is_help=True,
                      help="Dead letters of a consumer group: messages that failed more than "
                           "the group's retry_max_times; list them and re-drive them.")
LimitOpt = Annotated[int, typer.Option("--limit", min=1, help="at most this many messages")]


@contextmanager
def _dlq(ctx: typer.Context, group: str) -> Iterator[DeadLetters]:
    from tidemq.client.dead_letters import DeadLetters

    g = globals_of(ctx)
    with expected_errors(), DeadLetters(g.namesrv, group, timeout=g.timeout) as dlq:
        yield dlq


@dlq_app.command("list")
def list_(ctx: typer.Context, group: GroupArg, limit: LimitOpt = 100,
          output: OutputOpt = None) -> None:
    """Dead letters not yet re-driven by `requeue --all`, oldest first."""
    from tidemq.common import record

    with _dlq(ctx, group) as dlq:
        messages = dlq.list(limit)
    if json_mode(ctx, output):
        return emit_json([{**message_json(m), "origin_topic": m.origin_topic,
                           "origin_msg_id": m.properties.get(record.PROP_ORIGIN_MESSAGE_ID, ""),
                           "first_failure_ms": int(m.properties.get(
                               record.PROP_FIRST_FAILURE_MS, 0) or 0)} for m in messages])
    out.print(table(f"Dead letters of {group}", [
        "msg id", "origin topic", "reconsumed", "first failure", "stored", "body"], [
        [m.msg_id, m.origin_topic, m.reconsume_times,
         iso(int(m.properties.get(record.PROP_FIRST_FAILURE_MS, 0) or 0)),
         iso(m.store_timestamp), body_text(m)] for m in messages]))


@dlq_app.command("requeue")
def requeue(ctx: typer.Context, group: GroupArg,
            msg_ids: Annotated[list[str] | None, typer.Argument(
                help="msg ids from `dlq list` (or --all)", show_default=False)] = None,
            all_: Annotated[bool, typer.Option("--all", help="every listed dead letter; a "
                                               "second run does not send them again")] = False,
            limit: LimitOpt = 1000, output: OutputOpt = None) -> None:
    """Send dead letters back to their original topic with reconsume_times 0."""
    if bool(msg_ids) == all_:
        raise typer.BadParameter("give msg ids or --all (not both)")
    with _dlq(ctx, group) as dlq:
        done = dlq.requeue_all(limit) if all_ else dlq.requeue_ids(msg_ids or [])
    if json_mode(ctx, output):
        return emit_json([{"msg_id": r.msg_id, "topic": r.topic, "broker_name": r.broker_name,
                           "queue_id": r.queue_id, "queue_offset": r.queue_offset}
                          for r in done])
    out.print(f"[green]re-driven[/green] {len(done)} message(s) of {group}")
    for r in done:
        out.print(f"  {r.msg_id} -> {r.topic} on {r.broker_name}, queue {r.queue_id} "
                  f"offset {r.queue_offset}")
