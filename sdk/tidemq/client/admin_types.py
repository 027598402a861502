"""What Admin answers with: plain records of brokers, topics, queues, offsets and groups."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from tidemq.client.kafka_assignment import KafkaAssignment
from tidemq.client.message import MessageQueue
from tidemq.client.routes import MASTER_ID, TopicRoute
from tidemq.common import errors, protocol, record


@dataclass(frozen=True)
class BrokerEntry:
    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    last_update_ms: int      # last registration seen by the answering name server (0 = none)
    # Replication (docs/replication.md); replica_id -1 = a broker without replication.
    replica_id: int = -1
    epoch: int = 0
    in_sync: bool | None = None       # None = unknown (no master answered)
    lag_bytes: int | None = None      # behind the master's log end
    lag_s: float | None = None        # since it was last caught up
    rebuilding: bool = False          # copying the master's log from its oldest segment
    # Issue #36 (docs/replication.md, "In sync means this copy of the data"): the incarnation
    # "<store id>:<start>" its live key shows ("" = not live or not published), and — while
    # its group has no master because no live replica holds the confirmed offset — the
    # replicas the group waits for.
    incarnation: str = ""
    group_waiting_for: tuple[int, ...] = ()

    @property
    def role(self) -> str:
        return "master" if self.broker_id == MASTER_ID else "slave"

    @property
    def id(self) -> int:
        """What this broker is within its group, whatever its role: its replica id (0..n-1,
        the same in every group, the `-<id>` of its process name broker-a-<id>), or the
        configured broker id of a broker without replication. `broker_id` is the id routes
        know it by instead — RocketMQ's convention, 0 while master and replica id + 1 while
        slave — so it moves with every election (issue #41)."""
        return self.replica_id if self.replica_id >= 0 else self.broker_id


@dataclass(frozen=True)
class TopicSummary:
    name: str
    queues: int
    perm: int
    order: bool
    broker_names: tuple[str, ...]   # broker groups the name servers route it to


@dataclass(frozen=True)
class QueueStatus:
    broker_name: str
    queue_id: int
    min_offset: int
    max_offset: int          # next offset to be written

    @property
    def messages(self) -> int:
        return self.max_offset - self.min_offset


@dataclass(frozen=True)
class TopicDescription:
    name: str
    route: TopicRoute
    queues: list[QueueStatus]
    # every per-topic setting: {"value", "source": "topic" | "default"} (docs/topics.md)
    config: dict[str, dict] = field(default_factory=dict)
    # why `config` is empty when the config center did not answer ({"code", "detail"})
    config_unavailable: dict[str, str] | None = None


@dataclass(frozen=True)
class QueueOffsetEntry:
    topic: str
    broker_name: str
    queue_id: int
    offset: int


@dataclass(frozen=True)
class GroupSummary:
    group_id: str
    state: str
    protocol_name: str
    generation_id: int
    members: int
    coordinator: str         # broker name
    consume_type: str = ""   # push (joined the coordinator), pop, or pull (committed offsets)
    defined: bool = False    # has a definition in the config center (else: the defaults)


@dataclass(frozen=True)
class GroupMember:
    member_id: str
    client_id: str
    client_host: str
    queues: list[MessageQueue]
    topics: list[str] = field(default_factory=list)   # the member's subscription
    client_software: str = ""   # a Kafka client's "name version" (ApiVersions v3+), else ""
    # a Kafka consumer's decoded ConsumerProtocolAssignment (None: no Kafka member, nothing
    # assigned yet, or bytes that do not decode)
    kafka_assignment: KafkaAssignment | None = None


@dataclass(frozen=True)
class GroupQueueLag:
    topic: str
    broker_name: str
    queue_id: int
    committed: int | None    # None = the group never committed here; a pop group: where
    #                          its next pop reads
    max_offset: int | None   # None = the topic no longer exists (orphaned offset)
    member_id: str = ""      # who is assigned the queue now ("" = nobody)
    unacked: int | None = None  # a pop group: popped and not acked yet (None: not popped)

    @property
    def orphaned(self) -> bool:
        """A committed offset of a deleted topic (`Admin.delete_group_offsets` drops it)."""
        return self.max_offset is None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.max_offset is None:
            return None
        return max(self.max_offset - self.committed, 0) + (self.unacked or 0)


@dataclass(frozen=True)
class GroupDescription:
    group_id: str
    coordinator: str
    state: str
    protocol_name: str
    generation_id: int
    leader_id: str
    members: list[GroupMember]
    offsets: list[GroupQueueLag] = field(default_factory=list)

    @property
    def total_lag(self) -> int:
        return sum(o.lag or 0 for o in self.offsets)

    def to_json(self) -> dict:
        """The document of `tidemq group describe -o json` and `GET /v1/consumer-groups/<g>`."""
        return {
            "group": self.group_id, "coordinator": self.coordinator, "state": self.state,
            "protocol": self.protocol_name, "generation": self.generation_id,
            "leader": self.leader_id,
            "members": [{"member_id": m.member_id, "client_id": m.client_id,
                         "client_host": m.client_host, "topics": m.topics,
                         "queues": [str(q) for q in m.queues],
                         "client_software": m.client_software,
                         "kafka_assignment": m.kafka_assignment and m.kafka_assignment.to_json()}
                        for m in self.members],
            "offsets": [{**vars(o), "lag": o.lag, "orphaned": o.orphaned} for o in self.offsets],
            "total_lag": self.total_lag,
        }


def broker_for_store_host(store_host: bytes, brokers: Sequence[BrokerEntry]) -> BrokerEntry:
    """The broker whose advertised address packs to `store_host` (the first 8 id bytes)."""
    for broker in brokers:
        host, _, port = broker.addr.rpartition(":")
        if port.isdigit() and record.pack_host(host, int(port)) == store_host:
            return broker
    raise errors.NotFound(
        f"no registered broker stored this message (store host {record.unpack_host(store_host)})",
        code="MESSAGE_NOT_FOUND")


def parse_assignment(raw: bytes) -> list[MessageQueue]:
    """A member's assignment; a malformed one shows as no queues rather than failing the view."""
    try:
        return [MessageQueue(t, b, q) for t, b, q in protocol.decode_assignment(raw)]
    except errors.InvalidArgument:
        return []


def parse_subscription(raw: bytes) -> list[str]:
    try:
        return protocol.decode_subscription(raw) if raw else []
    except errors.InvalidArgument:
        return []
