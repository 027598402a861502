"""InSyncTracker: which replicas hold every acknowledged byte (Kafka's ISR, RocketMQ 5's
SyncStateSet), as pure bookkeeping with no I/O or clock of its own.

How the broker's role layer (`tidemq.broker.replication.host`) uses it: the role layer builds one per mastership, `InSyncTracker(master_id,
in_sync, lag_max_ms, min_in_sync)` from the group state the controller recorded, and hands it
to the `HAServer` (which feeds it acks) and the `ReplicationGate` (which asks it for the
confirmed offset). The HA server proposes set changes through the role layer's
`propose(new_set)` (the controller records them first) and applies them only when accepted.

The confirmed offset (Kafka's high watermark) is the smallest log end acknowledged by every
member of the in-sync set, the master counting with its own log end: every byte below it is
on every in-sync replica, so electing any of them loses nothing acknowledged.

Members are copies of the data, not replica ids (Kafka KIP-903): `incarnations` holds the
incarnation ("<store id>:<start>") each member was counted under. A member that reconnects
with another store id (a wiped disk) or below the confirmed offset (a lost unflushed tail)
never caught up under its new incarnation: it leaves the set at the next review and rejoins,
like any slave, once its log end reaches the confirmed offset.

"The confirmed offset" a member is held to, and a slave must reach to join, is never below
`confirmed_floor`: the highest offset known confirmed in this group — the group state's
recorded confirmed offset when the mastership starts (a master back at its old epoch starts a
fresh tracker that has heard no ack yet), raised by every confirmed offset this tracker
computes with enough members. The smallest log end of the members may fall below it (a member
that reconnects wiped reports 0 until it leaves); joining on that fallen value would let a
slave that lacks acknowledged records into the set — electable — (issue #36).
"""

from __future__ import annotations

from tidemq.configclient.replication import store_id_of


class InSyncTracker:
    def __init__(self, master_id: int, in_sync: set[int] | frozenset[int], lag_max_ms: int,
                 min_in_sync: int, confirmed_floor: int = 0) -> None:
        self.master_id = master_id
        self.confirmed_floor = max(0, confirmed_floor)   # highest offset known confirmed
        self.lag_max_ms = lag_max_ms
        self.min_in_sync = min_in_sync
        self.in_sync: frozenset[int] = frozenset(in_sync) | {master_id}
        self.acked: dict[int, int] = {}            # replica -> last log end it reported
        self.caught_up_ms: dict[int, float] = {}   # replica -> last time it had the master's end
        self.seen_ms: dict[int, float] = {}        # replica -> when this tracker first heard it
        self.connected: set[int] = set()
        self.incarnations: dict[int, str] = {}     # replica -> incarnation it is counted under

    # -- events ------------------------------------------------------------------------------
    def connect(self, replica: int, offset: int, now_ms: float, incarnation: str = "",
                confirmed: int | None = None) -> bool:
        """A slave completed its handshake at log end `offset` under `incarnation` while the
        confirmed offset was `confirmed`. True when it is a member that came back without
        the copy it was counted for — another store id, or below the confirmed offset: it
        never caught up under this incarnation (`fell_behind`), so it leaves the set."""
        known = self.incarnations.get(replica, "")
        other_copy = bool(known and incarnation
                          and store_id_of(known) != store_id_of(incarnation))
        behind = offset < max(self.confirmed_floor, confirmed or 0)
        if incarnation:
            self.incarnations[replica] = incarnation
        self.connected.add(replica)
        self.acked[replica] = offset
        self.caught_up_ms.setdefault(replica, now_ms)
        self.seen_ms.setdefault(replica, now_ms)
        if replica != self.master_id and replica in self.in_sync and (other_copy or behind):
            self.fell_behind(replica)
            return True
        return False

    def fell_behind(self, replica: int) -> None:
        """`replica` holds nothing of the master's retained log (it rebuilds): never caught
        up, so a member leaves the in-sync set at the next review (it could not be elected
        with a partial copy)."""
        self.caught_up_ms[replica] = float("-inf")

    def disconnect(self, replica: int) -> None:
        self.connected.discard(replica)

    def on_ack(self, replica: int, offset: int, master_end: int, now_ms: float) -> None:
        """`replica` reports its log end `offset` while the master's is `master_end`."""
        self.acked[replica] = offset
        if offset >= master_end:
            self.caught_up_ms[replica] = now_ms

    def apply(self, new_set: set[int] | frozenset[int], now_ms: float) -> None:
        """The controller recorded `new_set`: it takes effect. A member that joins counts as
        caught up now (it was at the confirmed offset to be proposed)."""
        added = frozenset(new_set) - self.in_sync
        self.in_sync = frozenset(new_set) | {self.master_id}
        for replica in added:
            self.caught_up_ms[replica] = now_ms

    # -- questions ---------------------------------------------------------------------------
    def confirmed_offset(self, master_end: int) -> int:
        """The smallest log end of the members (the master's own counting); with enough
        members to confirm, it also raises `confirmed_floor`."""
        confirmed = master_end
        for replica in self.in_sync:
            if replica != self.master_id:
                acked = self.acked.get(replica, 0)
                if acked < confirmed:
                    confirmed = acked
        if confirmed > self.confirmed_floor and len(self.in_sync) >= self.min_in_sync:
            self.confirmed_floor = confirmed
        return confirmed

    def writable(self) -> bool:
        return len(self.in_sync) >= self.min_in_sync

    def shrink_candidates(self, now_ms: float) -> set[int]:
        """Members that have not been caught up with the master for longer than lag_max_ms
        (disconnected ones included: their clock stopped)."""
        return {replica for replica in self.in_sync if replica != self.master_id
                and now_ms - self.caught_up_ms.get(replica, float("-inf")) > self.lag_max_ms}

    def expand_candidates(self, master_confirmed: int) -> set[int]:
        """Connected non-members whose log end reached the confirmed offset — and
        `confirmed_floor`, whatever a member that came back without its copy did to the
        smallest log end meanwhile."""
        needed = max(master_confirmed, self.confirmed_floor)
        return {replica for replica in self.connected - self.in_sync
                if self.acked.get(replica, -1) >= needed}

    def lag_ms(self, replica: int, master_end: int, now_ms: float) -> int:
        """How long `replica` has not had the master's log end (0 while it has it). One that
        never caught up under this master (`fell_behind`: a copy it no longer holds, a
        rebuild) has no such time: it lags at least since this tracker first heard of it."""
        if self.acked.get(replica, -1) >= master_end:
            return 0
        since = self.caught_up_ms.get(replica, now_ms)
        if since == float("-inf"):
            since = self.seen_ms.get(replica, now_ms)
        return max(0, int(now_ms - since))

    def lag_bytes(self, master_end: int) -> dict[int, int]:
        return {replica: max(0, master_end - offset) for replica, offset in self.acked.items()}
