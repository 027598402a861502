"""`tidemq cluster control-plane`: the config centers and the etcd cluster that holds their state.

    tidemq --config-center cc-1:7070,cc-2:7071 cluster control-plane
    tidemq cluster control-plane -o json

Every config-center address given is asked on its own, so a dead instance shows as
unreachable; the etcd members (leader, raft term, committed and applied index, lag) are as the
first instance that answered sees them (ConfigService.DescribeStore). None answering is one line, `error SERVICE_UNAVAILABLE: no
config center answered (tried ...)`, and status 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.text import Text
from tidemq.client.cli_common import (
    OutputOpt,
    emit_json,
    expected_errors,
    globals_of,
    json_mode,
    out,
    table,
)

if TYPE_CHECKING:  # config-center's client is imported by the command (cli_common)
    from tidemq.configclient.controlplane import ControlPlane


def control_plane(ctx: typer.Context, output: OutputOpt = None) -> None:
    """The control plane: each config-center address (--config-center, comma-separated)
    reachable or not, and the etcd members behind them: the raft leader and term, each
    member's committed and applied index and how many entries it trails the leader."""
    from tidemq.configclient.client import ConfigClient

    g = globals_of(ctx)
    with expected_errors(), ConfigClient(g.config_center, timeout=g.timeout) as config:
        plane = config.control_plane()
    if json_mode(ctx, output):
        return emit_json(plane.to_json())
    print_control_plane(plane)


def print_control_plane(plane: ControlPlane) -> None:
    store = plane.store
    out.print(table("Config centers", ["address", "reachable", "version", "advertised as"], [
        [i.address, i.reachable, i.store.version if i.store else None,
         i.store.advertised_addr if i.store else None] for i in plane.instances]))
    _errors([(i.address, i.error) for i in plane.instances])
    out.print(Text(f"store: {store.target}"))
    for other in plane.instances:
        if other.store is not None and other.store.target != store.target:
            out.print(Text(f"  {other.address} stores elsewhere: {other.store.target} "
                           "(instances of one config center must share one store)",
                           style="bold red"))
    leader = (f"leader {store.leader}" if store.leader
              else "NO LEADER: no quorum, writes wait")
    out.print(table(f"etcd members (as {plane.reported_by} sees them; {leader}, revision "
                    f"{store.revision})", [
        "member", "reachable", "role", "lag", "term", "index", "applied", "db size"], [
        [m.name or m.id, m.reachable, _role(m) if m.reachable else None,
         m.lag_entries, m.raft_term if m.reachable else None,
         m.raft_index if m.reachable else None, m.raft_applied_index if m.reachable else None,
         _size(m.db_size_bytes) if m.reachable else None] for m in store.members]))
    # endpoints are in the target line above and in -o json (a table column would not fit)
    _errors([(m.name or m.endpoint, m.error) for m in store.members])
    for member in store.members:
        if member.alarms:
            out.print(Text(f"  {member.name}: alarm {', '.join(member.alarms)}",
                           style="bold red"))
    answering = sum(m.reachable and not m.learner for m in store.members)
    voters = sum(not m.learner for m in store.members)
    if voters == 1:
        out.print(Text("one member: the store has no fault tolerance (make up ETCD=single)"))
    elif answering < voters:
        spare = answering - store.quorum
        out.print(Text(f"{answering} of {voters} members answer (quorum {store.quorum}): "
                       + ("losing one more stops writes" if spare == 0 else
                          "no quorum" if spare < 0 else f"{spare} more may be lost"),
                       style="bold red" if spare <= 0 else "yellow"))


def _role(member) -> str:
    return "leader" if member.leader else "learner" if member.learner else "follower"


def _size(size: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024:
            return f"{size} {unit}"
        size //= 1024
    return f"{size} GiB"


def _errors(rows: list[tuple[str, str]]) -> None:
    """Why a row did not answer, under its table (a reason is too long for a cell)."""
    for address, error in rows:
        if error:
            out.print(Text(f"  {address}: {error}", style="dim"))
