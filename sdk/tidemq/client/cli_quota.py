"""`tidemq quota ...`: client quotas in the config center (docs/quotas.md), as Kafka's
`kafka-configs --entity-type users|clients --alter --add-config ...`.

    tidemq quota set --client orders-svc producer_byte_rate=1048576 request_rate=200
    tidemq quota set --user alice consumer_byte_rate=4194304
    tidemq quota set --default-client producer_byte_rate=10485760   # each client id's own
    tidemq quota list -o json
    tidemq quota delete --client orders-svc request_rate    # one quota
    tidemq quota delete --user alice                         # all of alice's
    tidemq quota throttled                                   # who is throttled now, per broker

Brokers and HTTP gateways follow the quotas live: a change applies to the next request. With
auth on, these commands need an admin credential (TIDEMQ_ACCESS_KEY / TIDEMQ_SECRET_KEY).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer
from tidemq.client.cli_common import (
    OutputOpt,
    admin_session,
    emit_json,
    expected_errors,
    json_mode,
    out,
    table,
)
from tidemq.common.quotas import CLIENT, DEFAULT, QUOTA_NAMES, UNITS, USER, shown

if TYPE_CHECKING:  # config-center's client is imported by the commands that use it
    from tidemq.configclient.quotas import QuotaAdmin

quota_app = typer.Typer(no_args_is_help=True, help="Producer/consumer byte-rate and request-rate "
                        "quotas per ACL user and per client id, with defaults, live.")

UserOpt = Annotated[str, typer.Option("--user", help="an ACL user's access key")]
ClientOpt = Annotated[str, typer.Option("--client", help="a client id (the SDK's client_id)")]
DefaultUserOpt = Annotated[bool, typer.Option(
    "--default-user", help="the default of every user without a quota of their own")]
DefaultClientOpt = Annotated[bool, typer.Option(
    "--default-client", help="the default of every client id without a quota of its own")]


def _admin(ctx: typer.Context) -> QuotaAdmin:
    from tidemq.configclient.client import ConfigClient
    from tidemq.configclient.quotas import QuotaAdmin

    root = ctx.find_root().obj
    return QuotaAdmin(ConfigClient(root.config_center, timeout=root.timeout))


def _entity(user: str, client: str, default_user: bool, default_client: bool) -> tuple[str, str]:
    chosen = [(USER, user)] if user else []
    chosen += [(CLIENT, client)] if client else []
    chosen += [(USER, DEFAULT)] if default_user else []
    chosen += [(CLIENT, DEFAULT)] if default_client else []
    if len(chosen) != 1:
        from tidemq.common.errors import InvalidArgument

        raise InvalidArgument("name exactly one entity: --user NAME, --client ID, "
                              "--default-user or --default-client")
    return chosen[0]


def _describe(kind: str, name: str) -> str:
    return f"{kind} {'default' if name == DEFAULT else repr(name)}"


def _shown(values: dict[str, float]) -> str:
    return ", ".join(f"{q}={shown(v)} {UNITS[q]}" for q, v in sorted(values.items())) or "none"


@quota_app.command("set")
def quota_set(ctx: typer.Context,
              assignments: Annotated[list[str], typer.Argument(
                  help="NAME=VALUE: producer_byte_rate and consumer_byte_rate in bytes/s, "
                       "request_rate in requests/s", show_default=False)],
              user: UserOpt = "", client: ClientOpt = "",
              default_user: DefaultUserOpt = False, default_client: DefaultClientOpt = False,
              output: OutputOpt = None) -> None:
    """Set quotas of one entity (its other quotas stay)."""
    from tidemq.common.errors import InvalidArgument
    from tidemq.common.quotas import QuotaError, parse_assignment

    with expected_errors():
        kind, name = _entity(user, client, default_user, default_client)
        values: dict[str, float] = {}
        for text in assignments:
            try:
                quota, value = parse_assignment(text)
            except QuotaError as exc:
                raise InvalidArgument(str(exc)) from None
            values[quota] = value
        entry = _admin(ctx).set(kind, name, values)
    if json_mode(ctx, output):
        emit_json({"kind": kind, "name": name, "quotas": dict(entry.values)})
        return
    out.print(f"{_describe(kind, name)}: {_shown(dict(entry.values))}")


@quota_app.command("delete")
def quota_delete(ctx: typer.Context,
                 quotas: Annotated[list[str] | None, typer.Argument(
                     help="the quotas to delete (none: all of the entity's)",
                     show_default=False)] = None,
                 user: UserOpt = "", client: ClientOpt = "",
                 default_user: DefaultUserOpt = False,
                 default_client: DefaultClientOpt = False) -> None:
    """Delete quotas of one entity (then the next entity in precedence applies, if any)."""
    with expected_errors():
        kind, name = _entity(user, client, default_user, default_client)
        left = _admin(ctx).delete(kind, name, list(quotas or []))
    remaining = "deleted" if left is None else "now " + _shown(dict(left.values))
    out.print(f"{_describe(kind, name)}: {remaining}")


@quota_app.command("list")
def quota_list(ctx: typer.Context, output: OutputOpt = None) -> None:
    """Every entity with a quota, and its values."""
    with expected_errors():
        entries = _admin(ctx).list()
    if json_mode(ctx, output):
        emit_json([{"kind": e.kind, "name": e.name, "quotas": dict(e.values)} for e in entries])
        return
    out.print(table("quotas", ["entity", "name", *(f"{q} ({UNITS[q]})" for q in QUOTA_NAMES)],
                    [[e.kind, "(default)" if e.name == DEFAULT else e.name,
                      *(shown(e.values[q]) if q in e.values else "" for q in QUOTA_NAMES)]
                     for e in entries]))


@quota_app.command("throttled")
def quota_throttled(ctx: typer.Context, output: OutputOpt = None) -> None:
    """Who is throttled now on each broker: the entity, the quota, and how long its next
    request waits (its throttle time)."""
    with admin_session(ctx) as admin:
        rows, unanswered = admin.throttled()
    if json_mode(ctx, output):
        emit_json({"throttled": rows, "unanswered": unanswered})
        return
    out.print(table("throttled now", ["broker", "entity", "quota", "waits (ms)"],
                    [[r["broker_name"], r["entity"], r["quota"], str(r["owed_ms"])]
                     for r in rows]))
    for line in unanswered:
        out.print(f"[yellow]no answer[/yellow]: {line}")
