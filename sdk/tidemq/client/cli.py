"""`tidemq`: administer a TideMQ cluster from the shell (like kafka-topics / mqadmin).

    tidemq cluster list
    tidemq topic create orders --queues 8 --config retention.ms=60000
    tidemq topic alter orders --config cleanup.policy=compact
    tidemq send orders '{"id": 1}' --tag created --key order-1
    tidemq consume orders --from-beginning --max 10
    tidemq group describe billing -o json

Every command prints a rich table, or JSON with `--output json`. Expected failures print one
red line `error CODE: sentence` and exit with status 1; bad usage exits with status 2.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Annotated

import typer
from rich.table import Table
from rich.text import Text
from tidemq.client import (
    cli_config_backup,
    cli_controlplane,
    cli_groups,
    cli_stream,
    client_tracing,
)
from tidemq.client.cli_acl import acl_app
from tidemq.client.cli_common import (
    TIME_HELP,
    Globals,
    GroupArg,
    OneLineErrors,
    Output,
    OutputOpt,
    TopicArg,
    admin_session,
    body_text,
    emit_json,
    err,
    iso,
    json_mode,
    message_json,
    out,
    parse_time,
    progress,
    table,
)
from tidemq.client.cli_config import config_app
from tidemq.client.cli_dlq import dlq_app
from tidemq.client.cli_quota import quota_app
from tidemq.client.cli_txn import txn_app
from tidemq.client.defaults import DEFAULT_CONFIG_CENTER

__all__ = ["app", "main", "parse_time"]

DEFAULT_NAMESRV = "127.0.0.1:9876;127.0.0.1:9877"
ConfigOpt = Annotated[list[str] | None, typer.Option(
    "--config", "-c", metavar="NAME=VALUE",
    help="a per-topic setting with Kafka's name, e.g. retention.ms=60000 (repeatable; "
         "docs/topics.md)")]
TABLE_BODY_CHARS = 200  # of a body in a table row; -o json has it whole

app = typer.Typer(
    name="tidemq", cls=OneLineErrors, no_args_is_help=True, rich_markup_mode=None, pretty_exceptions_enable=False,
    help="Administer a TideMQ cluster: topics, messages, consumer groups, offsets and "
         "config-center keys. Addresses come from --namesrv / --config-center or the "
         "TIDEMQ_NAMESRV_ADDRS / TIDEMQ_CONFIG_CENTER environment variables.")
cluster_app = typer.Typer(no_args_is_help=True,
                          help="Brokers registered with the name servers; the control plane "
                               "(config centers and their Redis).")
topic_app = typer.Typer(no_args_is_help=True,
                        help="Create, list, describe and delete topics (defined in config-center).")
group_app = typer.Typer(no_args_is_help=True,
                        help="Consumer groups: members, assignment, committed offsets and lag; "
                             "subscription-group definitions (config-center).")
offset_app = typer.Typer(no_args_is_help=True, help="Find queue offsets by time.")
message_app = typer.Typer(no_args_is_help=True,
                          help="Look up stored messages by id or key; recall a delayed one.")
broker_app = typer.Typer(no_args_is_help=True,
                         help="Replica groups: move leadership (docs/replication.md).")
app.add_typer(cluster_app, name="cluster")
app.add_typer(broker_app, name="broker")
app.add_typer(topic_app, name="topic")
app.add_typer(group_app, name="group")
app.add_typer(offset_app, name="offset")
app.add_typer(message_app, name="message")
config_app.command("export")(cli_config_backup.export)
config_app.command("import")(cli_config_backup.import_)
app.add_typer(config_app, name="config")
app.add_typer(dlq_app, name="dlq")
app.add_typer(txn_app, name="txn")
app.add_typer(acl_app, name="acl")
app.add_typer(quota_app, name="quota")



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
        "--output", "-o", help="table for people (fitted to the terminal), wide (every column "
        "in full) or json for scripts")] = Output.table,
    timeout: Annotated[float, typer.Option(
        "--timeout", min=0.1, help="deadline of each remote call, in seconds")] = 5.0,
) -> None:
    ctx.obj = Globals(namesrv, config_center, output, timeout)
    # `tidemq config ...` reads its address from this variable: keep one global flag. Restored
    # when the invocation ends, so embedding callers (tests, scripts) see no lasting change.
    previous = os.environ.get("TIDEMQ_CONFIG_CENTER")
    os.environ["TIDEMQ_CONFIG_CENTER"] = config_center
    ctx.call_on_close(lambda: _restore_env("TIDEMQ_CONFIG_CENTER", previous))
    # A command sends its last spans before it exits (nothing to do when it exported none).
    ctx.call_on_close(client_tracing.flush)


def _restore_env(name: str, value: str | None) -> None:
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = value


def main() -> None:
    # Ctrl-C exits 130 (128 + SIGINT) from anywhere, a prompt or a held pull included; click
    # would turn it into "Aborted!" and status 1, and each command would need its own guard.
    signal.signal(signal.SIGINT, _interrupted)
    # The command's spans go to the collector when one is known (client_tracing:
    # TIDEMQ_OTLP_ENDPOINT, or the .data/run/otlp-endpoint `make up` wrote). Here, not in the
    # callback: a program embedding the app (a test's CliRunner) never reads that file.
    client_tracing.for_command()
    try:
        app(prog_name="tidemq")
    except Exception as exc:  # a bug, not a user's mistake: still one line, never a traceback
        print(f"error INTERNAL_ERROR: {type(exc).__name__}: {exc} (a bug in tidemq: please "
              "report it with the command that caused it)", file=sys.stderr)
        sys.exit(1)


def _interrupted(signum, frame) -> None:
    print(file=sys.stderr)
    raise SystemExit(130)



app.command("send")(cli_stream.send)
app.command("consume")(cli_stream.consume)
message_app.command("recall")(cli_stream.recall)
group_app.command("create")(cli_groups.create)
group_app.command("update")(cli_groups.update)
group_app.command("delete")(cli_groups.delete)
group_app.command("definition")(cli_groups.definition)
cluster_app.command("control-plane")(cli_controlplane.control_plane)


# -- cluster -------------------------------------------------------------------------------

@cluster_app.command("list")
def cluster_list(ctx: typer.Context, output: OutputOpt = None) -> None:
    """Every broker registered with the name servers: cluster, group, id, role, address.

    \b
    The id is the replica id (0..n-1 in every group, whichever replica is master; the
    `-<id>` of its process broker-a-<id>), or the configured broker id without replication.
    -o json also has `broker_id`, the id routes know it by (0 = the master).
    See also: tidemq cluster control-plane (the config centers and their Redis)."""
    with admin_session(ctx) as admin:
        brokers = admin.cluster_info()
    if json_mode(ctx, output):
        return emit_json([{**vars(b), "id": b.id, "role": b.role} for b in brokers])
    now = int(time.time() * 1000)
    # Replication columns only where some broker replicates (keeps the table narrow otherwise).
    replicated = any(b.replica_id >= 0 for b in brokers)
    extra = ["epoch", "in sync", "lag bytes", "lag s", "incarnation"] if replicated else []
    out.print(table("Brokers", ["broker", "id", "role", "address", "cluster", "last seen",
                                *extra], [
        [b.broker_name, b.id, b.role, b.addr, b.cluster,
         f"{(now - b.last_update_ms) / 1000:.1f} s ago" if b.last_update_ms else None,
         *(_replication_cells(b) if replicated else [])]
        for b in brokers]))
    waiting = {b.broker_name: b.group_waiting_for for b in brokers if b.group_waiting_for}
    for name, replicas in sorted(waiting.items()):
        out.print(Text(f"{name} has no master: no live replica holds its confirmed offset; "
                       f"waiting for replica(s) {list(replicas)} to return (or `tidemq "
                       f"cluster elect --unclean {name}`, which loses what they held)"),
                  soft_wrap=False)   # a sentence: wrapped between words to the terminal


def short_incarnation(incarnation: str) -> str | None:
    """"<store id>:<start>" with the store id cut to 8 characters (enough to tell copies
    apart at a glance; -o json has it whole)."""
    if not incarnation:
        return None
    store_id, _, start = incarnation.partition(":")
    return f"{store_id[:8]}:{start}" if start else store_id[:8]


def _replication_cells(b) -> list:
    if b.replica_id < 0:
        return [None] * 5
    in_sync = None if b.in_sync is None else ("yes" if b.in_sync else
                                              "rebuilding" if b.rebuilding else "no")
    return [b.epoch, in_sync, b.lag_bytes,
            None if b.lag_s is None else f"{b.lag_s:.1f}", short_incarnation(b.incarnation)]


@broker_app.command("elect")
def broker_elect(
    ctx: typer.Context,
    group: Annotated[str, typer.Argument(help="replica group (broker name), e.g. broker-a")],
    replica: Annotated[int, typer.Option(
        "--replica", min=-1, help="make this in-sync replica the master (-1: the controller "
                                  "picks the most complete in-sync replica)")] = -1,
    output: OutputOpt = None,
) -> None:
    """Elect a new master for GROUP through the active controller (preferred-replica
    election). Only an in-sync replica can be chosen, so no acknowledged message is lost; the
    old master steps down and follows the new one."""
    with admin_session(ctx) as admin:
        state = admin.elect(group, replica)
    if json_mode(ctx, output):
        return emit_json(state)
    out.print(f"{group}: master is now replica {state.get('master', '?')} "
              f"(epoch {state.get('epoch', '?')}, in sync {state.get('in_sync', [])})")


@cluster_app.command("elect")
def cluster_elect(
    ctx: typer.Context,
    group: Annotated[str, typer.Argument(help="replica group (broker name), e.g. broker-a")],
    unclean: Annotated[bool, typer.Option(
        "--unclean", help="elect even a replica below the confirmed offset: acknowledged "
                          "messages may be lost")] = False,
    replica: Annotated[int, typer.Option(
        "--replica", min=-1, help="the replica to elect (-1: the controller picks)")] = -1,
    output: OutputOpt = None,
) -> None:
    """Elect a master for GROUP. Without --unclean, as `broker elect` (an in-sync replica
    holding the confirmed offset, nothing lost). With --unclean, for a group that waits for
    a replica that will never return (its disk is gone): the live replica with the largest
    log end becomes master alone in sync, and every acknowledged record above its log end is
    lost (the old master truncates them if it returns)."""
    with admin_session(ctx) as admin:
        if not unclean:
            state, lost = admin.elect(group, replica), 0
        else:
            state, lost = admin.elect_unclean(group, replica)
    if json_mode(ctx, output):
        return emit_json({**state, "unclean": unclean, "lost_bytes": lost})
    if unclean:
        out.print(f"WARNING: unclean election of {group}: up to {lost} bytes of acknowledged "
                  f"records above offset {state.get('confirmed_offset', '?')} may be lost")
    out.print(f"{group}: master is now replica {state.get('master', '?')} "
              f"(epoch {state.get('epoch', '?')}, in sync {state.get('in_sync', [])})")


# -- topics --------------------------------------------------------------------------------

@topic_app.command("create")
def topic_create(
    ctx: typer.Context, name: Annotated[str, typer.Argument(help="topic name, [A-Za-z0-9._%|-], not . or ..")],
    queues: Annotated[int, typer.Option("--queues", "-q", min=1, max=1024,
                                        help="queues per broker group")] = 8,
    order: Annotated[bool, typer.Option("--order", help="mark as an ordered topic")] = False,
    no_wait: Annotated[bool, typer.Option(
        "--no-wait", help="return once defined; don't wait for a broker to serve it")] = False,
    config: ConfigOpt = None,
    output: OutputOpt = None,
) -> None:
    """Define a topic in config-center and wait until the name servers route it."""
    from tidemq.configclient import topic_settings

    with admin_session(ctx) as admin:
        settings = topic_settings.parse_assignments(config or [])
        route = admin.create_topic(name, queues, order=order, wait=not no_wait,
                                   progress=progress, config=settings)
    brokers = sorted({q.broker_name for q in route.queues}) if route else []
    if json_mode(ctx, output):
        return emit_json({"name": name, "queues": queues, "order": order, "brokers": brokers,
                          "config": topic_settings.parse_settings(settings)})
    served = f"; served by {', '.join(brokers)}" if brokers else ""
    out.print(f"[green]created[/green] topic {name} with {queues} queues{served}")


@topic_app.command("list")
def topic_list(
    ctx: typer.Context, output: OutputOpt = None,
    show_all: Annotated[bool, typer.Option(
        "--all", "-a", help="also the brokers' own topics (retry, dead letters, schedule, "
                            "transactions, pop revive logs)")] = False,
) -> None:
    """Topics defined in config-center and the broker groups that serve each (the brokers'
    own topics with --all, as the console leaves them out)."""
    from tidemq.common.system_topics import is_system_topic

    with admin_session(ctx) as admin:
        every = admin.list_topics()
    topics = every if show_all else [t for t in every if not is_system_topic(t.name)]
    if json_mode(ctx, output):
        emit_json([{"name": t.name, "queues": t.queues, "perm": t.perm,
                    "order": t.order, "brokers": list(t.broker_names)} for t in topics])
    else:
        out.print(table("Topics", ["topic", "queues", "perm", "order", "brokers"], [
            [t.name, t.queues, t.perm, t.order,
             ", ".join(t.broker_names) or "(not routed yet)"] for t in topics]))
    if hidden := len(every) - len(topics):   # on stderr: a pipe or -o json gets the list only
        progress(f"{hidden} topic(s) of the brokers' own not listed; --all lists them")


@topic_app.command("alter")
def topic_alter(
    ctx: typer.Context, name: TopicArg, config: ConfigOpt = None,
    delete_config: Annotated[list[str] | None, typer.Option(
        "--delete-config", metavar="NAME",
        help="put a setting back to its default (repeatable)")] = None,
    output: OutputOpt = None,
) -> None:
    """Change per-topic settings live (brokers apply them as they see the definition)."""
    from tidemq.common import errors
    from tidemq.configclient.topic_settings import parse_assignments

    with admin_session(ctx) as admin:
        changes: dict[str, object] = dict(parse_assignments(config or []))
        changes.update({setting: None for setting in delete_config or []})
        if not changes:
            raise errors.InvalidArgument("nothing to change: give --config NAME=VALUE or "
                                         "--delete-config NAME", code="INVALID_TOPIC_CONFIG")
        effective = admin.alter_topic(name, changes)
    if json_mode(ctx, output):
        return emit_json({"name": name, "config": effective})
    out.print(f"[green]altered[/green] topic {name}")
    _print_config(name, effective)


def _print_config(name: str, config: dict[str, dict]) -> None:
    out.print(table(f"Topic {name}: config", ["setting", "value", "source"],
                    [[k, v["value"], v["source"]] for k, v in config.items()]))


@topic_app.command("describe")
def topic_describe(ctx: typer.Context, name: TopicArg, output: OutputOpt = None) -> None:
    """Route and per-queue offsets: min, max (next to write) and stored message count."""
    with admin_session(ctx) as admin:
        description = admin.describe_topic(name)
    route = description.route
    if json_mode(ctx, output):
        return emit_json({  # the HTTP gateway's shape (GET /v1/topics/{topic})
            "name": name,
            "brokers": [{"broker_name": q.broker_name,
                         "cluster": route.brokers[q.broker_name].cluster
                         if q.broker_name in route.brokers else "",
                         "addrs": {str(k): v for k, v in route.brokers[q.broker_name].addrs.items()}
                         if q.broker_name in route.brokers else {},
                         "read_queue_nums": q.read_queue_nums,
                         "write_queue_nums": q.write_queue_nums, "perm": q.perm}
                        for q in route.queues],
            "queues": [{**vars(q), "messages": q.messages} for q in description.queues],
            "config": description.config,
            "config_unavailable": description.config_unavailable})
    out.print(table(f"Topic {name}: route", ["broker", "cluster", "read", "write", "perm",
                                              "master"], [
        [q.broker_name, route.brokers[q.broker_name].cluster if q.broker_name in route.brokers
         else None, q.read_queue_nums, q.write_queue_nums, q.perm,
         route.brokers[q.broker_name].master_addr if q.broker_name in route.brokers else None]
        for q in route.queues]))
    out.print(table("Queues", ["broker", "queue", "min offset", "max offset", "messages"], [
        [q.broker_name, q.queue_id, q.min_offset, q.max_offset, q.messages]
        for q in description.queues]))
    if description.config:
        _print_config(name, description.config)
    elif description.config_unavailable:
        failure = description.config_unavailable
        err.print(Text(f"settings not shown: the config center did not answer "
                       f"({failure['code']}: {failure['detail']})"))


@topic_app.command("delete")
def topic_delete(
    ctx: typer.Context, name: TopicArg,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="don't ask for confirmation")] = False,
    keep_offsets: Annotated[bool, typer.Option(
        "--keep-offsets", help="keep the groups' committed offsets of the topic (group "
                               "describe then shows them as orphaned)")] = False,
) -> None:
    """Delete a topic and its messages (a topic created again under the name starts empty).
    The committed offsets of every group on it are dropped too, unless --keep-offsets."""
    if not yes:
        what = "" if keep_offsets else " and every group's committed offsets of it"
        typer.confirm(f"Delete topic {name!r}{what}?", abort=True)
    with admin_session(ctx) as admin:
        admin.delete_topic(name, progress=progress)
        out.print(f"[green]deleted[/green] topic {name}")
        if keep_offsets:
            return
        dropped = admin.delete_group_offsets(name)
    groups = sorted({g for names in dropped.values() for g in names})
    if groups:
        out.print(f"[green]dropped[/green] the committed offsets of {name} of "
                  f"{len(groups)} group(s): {', '.join(groups)}")


# -- groups --------------------------------------------------------------------------------

@group_app.command("list")
def group_list(ctx: typer.Context, output: OutputOpt = None,
               defined: Annotated[bool, typer.Option(
                   "--defined", help="list subscription-group definitions in config-center "
                                     "instead")] = False) -> None:
    """Every group that consumed: how (push: joined the coordinator; pop; pull: committed
    offsets without joining), whether it is defined in config-center, and for a push group
    its state and member count (--defined: the definitions in config-center)."""
    if defined:
        return cli_groups.list_defined(ctx, output)
    with admin_session(ctx) as admin:
        groups = admin.group_list()
    if json_mode(ctx, output):
        return emit_json([vars(g) for g in groups])
    out.print(table("Consumer groups", ["group", "type", "defined", "state", "protocol",
                                         "generation", "members", "coordinator"],
                     [[g.group_id, g.consume_type, "yes" if g.defined else "no",
                       g.state or None, g.protocol_name or None,
                       g.generation_id if g.consume_type == "push" else None,
                       g.members if g.consume_type == "push" else None,
                       g.coordinator] for g in groups]))


@group_app.command("describe")
def group_describe(ctx: typer.Context, group: GroupArg, output: OutputOpt = None) -> None:
    """Members and their queues, and per queue the committed offset, max offset and lag."""
    with admin_session(ctx) as admin:
        d = admin.group_describe(group)
    if json_mode(ctx, output):
        return emit_json(d.to_json())
    if d.state == "Dead" and not d.members and not d.generation_id:
        # Kafka's word for "no group": a pop, pull or HTTP group never joins the coordinator
        out.print(f"group [bold]{d.group_id}[/bold]: no members in the group coordinator "
                  f"(pop, pull and HTTP consumers do not join it), coordinator {d.coordinator}")
    else:
        out.print(f"group [bold]{d.group_id}[/bold]: {d.state}, generation {d.generation_id}, "
                  f"protocol {d.protocol_name or '-'}, coordinator {d.coordinator}")
    out.print(table("Members", ["member", "client", "host", "software", "topics", "queues"], [
        [m.member_id + (" (leader)" if m.member_id == d.leader_id else ""), m.client_id,
         m.client_host, m.client_software or None, ", ".join(m.topics),
         " ".join(str(q) for q in m.queues) if not m.kafka_assignment else "; ".join(
             f"{t}: {','.join(map(str, p))}" for t, p in m.kafka_assignment.partitions.items())]
        for m in d.members]))
    out.print(table(f"Offsets (total lag {d.total_lag})", [
        "topic", "broker", "queue", "committed", "unacked", "max offset", "lag", "member"], [
        [o.topic, o.broker_name, o.queue_id, o.committed, o.unacked,
         "orphaned" if o.orphaned else o.max_offset, o.lag, o.member_id or None]
         for o in d.offsets]))
    for topic in sorted({o.topic for o in d.offsets if o.orphaned}):
        out.print(f"[yellow]orphaned[/yellow]: topic {topic} was deleted; drop these offsets "
                  f"with `tidemq group delete-offsets {d.group_id} {topic}`")


@group_app.command("delete-offsets")
def group_delete_offsets(ctx: typer.Context, group: GroupArg, topic: TopicArg,
                         output: OutputOpt = None) -> None:
    """Forget the group's committed offsets of TOPIC on every broker (e.g. of a deleted topic,
    which `group describe` shows as orphaned). Refused while the group has live members."""
    with admin_session(ctx) as admin:
        dropped = admin.delete_group_offsets(topic, group)
    if json_mode(ctx, output):
        return emit_json({"group": group, "topic": topic, "brokers": sorted(dropped)})
    where = ", ".join(sorted(dropped)) or "no broker (none were committed)"
    out.print(f"[green]deleted[/green] offsets of {group} for {topic} on {where}")


@group_app.command("reset-offsets")
def group_reset_offsets(
    ctx: typer.Context, group: GroupArg, topic: TopicArg,
    to_time: Annotated[str, typer.Option("--to-time", help=TIME_HELP)],
    output: OutputOpt = None,
) -> None:
    """Move the group's committed offsets of TOPIC to the first message stored at or after
    --to-time, backwards or forwards. Refused (NON_EMPTY_GROUP) while the group has live
    members: stop its consumers first."""
    timestamp_ms = parse_time(to_time)
    with admin_session(ctx) as admin:
        entries = admin.reset_group_offsets(group, topic, timestamp_ms, progress=progress)
    _print_offsets(ctx, output, f"{group} reset to {iso(timestamp_ms)}", entries)


def _print_offsets(ctx: typer.Context, output: Output | None, title: str, entries) -> None:
    if json_mode(ctx, output):
        return emit_json([vars(e) for e in entries])
    out.print(table(title, ["topic", "broker", "queue", "offset"],
                     [[e.topic, e.broker_name, e.queue_id, e.offset] for e in entries]))


@offset_app.command("for-time")
def offset_for_time(
    ctx: typer.Context, topic: TopicArg,
    at: Annotated[str, typer.Option("--time", help=TIME_HELP)],
    output: OutputOpt = None,
) -> None:
    """Per queue, the offset of the first message stored at or after --time."""
    timestamp_ms = parse_time(at)
    with admin_session(ctx) as admin:
        entries = admin.offset_for_timestamp(topic, timestamp_ms)
    _print_offsets(ctx, output, f"{topic} at {iso(timestamp_ms)}", entries)


# -- messages ------------------------------------------------------------------------------

@message_app.command("view")
def message_view(ctx: typer.Context,
                 msg_id: Annotated[str, typer.Argument(help="offset message id (32 hex)")],
                 output: OutputOpt = None) -> None:
    """Show one message by its offset message id (as printed by `tidemq send`)."""
    with admin_session(ctx) as admin:
        message = admin.view_message(msg_id)
    row = message_json(message)
    if json_mode(ctx, output):
        return emit_json(row)
    row["born_timestamp"] = iso(message.born_timestamp)
    row["store_timestamp"] = iso(message.store_timestamp)
    fields = Table(title=f"Message {message.msg_id}", title_justify="left", show_header=False)
    fields.add_column("field", style="bold")
    fields.add_column("value", overflow="fold")
    for name, value in row.items():
        fields.add_row(name, json.dumps(value) if isinstance(value, list | dict) else str(value))
    out.print(fields)


@message_app.command("query")
def message_query(
    ctx: typer.Context, topic: TopicArg,
    key: Annotated[str, typer.Argument(help="message key to look up")],
    begin: Annotated[str | None, typer.Option(help="stored at or after; " + TIME_HELP)] = None,
    end: Annotated[str | None, typer.Option(help="stored before (default now)")] = None,
    max_results: Annotated[int, typer.Option("--max", min=1, max=1000,
                                             help="at most this many")] = 32,
    output: OutputOpt = None,
) -> None:
    """Messages of TOPIC carrying KEY (every broker group is asked), oldest first."""
    begin_ms = parse_time(begin) if begin else 0
    end_ms = parse_time(end) if end else 0
    with admin_session(ctx) as admin:
        messages = admin.query_by_key(topic, key, begin_ms, end_ms, max_results)
    if json_mode(ctx, output):
        return emit_json([message_json(m) for m in messages])
    out.print(table(f"{topic} key={key}", ["msg id", "stored", "broker", "queue", "offset",
                                            "tag", "body"], [
        [m.msg_id, iso(m.store_timestamp), m.broker_name, m.queue_id, m.queue_offset,
         m.tags, _shown_body(m)] for m in messages]))


def _shown_body(message) -> str:
    """A table row shows up to TABLE_BODY_CHARS of a body, and says when it cut it."""
    body = body_text(message)
    if len(body) <= TABLE_BODY_CHARS:
        return body
    return f"{body[:TABLE_BODY_CHARS]}… (cut at {TABLE_BODY_CHARS} of {len(body)} chars: -o json)"
