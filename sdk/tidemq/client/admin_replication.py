"""The operator's view of replica groups: roles and epochs from the name servers, in-sync
membership and lag from each group's master, and preferred-replica elections through the
controller (docs/replication.md, "Broker roles and failover")."""

from __future__ import annotations

from tidemq.client.admin_types import BrokerEntry
from tidemq.client.brokers import BrokerClients
from tidemq.client.routes import MASTER_ID, NameServerClient
from tidemq.common import errors
from tidemq.v1 import broker_pb2, nameserver_pb2

PROGRESS_TIMEOUT_S = 2.0


def replica_entries(info: nameserver_pb2.ClusterInfo, brokers: BrokerClients,
                    in_sync: dict[str, set[int]] | None = None,
                    replication: dict | None = None) -> list[BrokerEntry]:
    """One entry per registered address, sorted by cluster, group and replica id
    (BrokerEntry.id: fixed, unlike the registered id that says the role).
    `in_sync`: each group's in-sync set as the controller recorded it (DescribeReplication);
    without it, membership is what the master reports. `replication` (describe_replication's
    answer) adds each replica's incarnation and what a waiting group waits for."""
    if replication is not None and in_sync is None and replication["controller_addr"]:
        in_sync = {g["broker_name"]: set(g["in_sync"]) for g in replication["groups"]}
    incarnations = {(r["broker_name"], r["replica_id"]): r.get("incarnation", "")
                    for r in (replication or {}).get("live_replicas", ())}
    waiting = {g["broker_name"]: tuple(sorted(g.get("waiting_for", ())))
               for g in (replication or {}).get("groups", ())}
    live = {b.broker_addr: b for b in info.live_brokers}
    progress: dict[tuple[str, int], broker_pb2.ReplicaProgress] = {}
    for data in info.broker_addr_table.values():
        master = data.broker_addrs.get(MASTER_ID)
        if master and master in live and live[master].role == nameserver_pb2.REPLICA_MASTER:
            for replica in _master_progress(brokers, master):
                progress[(data.broker_name, replica.replica_id)] = replica
    entries = []
    for data in info.broker_addr_table.values():
        for broker_id, addr in data.broker_addrs.items():
            entry = BrokerEntry(data.cluster, data.broker_name, broker_id, addr,
                                live[addr].last_update_ms if addr in live else 0)
            seen = live.get(addr)
            if seen is not None and seen.role != nameserver_pb2.REPLICA_ROLE_UNSPECIFIED:
                entry = _with_replication(entry, seen, progress)
                if in_sync and data.broker_name in in_sync:
                    entry = BrokerEntry(**dict(vars(entry), in_sync=seen.replica_id
                                               in in_sync[data.broker_name]))
                entry = BrokerEntry(**dict(
                    vars(entry),
                    incarnation=incarnations.get((data.broker_name, seen.replica_id), ""),
                    group_waiting_for=waiting.get(data.broker_name, ())))
            entries.append(entry)
    return sorted(entries, key=lambda b: (b.cluster, b.broker_name, b.id, b.broker_id))


def _with_replication(entry: BrokerEntry, seen: nameserver_pb2.BrokerLiveInfo,
                      progress: dict[tuple[str, int], broker_pb2.ReplicaProgress]) -> BrokerEntry:
    fields = dict(vars(entry), replica_id=seen.replica_id, epoch=seen.epoch)
    if seen.role == nameserver_pb2.REPLICA_MASTER:
        fields.update(in_sync=True, lag_bytes=0, lag_s=0.0)
    elif (replica := progress.get((entry.broker_name, seen.replica_id))) is not None:
        fields.update(in_sync=replica.in_sync, lag_bytes=replica.lag_bytes,
                      lag_s=replica.lag_ms / 1000, rebuilding=replica.rebuilding)
    return BrokerEntry(**fields)


def _master_progress(brokers: BrokerClients,
                     master_addr: str) -> list[broker_pb2.ReplicaProgress]:
    try:
        reply = brokers.get(master_addr).call("GetBrokerInfo", broker_pb2.GetBrokerInfoRequest(),
                                              timeout=PROGRESS_TIMEOUT_S, idempotent=True)
    except errors.TideMQError:
        return []  # a dead master: its slaves show as unknown, the list still prints
    return list(reply.replicas)


def controller_in_sync(namesrv: NameServerClient) -> dict[str, set[int]]:
    """Each group's recorded in-sync set; {} when no controller answers (no replication)."""
    try:
        reply = _on_controller(namesrv, "DescribeReplication",
                               nameserver_pb2.DescribeReplicationRequest())
    except errors.TideMQError:
        return {}
    return {group.broker_name: set(group.in_sync) for group in reply.groups}


def describe_replication(namesrv: NameServerClient) -> dict:
    """The active controller's view (DescribeReplication): each group's master, epoch and
    in-sync set, and the replicas holding a live key. `controller_addr` "" and no groups when
    no name server runs a controller (replication is not enabled)."""
    try:
        reply = _on_controller(namesrv, "DescribeReplication",
                               nameserver_pb2.DescribeReplicationRequest())
    except errors.TideMQError:
        return {"controller_addr": "", "groups": [], "live_replicas": []}
    return {
        "controller_addr": reply.controller_addr,
        "groups": [_group_dict(g) for g in reply.groups],
        "live_replicas": [{"broker_name": r.broker_name, "replica_id": r.replica_id,
                           "addr": r.addr, "epoch": r.epoch, "log_end": r.log_end,
                           "incarnation": r.incarnation}
                          for r in reply.live_replicas],
    }


def elect_master(namesrv: NameServerClient, broker_name: str, replica_id: int,
                 unclean: bool = False) -> dict:
    """ElectMaster on the active controller; the group's new state as a dict. `unclean`:
    elect even below the confirmed offset (acknowledged messages may be lost)."""
    request = nameserver_pb2.ElectMasterRequest(broker_name=broker_name,
                                                preferred_replica=replica_id, unclean=unclean)
    return _group_dict(_on_controller(namesrv, "ElectMaster", request).group)


def _group_dict(group) -> dict:
    return {"broker_name": group.broker_name, "master": group.master, "epoch": group.epoch,
            "in_sync": list(group.in_sync), "master_addr": group.master_addr,
            "incarnations": {int(r): inc for r, inc in group.incarnations.items()},
            "confirmed_offset": group.confirmed_offset,
            "waiting_for": list(group.waiting_for)}


def _on_controller(namesrv: NameServerClient, method: str, request):
    """Ask each name server in turn; one that is not the active controller answers
    NOT_CONTROLLER and the next is tried."""
    failures = []
    for client in namesrv._clients:
        try:
            return client.call(method, request, idempotent=method == "DescribeReplication")
        except errors.PreconditionFailed as exc:
            if exc.code != "NOT_CONTROLLER":
                raise
            failures.append(f"{client.addr}: {exc.message}")
            continue
        except errors.ServiceUnavailable as exc:
            failures.append(f"{client.addr}: {exc.message}")
    raise errors.ServiceUnavailable("no name server is the active controller: "
                                    + "; ".join(failures), code="NOT_CONTROLLER")
