"""`tidemq group create|update|delete|definition` and `group list --defined`: subscription-group
definitions in config-center (`/tidemq/groups/<name>`), written with compare-and-set.

Brokers pick a change up from their watch within moments and enforce it without a restart:
`consume_enable=false` refuses the group's pulls, offset commits and joins.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer
from tidemq.client.cli_common import (
    GroupArg,
    OutputOpt,
    admin_session,
    emit_json,
    json_mode,
    out,
    table,
)

if TYPE_CHECKING:  # config-center's client is imported by the commands that use it (cli_common)
    from tidemq.configclient.groups import DefinedGroup

ConsumeOpt = Annotated[bool | None, typer.Option(
    "--consume/--no-consume", help="consume_enable: false refuses pulls, commits and joins",
    show_default=False)]
BroadcastOpt = Annotated[bool | None, typer.Option(
    "--broadcast/--no-broadcast", help="consume_broadcast_enable", show_default=False)]
# No typer min/max: the definition's own check answers, with INVALID_SUBSCRIPTION_GROUP and
# the same sentence as over HTTP, instead of a usage error in click's wording.
RetryTimesOpt = Annotated[int | None, typer.Option(
    "--retry-max-times", help="failures before the dead-letter queue (0..64)",
    show_default=False)]
RetryQueuesOpt = Annotated[int | None, typer.Option(
    "--retry-queue-nums", help="queues of the group's retry topic (1..64)",
    show_default=False)]
SetOpt = Annotated[list[str] | None, typer.Option(
    "--set", help="FIELD=VALUE (VALUE in JSON, e.g. consume_from_min_enable=false); repeatable",
    show_default=False)]
IfRevisionOpt = Annotated[int | None, typer.Option(
    "--if-revision", min=1, help="only if the definition is still at this revision",
    show_default=False)]


def _fields(consume: bool | None, broadcast: bool | None, retry_max_times: int | None,
            retry_queue_nums: int | None, assignments: list[str] | None) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for assignment in assignments or []:
        field, sep, raw = assignment.partition("=")
        if not sep or not field or field == "name":
            from tidemq.configclient.groups import FIELDS

            raise typer.BadParameter(
                f"{assignment!r}: use FIELD=VALUE with FIELD one of {', '.join(FIELDS[1:])}",
                param_hint="--set")
        try:
            values[field] = json.loads(raw)
        except ValueError:
            raise typer.BadParameter(f"{assignment!r}: VALUE must be JSON (true, 3, ...)",
                                     param_hint="--set") from None
    for field, value in (("consume_enable", consume), ("consume_broadcast_enable", broadcast),
                         ("retry_max_times", retry_max_times),
                         ("retry_queue_nums", retry_queue_nums)):
        if value is not None:
            values[field] = value
    return values


def _show(ctx: typer.Context, output, verb: str, defined: DefinedGroup) -> None:
    if json_mode(ctx, output):
        return emit_json({**defined.config.to_json(), "revision": defined.revision})
    out.print(f"[green]{verb}[/green] subscription group {defined.config.name} "
              f"(revision {defined.revision})")


def create(ctx: typer.Context, group: GroupArg, consume: ConsumeOpt = None,
           broadcast: BroadcastOpt = None, retry_max_times: RetryTimesOpt = None,
           retry_queue_nums: RetryQueuesOpt = None, assignments: SetOpt = None,
           output: OutputOpt = None) -> None:
    """Define a subscription group in config-center; unset fields take the defaults."""
    values = _fields(consume, broadcast, retry_max_times, retry_queue_nums, assignments)
    with admin_session(ctx) as admin:
        _show(ctx, output, "created", admin.create_group(group, **values))


def update(ctx: typer.Context, group: GroupArg, consume: ConsumeOpt = None,
           broadcast: BroadcastOpt = None, retry_max_times: RetryTimesOpt = None,
           retry_queue_nums: RetryQueuesOpt = None, assignments: SetOpt = None,
           if_revision: IfRevisionOpt = None, output: OutputOpt = None) -> None:
    """Change fields of a defined group (compare-and-set); brokers apply it live."""
    values = _fields(consume, broadcast, retry_max_times, retry_queue_nums, assignments)
    if not values:
        raise typer.BadParameter("nothing to change: give --consume/--no-consume, "
                                 "--broadcast/--no-broadcast, --retry-* or --set")
    with admin_session(ctx) as admin:
        _show(ctx, output, "updated", admin.update_group(group, values, if_revision=if_revision))


def delete(ctx: typer.Context, group: GroupArg, if_revision: IfRevisionOpt = None,
           yes: Annotated[bool, typer.Option("--yes", "-y", help="don't ask")] = False) -> None:
    """Remove a definition: the group then consumes with the defaults (auto-create) or is
    refused (brokers run with --auto-create-subscription-group false)."""
    if not yes:
        typer.confirm(f"Delete the definition of group {group!r}?", abort=True)
    with admin_session(ctx) as admin:
        admin.delete_group(group, if_revision=if_revision)
    out.print(f"[green]deleted[/green] subscription group {group}")


def list_defined(ctx: typer.Context, output) -> None:
    """Definitions in config-center (an invalid one with the reason brokers refuse it)."""
    from tidemq.configclient.groups import DefinedGroup

    with admin_session(ctx) as admin:
        listed = admin.group_definitions()
    valid = [d for d in listed if isinstance(d, DefinedGroup)]
    invalid = [d for d in listed if not isinstance(d, DefinedGroup)]
    if json_mode(ctx, output):
        return emit_json([{**d.config.to_json(), "revision": d.revision} for d in valid]
                         + [{"name": name, "invalid": why} for name, why in invalid])
    out.print(table("Subscription groups (config-center)", [
        "group", "consume", "broadcast", "retry max", "retry queues", "orderly", "revision"], [
        [d.config.name, d.config.consume_enable, d.config.consume_broadcast_enable,
         d.config.retry_max_times, d.config.retry_queue_nums,
         d.config.consume_message_orderly, d.revision] for d in valid]))
    for name, why in invalid:
        out.print(f"[red]invalid[/red] {name}: {why}")


def definition(ctx: typer.Context, group: GroupArg, output: OutputOpt = None) -> None:
    """What every master broker enforces for GROUP now (its definition or the defaults)."""
    from tidemq.configclient.groups import FIELDS

    with admin_session(ctx) as admin:
        in_force = admin.group_in_force(group)
    if json_mode(ctx, output):
        return emit_json({broker: {**config.to_json(), "defined": defined}
                          for broker, (config, defined) in in_force.items()})
    out.print(table(f"Group {group}: in force", [
        "broker", "source", *(f for f in FIELDS if f != "name")], [
        [broker, "definition" if defined else "defaults",
         *(v for k, v in config.to_json().items() if k != "name")]
        for broker, (config, defined) in in_force.items()]))

