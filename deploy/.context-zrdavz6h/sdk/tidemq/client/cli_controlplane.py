"""`tidemq cluster control-plane`: the config centers and the Redis tier that holds their state.

    tidemq --config-center cc-1:7070,cc-2:7071 cluster control-plane
    tidemq cluster control-plane -o json

Every config-center address given is asked on its own, so a dead instance shows as
unreachable; the Redis nodes and Sentinels are as the first instance that answered sees them
(ConfigService.DescribeStore). None answering is one line, `error SERVICE_UNAVAILABLE: no
config center answered (tried ...)`, and status 1.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import typer
from rich.markup import escape
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
    reachable or not, the Redis nodes behind them with role and replication lag, and each
    Sentinel's view of the master."""
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
    out.print(table(f"Redis nodes (as {plane.reported_by} sees them)", [
        "address", "role", "reachable", "lag bytes", "link", "replicas", "repl offset",
        "follows"], [
        [n.address, n.role or None, n.reachable, n.lag_bytes, n.link_status or None,
         n.connected_replicas if n.role == "master" else None,
         n.replication_offset if n.reachable else None, n.master_address or None]
        for n in store.nodes]))
    _errors([(n.address, n.error) for n in store.nodes])
    if not store.replicated:
        out.print(Text(f"no Sentinels: the store is one Redis ({store.target}); a failover "
                       "needs a redis+sentinel:// URL (docs/config-center.md)"))
        return
    out.print(table(f"Sentinels (master {escape(repr(store.master_name))})", [
        "address", "reachable", "master at", "master down", "other sentinels", "quorum",
        "flags"], [
        [s.address, s.reachable, s.master_address or None,
         s.master_down if s.master_address else None,
         s.other_sentinels if s.master_address else None, s.quorum or None,
         s.master_flags or None] for s in store.sentinels]))
    _errors([(s.address, s.error) for s in store.sentinels])


def _errors(rows: list[tuple[str, str]]) -> None:
    """Why a row did not answer, under its table (a reason is too long for a cell)."""
    for address, error in rows:
        if error:
            out.print(Text(f"  {address}: {error}", style="dim"))
