"""Several gateway-kafka instances as one Kafka cluster (docs/kafka.md#several-instances).

Each instance registers itself in the config center under a lease,
`/tidemq/kafka/gateways/<node id>` = `{"node_id", "host", "port", "rack", "external"}`, kept
alive every TTL/3 and registered again if the lease is ever lost; SIGTERM revokes it, so the
others drop the instance at once, and a killed one drops out when its lease expires
(`registration_ttl_s`).
Every instance follows that prefix with a watch, so all of them answer Metadata with the same
live set (once the watch delivers), and derive from it, deterministically:

- partition *i* of topic *t*: leader = live[(crc32(t) + i) mod n], the partitions of a topic
  spread over the instances in turn;
- group *g*'s coordinator (FindCoordinator): live[crc32(g) mod n].

live = the registered nodes sorted by node id. Any instance serves any partition and any group
whatever these say (a Produce, Fetch or JoinGroup sent to the "wrong" one is served: the state
is in TideMQ's brokers, and group membership on the brokers' coordinator), so the set being
briefly different on two instances costs nothing but a metadata refresh. A node id is the
`node_id` setting, or by default derived from the advertised host and port (the same after a
restart).

Listeners (docs/kafka.md#listeners), as Kafka's `listeners` / `advertised.listeners`: an
instance may listen on a second, external port. Its registration then carries both advertised
addresses (`host`/`port` the internal one, `external` = `{"host", "port"}` or null), and a
connection accepted on a listener is answered, in Metadata and FindCoordinator, with every live
instance's address for that listener (`Node.endpoint`). An instance without an external
listener (or registered by an older version) is listed with its internal address on both: the
same node ids on every listener keep leaders and coordinators the same whichever listener a
client came in on, and an instance the client cannot reach shows up as a connection error on
that instance's partitions rather than as partitions without a leader.
"""

from __future__ import annotations

import json
import threading
import zlib
from dataclasses import dataclass

from tidemq.common import errors
from tidemq.common.logs import get_logger
from tidemq.configclient.client import ConfigClient, Lease
from tidemq.configclient.follow import Follower

log = get_logger(__name__)

PREFIX = "/tidemq/kafka/gateways/"
INTERNAL, EXTERNAL = "internal", "external"   # the listeners (server.py)
LISTENERS = (INTERNAL, EXTERNAL)


@dataclass(frozen=True, slots=True, order=True)
class Node:
    node_id: int
    host: str
    port: int
    rack: str | None = None
    external_host: str | None = None   # the external listener's advertised address, if any
    external_port: int | None = None

    def endpoint(self, listener: str) -> tuple[str, int]:
        """Where a client that came in on `listener` reaches this instance: its address for
        that listener, the internal one when it has no external listener."""
        if listener == EXTERNAL and self.external_host is not None \
                and self.external_port is not None:
            return self.external_host, self.external_port
        return self.host, self.port

    def to_json(self) -> str:
        external = (None if self.external_host is None else
                    {"host": self.external_host, "port": self.external_port})
        return json.dumps({"node_id": self.node_id, "host": self.host, "port": self.port,
                           "rack": self.rack, "external": external})

    @classmethod
    def from_json(cls, raw: bytes) -> Node:
        doc = json.loads(raw)
        external = doc.get("external")
        if external is not None:
            return cls(int(doc["node_id"]), str(doc["host"]), int(doc["port"]), doc.get("rack"),
                       str(external["host"]), int(external["port"]))
        return cls(int(doc["node_id"]), str(doc["host"]), int(doc["port"]), doc.get("rack"))


def derived_node_id(host: str, port: int) -> int:
    """A stable id from the advertised endpoint (a Kafka node id is a non-negative int32)."""
    return zlib.crc32(f"{host}:{port}".encode()) & 0x7FFFFFFF


def _spot(name: str) -> int:
    return zlib.crc32(name.encode())


class GatewayNodes:
    """This instance's registration and the live instances (itself always among them)."""

    def __init__(self, me: Node, client: ConfigClient | None, *, ttl_s: int = 5) -> None:
        self.me = me
        self.ttl_s = ttl_s
        self._client = client
        self._live: tuple[Node, ...] = (me,)
        self._closed = threading.Event()
        self._lease: Lease | None = None
        self._follower: Follower | None = None
        self._thread: threading.Thread | None = None

    @classmethod
    def single(cls, me: Node) -> GatewayNodes:
        return cls(me, None)

    def start(self) -> GatewayNodes:
        if self._client is None:
            return self
        self._thread = threading.Thread(target=self._register, daemon=True,
                                        name="kafka-registration")
        self._thread.start()
        self._follower = Follower(self._client, PREFIX, read=self._read,
                                  on_event=lambda _event: self._read(),
                                  name="kafka-gateways").start()
        return self

    def close(self) -> None:
        """Deregister (the others drop this instance at once) and stop following."""
        self._closed.set()
        if self._follower is not None:
            self._follower.close()
        lease = self._lease
        if lease is not None:
            try:
                lease.revoke()
            except errors.TideMQError as exc:   # it expires on its own within the TTL
                log.warning("kafka_deregistration_failed", error=str(exc))
        if self._thread is not None:
            self._thread.join(timeout=5)

    # -- the live set --------------------------------------------------------------------------

    def live(self) -> tuple[Node, ...]:
        return self._live

    def leader(self, topic: str, partition: int) -> Node:
        nodes = self._live
        return nodes[(_spot(topic) + partition) % len(nodes)]

    def coordinator(self, group: str) -> Node:
        nodes = self._live
        return nodes[_spot(group) % len(nodes)]

    def _read(self) -> int:
        result = self._client.range(PREFIX)
        nodes = {self.me.node_id: self.me}
        for kv in result.kvs:
            try:
                node = Node.from_json(kv.value)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("kafka_gateway_entry_skipped", key=kv.key, error=str(exc))
                continue
            if node.node_id != self.me.node_id:
                nodes[node.node_id] = node
        live = tuple(sorted(nodes.values()))
        if live != self._live:
            log.info("kafka_gateways", live=[
                f"{n.node_id}@{n.host}:{n.port}" + (f"|{n.external_host}:{n.external_port}"
                                                    if n.external_host is not None else "")
                for n in live])
        self._live = live
        return result.revision

    # -- registration --------------------------------------------------------------------------

    def _register(self) -> None:
        key = f"{PREFIX}{self.me.node_id}"
        while not self._closed.is_set():
            try:
                lease = self._client.lease(self.ttl_s)
                self._lease = lease
                self._client.put(key, self.me.to_json(), lease=lease.id)
                log.info("kafka_gateway_registered", key=key, lease=lease.id,
                         ttl_s=lease.ttl_seconds)
                while not self._closed.wait(max(lease.ttl_seconds / 3, 0.2)):
                    if lease.expired.is_set():
                        log.warning("kafka_gateway_lease_lost: registering again", key=key)
                        break
            except errors.TideMQError as exc:
                log.warning("kafka_gateway_registration_failed", key=key, error=str(exc))
                self._closed.wait(1.0)
