"""`tidemq txn send|end`: transactional messages on the command line (docs/transactions.md).

The CLI process does not stay to answer check-backs: a message sent with `--end none` is
settled by `tidemq txn end` (with the ids `send` printed), by another producer of the group,
or discarded after the broker's last check-back."""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Annotated

import typer
from tidemq.client.cli_common import (
    OutputOpt,
    TopicArg,
    emit_json,
    expected_errors,
    globals_of,
    json_mode,
    out,
)

if TYPE_CHECKING:  # the clients are imported by the commands that use them (cli_common)
    from tidemq.client.transaction import TransactionResolution

txn_app = typer.Typer(no_args_is_help=True,
                      help="Transactional messages: send a half message and commit or roll it "
                           "back (docs/transactions.md).")
GroupOpt = Annotated[str, typer.Option("--producer-group", "-g",
                                       help="producer group the broker checks back with")]


class End(enum.Enum):
    commit = "commit"
    rollback = "rollback"
    none = "none"


def _resolution(end: End) -> TransactionResolution:
    from tidemq.client.transaction import TransactionResolution

    return {End.commit: TransactionResolution.COMMIT,
            End.rollback: TransactionResolution.ROLLBACK}[end]


@txn_app.command("send")
def send(ctx: typer.Context, topic: TopicArg,
         body: Annotated[str, typer.Argument(help="message body (UTF-8)")],
         end: Annotated[End, typer.Option(
             "--end", help="commit or roll back right after; none = leave it open")] = End.commit,
         producer_group: GroupOpt = "tidemq-cli-tx",
         key: Annotated[list[str] | None, typer.Option("--key", "-k", help="key")] = None,
         output: OutputOpt = None) -> None:
    """Store BODY as a half message of TOPIC, then end the transaction as --end says."""
    from tidemq.client.message import Message
    from tidemq.client.transaction import TransactionProducer

    g = globals_of(ctx)
    with expected_errors(), TransactionProducer(g.namesrv, producer_group=producer_group,
                                                send_timeout=g.timeout) as producer:
        prepared = producer.prepare(Message(topic, body.encode(), keys=key or []))
        state = (producer.end(prepared, _resolution(end)).state if end is not End.none
                 else "PENDING")
    answer = {"transaction_id": prepared.unique_id, "msg_id": prepared.msg_id,
              "broker_name": prepared.broker_name, "state": state}
    if json_mode(ctx, output):
        return emit_json(answer)
    out.print(" ".join(f"{name}={value}" for name, value in answer.items()))


@txn_app.command("end")
def end_(ctx: typer.Context, topic: TopicArg,
         msg_id: Annotated[str, typer.Argument(help="msg id `txn send` printed")],
         transaction_id: Annotated[str, typer.Argument(help="its transaction id")],
         broker_name: Annotated[str, typer.Argument(help="its broker name")],
         resolution: Annotated[End, typer.Argument(help="commit or rollback")],
         producer_group: GroupOpt = "tidemq-cli-tx", output: OutputOpt = None) -> None:
    """Commit or roll back an open transaction (a repeat is answered, not applied twice)."""
    if resolution is End.none:
        raise typer.BadParameter("commit or rollback", param_hint="RESOLUTION")
    from tidemq.client.message import SendResult, SendStatus
    from tidemq.client.transaction import TransactionProducer

    g = globals_of(ctx)
    prepared = SendResult(SendStatus.SEND_OK, msg_id, transaction_id, broker_name, 0, 0)
    with expected_errors(), TransactionProducer(g.namesrv, producer_group=producer_group,
                                                send_timeout=g.timeout) as producer:
        ended = producer.end(prepared, _resolution(resolution), topic=topic)
    if json_mode(ctx, output):
        return emit_json({"state": ended.state, "already_resolved": ended.already_resolved})
    out.print(f"state={ended.state}" + (" (already)" if ended.already_resolved else ""))
