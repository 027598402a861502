"""Admin: the operator's view of a TideMQ cluster, for scripts and the `tidemq` command line.

Topics are defined in config-center (the source of truth) and appear in name-server routes
once a broker has picked them up; everything else is asked of the brokers that own the data.

>>> with Admin("127.0.0.1:9876", config_center="127.0.0.1:7070") as admin:   # doctest: +SKIP
...     admin.create_topic("orders", queues=8)
...     for queue in admin.describe_topic("orders").queues:
...         print(queue.broker_name, queue.queue_id, queue.max_offset)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from tidemq.client import client_tracing
from tidemq.client.admin_replication import (
    describe_replication,
    elect_master,
    replica_entries,
)
from tidemq.client.admin_types import (
    BrokerEntry,
    GroupDescription,
    GroupMember,
    GroupQueueLag,
    GroupSummary,
    QueueOffsetEntry,
    QueueStatus,
    TopicDescription,
    TopicSummary,
    broker_for_store_host,
    parse_assignment,
    parse_subscription,
)
from tidemq.client.brokers import BrokerClients
from tidemq.client.defaults import DEFAULT_CONFIG_CENTER
from tidemq.client.kafka_assignment import decode_assignment, decode_subscription
from tidemq.client.message import MessageExt, MessageQueue, decode_records
from tidemq.client.routes import MASTER_ID, NameServerClient, TopicRoute
from tidemq.common import errors, record
from tidemq.common.placement import coordinator_for
from tidemq.common.polling import poll
from tidemq.common.topic_names import validate_topic_name
from tidemq.configclient import topic_settings
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.groups import (
    FIELDS,
    DefinedGroup,
    SubscriptionGroupConfig,
    SubscriptionGroups,
)
from tidemq.configclient.topics import PERM_READ_WRITE, TopicDefinitions
from tidemq.v1 import broker_pb2

__all__ = [
    "Admin", "BrokerEntry", "GroupDescription", "GroupMember", "GroupQueueLag", "GroupSummary",
    "QueueOffsetEntry", "QueueStatus", "TopicDescription", "TopicSummary",
    "broker_for_store_host", "coordinator_for", "parse_assignment", "parse_subscription",
]

ROUTE_WAIT_S = 30.0          # a broker picks a new topic up from its watch within seconds
POLL_INTERVAL_S = 0.1
KAFKA_CONSUMER_PROTOCOL = "kafka/consumer/"  # gateway-kafka's name of a Kafka consumer group's
#                                             protocol on the coordinator (type/assignor)

Progress = Callable[[str], None]

_CONSUME_TYPES = {broker_pb2.CONSUME_PUSH: "push", broker_pb2.CONSUME_POP: "pop",
                  broker_pb2.CONSUME_PULL: "pull"}
_CONSUME_ORDER = ["push", "pop", "pull"]  # a group seen several ways is listed by the first
# (a broker of before consume types lists only its coordinator's groups, all unspecified: push)


class Admin:
    """Topic, message, group and offset administration over the name servers, config-center
    and brokers. A context manager; every call has a deadline (`timeout`)."""

    def __init__(self, namesrv_addrs: str | Sequence[str], *,
                 config_center: str | Sequence[str] = DEFAULT_CONFIG_CENTER,
                 timeout: float = 3.0) -> None:
        client_tracing.start_export()  # before any channel: its calls carry the trace
        self.timeout = timeout
        self.namesrv = NameServerClient(namesrv_addrs, timeout=timeout)
        self.config_center = config_center
        self.brokers = BrokerClients(timeout=timeout)
        self._config: ConfigClient | None = None

    def __enter__(self) -> Admin:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        if self._config is not None:
            self._config.close()
            self._config = None

    @property
    def config(self) -> ConfigClient:
        if self._config is None:  # lazily: broker-only commands work without config-center
            addrs = self.config_center
            self._config = ConfigClient(addrs if isinstance(addrs, str) else list(addrs),
                                        timeout=self.timeout)
        return self._config

    # -- cluster -------------------------------------------------------------------------

    def cluster_info(self) -> list[BrokerEntry]:
        """Every registered broker; replicas with their epoch, in-sync membership and lag
        as their group's master reports them (admin_replication.py)."""
        info = self.namesrv.cluster_info()
        replicated = any(b.role for b in info.live_brokers)
        return replica_entries(info, self.brokers, None,
                               describe_replication(self.namesrv) if replicated else None)

    def replication(self) -> dict:
        """The controller's replication state (admin_replication.describe_replication)."""
        return describe_replication(self.namesrv)

    def elect(self, broker_name: str, replica_id: int = -1) -> dict:
        """Move leadership of `broker_name` on purpose (preferred-replica election); -1 lets
        the controller choose the most complete in-sync replica. Returns the new state."""
        return elect_master(self.namesrv, broker_name, replica_id)

    def elect_unclean(self, broker_name: str, replica_id: int = -1) -> tuple[dict, int]:
        """Force an unclean election of `broker_name` (the live replica with the largest log
        end, or `replica_id`), for a group waiting for a replica that will not return.
        Returns the new state and how many bytes of acknowledged records above the new
        master's log end may be lost (the old confirmed offset minus the new one)."""
        before = next((g for g in describe_replication(self.namesrv)["groups"]
                       if g["broker_name"] == broker_name), None)
        state = elect_master(self.namesrv, broker_name, replica_id, unclean=True)
        confirmed = before["confirmed_offset"] if before else 0
        return state, max(0, confirmed - state["confirmed_offset"])

    def consumed(self) -> tuple[dict[str, dict[str, int]], list[str]]:
        """Records handed to consumers (pull and pop answers, any consumer) per topic and
        broker group, summed over the group's replicas (a slave serves pulls too), each
        counted since its process started; and the replicas that did not answer."""
        counts: dict[str, dict[str, int]] = {}
        infos, unanswered = self._broker_infos()
        for broker, info in infos:
            for entry in info.consumed:
                by_broker = counts.setdefault(entry.topic, {})
                by_broker[broker.broker_name] = by_broker.get(broker.broker_name, 0) + entry.count
        return counts, unanswered

    def throttled(self) -> tuple[list[dict], list[str]]:
        """Who is throttled by client quotas now (docs/quotas.md), on every registered broker:
        {broker_name, broker_addr, quota, entity, owed_ms}, most owed first; and the brokers
        that did not answer."""
        rows: list[dict] = []
        infos, unanswered = self._broker_infos()
        for broker, info in infos:
            rows.extend({"broker_name": broker.broker_name, "broker_addr": broker.addr,
                         "quota": t.quota, "entity": t.entity, "owed_ms": t.owed_ms}
                        for t in info.throttled)
        rows.sort(key=lambda row: -row["owed_ms"])
        return rows, unanswered

    def _broker_infos(self) -> tuple[list[tuple[BrokerEntry, broker_pb2.GetBrokerInfoResponse]],
                                     list[str]]:
        """GetBrokerInfo of every registered broker (replicas too), and the brokers that did
        not answer ("<name> <addr>: <why>")."""
        infos: list[tuple[BrokerEntry, broker_pb2.GetBrokerInfoResponse]] = []
        unanswered: list[str] = []
        for broker in self.cluster_info():
            try:
                infos.append((broker, self._broker(broker.addr, "GetBrokerInfo",
                                                   broker_pb2.GetBrokerInfoRequest())))
            except errors.TideMQError as exc:
                unanswered.append(f"{broker.broker_name} {broker.addr}: {exc.message}")
        return infos, unanswered

    def masters(self) -> dict[str, str]:
        """broker name -> master address, for every group with a registered master."""
        return {b.broker_name: b.addr for b in self.cluster_info() if b.broker_id == MASTER_ID}

    def coordinator(self, group: str) -> tuple[str, str]:
        """(broker name, master address) coordinating `group` (the members' rule: placement
        over every broker group; COORDINATOR_NOT_AVAILABLE while that group elects)."""
        brokers = self.cluster_info()
        chosen = coordinator_for(group, {b.broker_name for b in brokers})
        master = next((b.addr for b in brokers
                       if b.broker_name == chosen and b.broker_id == MASTER_ID), "")
        if not master:
            raise errors.ServiceUnavailable(
                f"broker group {chosen!r}, which coordinates {group!r}, has no master right now "
                "(an election is under way)", code="COORDINATOR_NOT_AVAILABLE")
        return chosen, master

    # -- topics --------------------------------------------------------------------------

    def create_topic(self, name: str, queues: int = 0, order: bool = False, wait: bool = True,
                     *, partitions: list[tuple[str, int]] | None = None,
                     wait_timeout: float = ROUTE_WAIT_S,
                     progress: Progress | None = None,
                     config: dict[str, object] | None = None) -> TopicRoute | None:
        """Define the topic in config-center (fails with AlreadyExists if it is defined) and,
        with `wait`, return its route once a name server has one.

        `queues` on every broker group, or `partitions`: a partition map of (broker group,
        queue id) pairs, each group then serving the queues the map names (a group it does
        not name serves none; docs/kafka.md). `config`: per-topic settings with Kafka's names
        (docs/topics.md), checked before anything is written."""
        validate_topic_name(name)
        revision = self._config_call(lambda: TopicDefinitions(self.config).create(
            name, queues, order=order, partitions=partitions, config=config))
        if not wait:
            return None
        if progress:
            progress(f"topic {name!r} defined (revision {revision}); "
                     "waiting for a broker to serve it")
        return self._wait_for(lambda: self._route_or_none(name), wait_timeout,
                              f"no name server routes topic {name!r}")

    def delete_topic(self, name: str, wait: bool = True, *, wait_timeout: float = ROUTE_WAIT_S,
                     progress: Progress | None = None) -> None:
        """Remove the definition; with `wait`, return once name servers stop routing it."""
        self._config_call(lambda: TopicDefinitions(self.config).delete(name))
        if wait:
            if progress:
                progress(f"topic {name!r} removed from config-center; waiting for routes to go")
            self._wait_for(lambda: self._route_or_none(name) is None or None, wait_timeout,
                           f"name servers still route topic {name!r}")

    def alter_topic(self, name: str, changes: dict[str, object]) -> dict[str, dict]:
        """Change per-topic settings live (None: back to the default); brokers apply them as
        their watch sees the definition. Every setting's effective value and source after."""
        validate_topic_name(name)
        current = self._config_call(lambda: TopicDefinitions(self.config).alter(name, changes))
        return topic_settings.effective(current)

    def topic_config(self, name: str) -> dict[str, dict]:
        """Every per-topic setting: {"value", "source": "topic" | "default"}."""
        validate_topic_name(name)
        return topic_settings.effective(
            self._config_call(lambda: TopicDefinitions(self.config).settings(name)))

    def list_topics(self) -> list[TopicSummary]:
        """Every topic defined in config-center, with the broker groups that serve it."""
        routed = set(self.namesrv.topics())
        summaries = []
        for name, doc in self._config_call(TopicDefinitions(self.config).documents):
            doc = doc or {}
            route = self._route_or_none(name) if name in routed else None
            brokers = tuple(sorted({q.broker_name for q in route.queues})) if route else ()
            summaries.append(TopicSummary(name, int(doc.get("queues", 0)),
                                          int(doc.get("perm", PERM_READ_WRITE)),
                                          bool(doc.get("order")), brokers))
        return summaries

    def describe_topic(self, name: str) -> TopicDescription:
        route = self.route(name)
        queues = []
        for broker_name in sorted(route.brokers):
            reply = self._broker(route.master_addr(broker_name), "GetQueueOffsets",
                                 broker_pb2.GetQueueOffsetsRequest(topic=name))
            queues += [QueueStatus(broker_name, q.queue_id, q.min_offset, q.max_offset)
                       for q in reply.queues]
        config, config_unavailable = {}, None
        try:
            config = self.topic_config(name)
        except errors.TopicNotExist:
            pass   # being deleted: the rest stands
        except (errors.ServiceUnavailable, errors.DeadlineExceeded) as exc:
            config_unavailable = {"code": exc.code, "detail": exc.message}   # said, not hidden
        return TopicDescription(name, route, sorted(queues, key=lambda q: (q.broker_name,
                                                                            q.queue_id)),
                                config, config_unavailable)

    def route(self, topic: str) -> TopicRoute:
        try:
            return self.namesrv.route(topic)
        except errors.NotFound as exc:
            raise errors.TopicNotExist(f"topic {topic!r} does not exist") from exc

    # -- offsets and messages ------------------------------------------------------------

    def offset_for_timestamp(self, topic: str, timestamp_ms: int) -> list[QueueOffsetEntry]:
        """Per queue, the first offset stored at or after `timestamp_ms`."""
        route = self.route(topic)
        entries = []
        for mq in route.read_queues():
            reply = self._broker(route.master_addr(mq.broker_name), "SearchOffset",
                                 broker_pb2.SearchOffsetRequest(topic=topic, queue_id=mq.queue_id,
                                                                timestamp_ms=timestamp_ms))
            entries.append(QueueOffsetEntry(topic, mq.broker_name, mq.queue_id,
                                            reply.queue_offset))
        return entries

    def view_message(self, msg_id: str) -> MessageExt:
        """The message an offset message id points at (store host + CommitLog offset)."""
        try:
            store_host, physical_offset = record.parse_offset_msg_id(msg_id.strip())
        except ValueError as exc:
            raise errors.InvalidArgument(str(exc), code="INVALID_MESSAGE_ID") from None
        broker = broker_for_store_host(store_host, self.cluster_info())
        reply = self._broker(broker.addr, "ViewMessage",
                             broker_pb2.ViewMessageRequest(physical_offset=physical_offset))
        (message,) = decode_records(reply.record, broker.broker_name)
        return message

    def query_by_key(self, topic: str, key: str, begin_ms: int = 0, end_ms: int = 0,
                     max_results: int = 32) -> list[MessageExt]:
        """Messages of `topic` carrying `key`, stored in [begin_ms, end_ms), oldest first."""
        if not key:
            raise errors.InvalidArgument("key must not be empty")
        route = self.route(topic)
        found: list[MessageExt] = []
        for broker_name in sorted(route.brokers):
            reply = self._broker(route.master_addr(broker_name), "QueryMessageByKey",
                                 broker_pb2.QueryMessageByKeyRequest(
                                     topic=topic, key=key, begin_timestamp_ms=begin_ms,
                                     end_timestamp_ms=end_ms, max_results=max_results))
            found += decode_records(reply.records, broker_name) if reply.records else []
        found.sort(key=lambda m: (m.store_timestamp, m.broker_name, m.queue_offset))
        return found[:max_results] if max_results > 0 else found

    # -- consumer groups -----------------------------------------------------------------

    def group_list(self) -> list[GroupSummary]:
        """Every group that consumed: joined a coordinator (push), popped (pop) or committed
        offsets without joining (pull), with whether the config center defines it. Each
        master lists what it saw; a group seen several ways is listed by the first of push,
        pop, pull (the coordinator's listing adds state, protocol and members)."""
        masters = self.masters()
        seen: dict[str, list[tuple[str, str, broker_pb2.DescribeGroupResponse]]] = {}
        for broker_name, addr in sorted(masters.items()):
            listed = self._broker(addr, "ListGroups", broker_pb2.ListGroupsRequest()).groups
            for group in listed:
                seen.setdefault(group.group_id, []).append((broker_name, addr, group))
        summaries = []
        for group_id, sightings in sorted(seen.items()):
            consume_type = min((_CONSUME_TYPES.get(g.consume_type, "push")
                                for _, _, g in sightings), key=_CONSUME_ORDER.index)
            defined = any(g.defined for _, _, g in sightings)
            joined = next(((b, a, g) for b, a, g in sightings
                           if _CONSUME_TYPES.get(g.consume_type, "push") == "push"), None)
            if joined is None:  # never met a coordinator: no state, protocol or members
                summaries.append(GroupSummary(group_id, "", "", 0, 0,
                                              coordinator_for(group_id, masters),
                                              consume_type, defined))
                continue
            broker_name, addr, group = joined  # describe for the rest
            g = self._broker(addr, "DescribeGroup",
                             broker_pb2.DescribeGroupRequest(group_id=group_id))
            summaries.append(GroupSummary(group_id, g.state or group.state, g.protocol_name,
                                          g.generation_id, len(g.members), broker_name,
                                          consume_type, defined))
        return summaries

    def group_describe(self, group: str) -> GroupDescription:
        """Members and assignment from the coordinator, committed offsets and lag per queue
        from the brokers that own the queues."""
        if not group:
            raise errors.InvalidArgument("group must not be empty")
        masters = self.masters()
        coordinator, addr = self.coordinator(group)
        reply = self._broker(addr, "DescribeGroup",
                             broker_pb2.DescribeGroupRequest(group_id=group))
        if reply.protocol_name.startswith(KAFKA_CONSUMER_PROTOCOL):
            members = self._kafka_members(reply.members)
        else:
            members = [GroupMember(m.member_id, m.client_id, m.client_host,
                                   parse_assignment(m.assignment), parse_subscription(m.metadata),
                                   m.client_software) for m in reply.members]
        offsets = self.group_offsets(group, masters, members)
        if not members and not offsets and reply.state in ("", "Dead"):
            # the coordinator reports any name it never saw as Dead: say it is unknown
            raise errors.NotFound(
                f"consumer group {group!r} is unknown: no coordinator has it and no broker "
                "holds an offset it committed (`tidemq group list` shows the known groups)",
                code="GROUP_ID_NOT_FOUND")
        return GroupDescription(group, coordinator, reply.state, reply.protocol_name,
                                reply.generation_id, reply.leader_id, members, offsets)

    def _kafka_members(self, described) -> list[GroupMember]:
        """Members of a Kafka consumer group (joined through gateway-kafka): their opaque
        subscription and assignment decoded, each assigned partition shown as the queue the
        topic's partition map names (partitions past the map, or of a topic without one, only
        in `kafka_assignment`)."""
        members, maps = [], {}
        for m in described:
            assignment = decode_assignment(m.assignment) if m.assignment else None
            subscription = decode_subscription(m.metadata)
            queues = []
            for topic, partitions in (assignment.partitions if assignment else {}).items():
                if topic not in maps:
                    maps[topic] = self._partition_map(topic)
                queues += [MessageQueue(topic, *maps[topic][p]) for p in partitions
                           if 0 <= p < len(maps[topic])]
            members.append(GroupMember(
                m.member_id, m.client_id, m.client_host, queues,
                subscription.topics if subscription else [], m.client_software, assignment))
        return members

    def _partition_map(self, topic: str) -> list[tuple[str, int]]:
        """The topic's Kafka partition map ([] when it has none or cannot be read)."""
        try:
            return TopicDefinitions(self.config).partition_map(topic)[1] or []
        except (errors.TideMQError, ValueError):
            return []

    def group_offsets(self, group: str, masters: dict[str, str] | None = None,
                      members: Sequence[GroupMember] = ()) -> list[GroupQueueLag]:
        """Committed offset and lag for every queue the group committed to, pops from or is
        assigned (a pop group's lag: not yet popped plus popped and not acked)."""
        masters = masters if masters is not None else self.masters()
        owner = {(mq.topic, mq.broker_name, mq.queue_id): m.member_id
                 for m in members for mq in m.queues}
        committed: dict[tuple[str, str, int], int] = {}
        unacked: dict[tuple[str, str, int], int] = {}
        for broker_name, addr in masters.items():
            reply = self._broker(addr, "QueryOffsets",
                                 broker_pb2.QueryOffsetsRequest(consumer_group=group))
            committed.update({(o.topic, broker_name, o.queue_id): o.offset
                              for o in reply.offsets})
            for pop in reply.pops:  # a pop group: its cursor stands for the committed offset
                committed[(pop.topic, broker_name, pop.queue_id)] = pop.next_offset
                unacked[(pop.topic, broker_name, pop.queue_id)] = pop.unacked
        lags = []
        for topic, broker_name in sorted({(t, b) for t, b, _ in (*committed, *owner)}):
            if broker_name not in masters:
                continue
            try:
                reply = self._broker(masters[broker_name], "GetQueueOffsets",
                                     broker_pb2.GetQueueOffsetsRequest(topic=topic))
            except errors.TopicNotExist:  # deleted: what the group committed is orphaned
                lags += [GroupQueueLag(t, b, q, offset, None)
                         for (t, b, q), offset in sorted(committed.items())
                         if (t, b) == (topic, broker_name)]
                continue
            for q in reply.queues:
                key = (topic, broker_name, q.queue_id)
                if key in committed or key in owner:
                    lags.append(GroupQueueLag(topic, broker_name, q.queue_id,
                                              committed.get(key), q.max_offset,
                                              owner.get(key, ""), unacked.get(key)))
        return lags

    def reset_group_offsets(self, group: str, topic: str, timestamp_ms: int, *,
                            progress: Progress | None = None) -> list[QueueOffsetEntry]:
        """Move the group's committed offsets of `topic` to the first message at or after
        `timestamp_ms`, on every broker group serving the topic (backwards or forwards).

        Refused with NON_EMPTY_GROUP while the group has live members (as Kafka's tool does):
        they keep their own position and would commit over the reset."""
        if not group:
            raise errors.InvalidArgument("group must not be empty")
        route = self.route(topic)
        self._refuse_live_members(group, "reset its offsets")
        entries = []
        for broker_name in sorted(route.brokers):
            if progress:
                progress(f"resetting {group!r} on {broker_name}")
            reply = self._broker(route.master_addr(broker_name), "ResetOffsets",
                                 broker_pb2.ResetOffsetsRequest(consumer_group=group, topic=topic,
                                                                timestamp_ms=timestamp_ms))
            entries += [QueueOffsetEntry(o.topic, broker_name, o.queue_id, o.offset)
                        for o in reply.offsets]
        return entries

    def delete_group_offsets(self, topic: str, group: str = "") -> dict[str, list[str]]:
        """Forget the committed offsets of `topic` on every master broker, for `group` or
        (group "") for every group: what a deleted topic leaves behind. Refused with
        NON_EMPTY_GROUP for a group with live members. Returns {broker: [groups]} of what
        was dropped."""
        if not topic:
            raise errors.InvalidArgument("topic must not be empty")
        if group:
            self._refuse_live_members(group, f"delete its offsets of {topic!r}")
        dropped = {}
        for broker_name, addr in sorted(self.masters().items()):
            reply = self._broker(addr, "DeleteOffsets", broker_pb2.DeleteOffsetsRequest(
                topic=topic, consumer_group=group))
            if reply.consumer_groups:
                dropped[broker_name] = list(reply.consumer_groups)
        return dropped

    def _refuse_live_members(self, group: str, action: str) -> None:
        reply = self._broker(self.coordinator(group)[1], "DescribeGroup",
                             broker_pb2.DescribeGroupRequest(group_id=group))
        if reply.members:
            names = ", ".join(f"{m.member_id} ({m.client_host or m.client_id})"
                              for m in reply.members)
            raise errors.PreconditionFailed(
                f"cannot {action}: group {group!r} has {len(reply.members)} live member(s): "
                f"{names}. Stop them (or wait for their session to time out) and retry; "
                "live members keep their position and would commit over it",
                code="NON_EMPTY_GROUP")

    # -- subscription-group definitions (config-center /tidemq/groups/) -----------------

    def create_group(self, name: str, **fields: object) -> DefinedGroup:
        """Define a group (fails with SUBSCRIPTION_GROUP_ALREADY_EXISTS if defined); fields
        not given take the defaults (tidemq.configclient.groups.SubscriptionGroupConfig)."""
        return self._config_call(lambda: SubscriptionGroups(self.config).create(name, **fields))

    def update_group(self, name: str, changes: dict[str, object], *,
                     if_revision: int | None = None) -> DefinedGroup:
        """Change some fields; with `if_revision`, only if still at that revision."""
        return self._config_call(lambda: SubscriptionGroups(self.config).update(
            name, changes, if_revision=if_revision))

    def delete_group(self, name: str, *, if_revision: int | None = None) -> None:
        self._config_call(lambda: SubscriptionGroups(self.config).delete(
            name, if_revision=if_revision))

    def group_definitions(self) -> list[DefinedGroup | tuple[str, str]]:
        """Every definition; an invalid one (brokers refuse it) as (name, reason)."""
        return self._config_call(lambda: SubscriptionGroups(self.config).list())

    def group_in_force(self, group: str) -> dict[str, tuple[SubscriptionGroupConfig, bool]]:
        """broker name -> (the definition that master enforces for `group`, defined?)."""
        in_force = {}
        for broker_name, addr in sorted(self.masters().items()):
            reply = self._broker(addr, "GetSubscriptionGroups",
                                 broker_pb2.GetSubscriptionGroupsRequest(groups=[group]))
            for g in reply.groups:
                fields = {name: getattr(g, name) for name in FIELDS}
                in_force[broker_name] = (SubscriptionGroupConfig(**fields), g.defined)
        return in_force

    # -- plumbing ------------------------------------------------------------------------

    def _broker(self, addr: str, method: str, request, *, idempotent: bool = True):
        try:
            return self.brokers.get(addr).call(method, request, idempotent=idempotent)
        except errors.ServiceUnavailable as exc:
            raise type(exc)(f"broker {addr} did not answer {method}: {exc.message}",
                            code=exc.code) from None

    def _config_call(self, method: str | Callable, *args, **kwargs):
        try:
            if callable(method):
                return method()
            return getattr(self.config, method)(*args, **kwargs)
        except errors.ServiceUnavailable as exc:
            addrs = self.config_center if isinstance(self.config_center, str) \
                else ",".join(self.config_center)
            raise type(exc)(f"config-center {addrs} is unreachable: {exc.message}",
                            code=exc.code) from None

    def _route_or_none(self, topic: str) -> TopicRoute | None:
        try:
            route = self.namesrv.route(topic)
        except errors.NotFound:
            return None
        return route if route.queues else None

    def _wait_for(self, probe: Callable[[], object], timeout: float, failure: str):
        outcome = poll(probe, timeout, interval=POLL_INTERVAL_S)
        if not outcome:
            raise errors.DeadlineExceeded(f"{failure} after {timeout:g} s")
        return outcome
