"""`tidemq acl ...`: users and ACL rules in the config center (docs/security.md).

    tidemq acl user add alice --secret-key s3cret
    tidemq acl user add ops --secret-key s3cret --admin
    tidemq acl rule add orders-pub --user alice --resource topic:orders --action PUB
    tidemq acl rule add no-vpn --user '*' --resource 'topic:*' --action PUB --action SUB \\
        --decision deny --source-ip 10.8.0.0/16
    tidemq acl rule list -o json
    tidemq acl token --ttl-s 3600     # a bearer token for the HTTP gateway, from your credentials
    tidemq acl rekey                  # users stored again under the current encryption key

Changes reach every service through its ACL watch, without a restart. With auth on, these
commands need an admin credential (TIDEMQ_ACCESS_KEY / TIDEMQ_SECRET_KEY).
"""

from __future__ import annotations

import secrets
from typing import TYPE_CHECKING, Annotated

import typer
from tidemq.client.cli_common import OutputOpt, emit_json, expected_errors, json_mode, out, table
from tidemq.common.auth.acl import AclError, Rule, User
from tidemq.common.auth.bearer import DEFAULT_TTL_S, make_token
from tidemq.common.auth.signature import Credentials

if TYPE_CHECKING:  # config-center's client is imported by the commands that use it (cli_common)
    from tidemq.configclient.acl import AclAdmin

AccessKeyArg = Annotated[str, typer.Argument(help="the user's access key", show_default=False)]
RuleIdArg = Annotated[str, typer.Argument(help="the rule's id (its key in the config center)",
                                          show_default=False)]

acl_app = typer.Typer(no_args_is_help=True, help="Users (access key, secret key, admin) and "
                      "ACL rules (resource, actions, allow/deny, source IPs), live.")
user_app = typer.Typer(no_args_is_help=True, help="Users that sign requests.")
rule_app = typer.Typer(no_args_is_help=True, help="Who may PUB/SUB/ADMIN which topic or group.")
acl_app.add_typer(user_app, name="user")
acl_app.add_typer(rule_app, name="rule")


def _admin(ctx: typer.Context) -> AclAdmin:
    from tidemq.configclient.acl import AclAdmin
    from tidemq.configclient.client import ConfigClient

    root = ctx.find_root().obj
    return AclAdmin(ConfigClient(root.config_center, timeout=root.timeout))


@user_app.command("add")
def user_add(ctx: typer.Context, access_key: AccessKeyArg,
             secret_key: Annotated[str, typer.Option(
                 help="the secret ('' = generate one and print it once)")] = "",
             admin: Annotated[bool, typer.Option("--admin", help="a super user")] = False,
             output: OutputOpt = None) -> None:
    """Create or replace a user."""
    generated = not secret_key
    user = User(access_key, secret_key or secrets.token_urlsafe(24), admin)
    with expected_errors():
        _admin(ctx).add_user(user)
    if json_mode(ctx, output):
        emit_json({"access_key": access_key, "admin": admin,
                   **({"secret_key": user.secret_key} if generated else {})})
        return
    out.print(f"user {access_key} saved{' (admin)' if admin else ''}")
    if generated:
        out.print(f"secret key (shown once): {user.secret_key}")


@user_app.command("remove")
def user_remove(ctx: typer.Context, access_key: AccessKeyArg) -> None:
    """Delete a user (its rules stay; they match nobody until the key is reused)."""
    from tidemq.common.errors import NotFound

    with expected_errors():
        if not _admin(ctx).remove_user(access_key):
            raise NotFound(f"user {access_key!r} does not exist")
    out.print(f"user {access_key} removed")


@user_app.command("list")
def user_list(ctx: typer.Context, output: OutputOpt = None) -> None:
    """Users (never their secrets)."""
    with expected_errors():
        users = sorted(_admin(ctx).table().users.values(), key=lambda u: u.access_key)
    if json_mode(ctx, output):
        emit_json([{"access_key": u.access_key, "admin": u.admin} for u in users])
        return
    out.print(table("users", ["access key", "admin"],
                    [[u.access_key, "yes" if u.admin else ""] for u in users]))


@rule_app.command("add")
def rule_add(ctx: typer.Context, rule_id: RuleIdArg,
             user: Annotated[str, typer.Option(help="access key, or '*' for every user")],
             resource: Annotated[str, typer.Option(
                 help="topic:NAME, group:NAME or cluster:NAME; NAME exact, PREFIX* or *")],
             action: Annotated[list[str], typer.Option(help="PUB, SUB or ADMIN (repeat)")],
             decision: Annotated[str, typer.Option(help="allow or deny")] = "allow",
             source_ip: Annotated[list[str] | None, typer.Option(
                 help="CIDR the caller must come from (repeat; none = any)")] = None) -> None:
    """Create or replace a rule."""
    from tidemq.common.errors import InvalidArgument

    with expected_errors():
        try:
            rule = Rule.create(rule_id, user, resource, action, decision, source_ip or [])
        except AclError as exc:
            raise InvalidArgument(str(exc)) from None
        _admin(ctx).add_rule(rule)
    out.print(f"rule {rule_id} saved: {decision} {'/'.join(sorted(rule.actions))} on "
              f"{resource} for {user}")


@rule_app.command("remove")
def rule_remove(ctx: typer.Context, rule_id: RuleIdArg) -> None:
    """Delete a rule."""
    from tidemq.common.errors import NotFound

    with expected_errors():
        if not _admin(ctx).remove_rule(rule_id):
            raise NotFound(f"rule {rule_id!r} does not exist")
    out.print(f"rule {rule_id} removed")


@rule_app.command("list")
def rule_list(ctx: typer.Context, output: OutputOpt = None) -> None:
    """Rules, in evaluation-independent order (deny wins; no allow = denied)."""
    with expected_errors():
        rules = sorted(_admin(ctx).table().rules, key=lambda r: r.id)
    rows = [{"id": r.id, "user": r.user, "resource": r.resource,
             "actions": sorted(r.actions), "decision": str(r.decision),
             "source_ips": list(r.source_ips)} for r in rules]
    if json_mode(ctx, output):
        emit_json(rows)
        return
    out.print(table("ACL rules", ["id", "user", "resource", "actions", "decision", "source ips"],
                    [[r["id"], r["user"], r["resource"], ",".join(r["actions"]), r["decision"],
                      ",".join(r["source_ips"]) or "any"] for r in rows]))


@acl_app.command()
def rekey(ctx: typer.Context) -> None:
    """Store every user's secret again under the config centers' current encryption key
    (after adding a new key first in their key ring; also encrypts users stored before
    encryption was on). Secrets are never printed."""
    with expected_errors():
        rewritten, changed = _admin(ctx).rekey()
    note = f" ({changed} changed meanwhile, already written under the current key)" \
        if changed else ""
    out.print(f"{rewritten} user(s) rewritten under the config centers' current key{note}")


@acl_app.command()
def token(access_key: Annotated[str, typer.Option(
              envvar="TIDEMQ_ACCESS_KEY", help="whose token (default: TIDEMQ_ACCESS_KEY)")],
          secret_key: Annotated[str, typer.Option(
              envvar="TIDEMQ_SECRET_KEY", help="its secret (default: TIDEMQ_SECRET_KEY)",
              show_default=False)],
          ttl_s: Annotated[int, typer.Option(help="seconds the token is valid")] = DEFAULT_TTL_S
          ) -> None:
    """Print a bearer token for the HTTP gateway (`Authorization: Bearer <token>`), derived
    from the credentials; computed locally, nothing is stored."""
    if not access_key or not secret_key:
        raise typer.BadParameter("give --access-key and --secret-key (or the TIDEMQ_ variables)")
    print(make_token(Credentials(access_key, secret_key), ttl_s))
