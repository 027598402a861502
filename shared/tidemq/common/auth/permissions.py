"""What each RPC needs: the (resource, action) pairs a call must be allowed.

Keyed by the full gRPC method name. Each entry reads names from the request with getattr, so
this module needs no generated code and also covers RocketMQ 5's
`apache.rocketmq.v2.MessagingService` (served by gateway-grpc). A method listed in
AUTHENTICATED_ONLY needs a valid signature and nothing else (routes, metadata reads,
heartbeats); one in ADMIN_ONLY needs ADMIN on `cluster:<method>`, as does a method not listed
at all, so a new RPC is closed until someone maps it. Every BrokerService RPC is listed in one
of the three (tests/unit/common/test_broker_rpc_tables.py; checklist in docs/wire-protocol.md). Health checks are never authenticated (supervisors probe them).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tidemq.common.auth.acl import Action, Permission

UNAUTHENTICATED_SERVICES = ("/grpc.health.v1.Health/", "/grpc.reflection.")
ACL_KEY_PREFIX = "/tidemq/acl/"

Needs = Callable[[Any], list[Permission]]


def _name(request: Any, *path: str) -> str:
    value = request
    for attr in path:
        value = getattr(value, attr, "")
    return str(value or "")


def _pub(*path: str) -> Needs:
    return lambda request: [Permission("topic", _name(request, *path), Action.PUB)]


def _sub(group_path: tuple[str, ...], topic_path: tuple[str, ...] = ()) -> Needs:
    def needs(request: Any) -> list[Permission]:
        wanted = [Permission("group", _name(request, *group_path), Action.SUB)]
        topic = _name(request, *topic_path) if topic_path else ""
        if topic:
            wanted.append(Permission("topic", topic, Action.SUB))
        return wanted
    return needs


def _admin_group(request: Any) -> list[Permission]:
    return [Permission("group", _name(request, "consumer_group"), Action.ADMIN)]


def _config_read(request: Any) -> list[Permission]:
    key = _name(request, "key") or _name(request, "prefix")
    # secrets live under /tidemq/acl/: only admins read them; a range over "/" includes them
    if key.startswith(ACL_KEY_PREFIX) or ACL_KEY_PREFIX.startswith(key):
        return [Permission("cluster", key or "/", Action.ADMIN)]
    return []


def _config_write(request: Any) -> list[Permission]:
    return [Permission("cluster", _name(request, "key") or "/", Action.ADMIN)]


def _config_txn(request: Any) -> list[Permission]:
    """ADMIN on every key written (compared keys are only read)."""
    keys = [put.key for put in request.puts] + list(request.deletes)
    return [Permission("cluster", key or "/", Action.ADMIN) for key in keys] or \
        [Permission("cluster", "/", Action.ADMIN)]


def _rmq_send(request: Any) -> list[Permission]:
    topics = {m.topic.name for m in getattr(request, "messages", ())} or {""}
    return [Permission("topic", topic, Action.PUB) for topic in sorted(topics)]


_BROKER = "/tidemq.v1.BrokerService/"
_NAMESRV = "/tidemq.v1.NameServerService/"
_CONFIG = "/tidemq.v1.ConfigService/"
_RMQ = "/apache.rocketmq.v2.MessagingService/"

RULES: dict[str, Needs] = {
    _BROKER + "Send": _pub("topic"),
    _BROKER + "RecallMessage": _pub("topic"),
    _BROKER + "Pull": _sub(("consumer_group",), ("topic",)),
    _BROKER + "Pop": _sub(("consumer_group",), ("topic",)),
    _BROKER + "Ack": _sub(("consumer_group",)),
    _BROKER + "ChangeInvisibleDuration": _sub(("consumer_group",)),
    _BROKER + "CommitOffsets": _sub(("consumer_group",)),
    _BROKER + "QueryOffsets": _sub(("consumer_group",), ("topic",)),
    _BROKER + "ResetOffsets": _admin_group,
    _BROKER + "DeleteOffsets": _admin_group,
    _BROKER + "JoinGroup": _sub(("group_id",)),
    _BROKER + "SyncGroup": _sub(("group_id",)),
    _BROKER + "Heartbeat": _sub(("group_id",)),
    _BROKER + "LeaveGroup": _sub(("group_id",)),
    _BROKER + "SendMessageBack": _sub(("consumer_group",)),
    _BROKER + "LockQueues": _sub(("consumer_group",)),
    _BROKER + "UnlockQueues": _sub(("consumer_group",)),
    _BROKER + "QueryMessageByKey": lambda r: [Permission("topic", _name(r, "topic"), Action.SUB)],
    _BROKER + "RedriveDeadLetter": _admin_group,
    _CONFIG + "Get": _config_read,
    _CONFIG + "Range": _config_read,
    _CONFIG + "Watch": _config_read,
    _CONFIG + "History": _config_read,
    _CONFIG + "Put": _config_write,
    _CONFIG + "Delete": _config_write,
    _CONFIG + "Rollback": _config_write,
    _CONFIG + "Txn": _config_txn,
    _RMQ + "SendMessage": _rmq_send,
    _RMQ + "RecallMessage": _pub("topic", "name"),
    _RMQ + "EndTransaction": _pub("topic", "name"),
    _RMQ + "ReceiveMessage": _sub(("group", "name"), ("message_queue", "topic", "name")),
    _RMQ + "QueryAssignment": _sub(("group", "name"), ("topic", "name")),
    _RMQ + "AckMessage": _sub(("group", "name"), ("topic", "name")),
    _RMQ + "ChangeInvisibleDuration": _sub(("group", "name"), ("topic", "name")),
    _RMQ + "ForwardMessageToDeadLetterQueue": _sub(("group", "name"), ("topic", "name")),
    _RMQ + "PullMessage": _sub(("group", "name"), ("message_queue", "topic", "name")),
    _RMQ + "UpdateOffset": _sub(("group", "name"), ("message_queue", "topic", "name")),
    _RMQ + "GetOffset": _sub(("group", "name"), ("message_queue", "topic", "name")),
    _RMQ + "QueryOffset": _sub(("group", "name"), ("message_queue", "topic", "name")),
}

AUTHENTICATED_ONLY = frozenset({
    _BROKER + name for name in (
        # not ViewMessage nor GetAllConsumerOffsets: those are ADMIN_ONLY
        "GetQueueOffsets", "SearchOffset", "GetBrokerInfo", "DescribeGroup", "ListGroups",
        "GetSubscriptionGroups", "EndTransaction", "ProducerHeartbeat", "TransactionChecks")
} | {
    _NAMESRV + name for name in ("GetRouteInfo", "GetClusterInfo", "GetAllTopics",
                                 "DescribeReplication")
} | {
    # DescribeStore: Redis addresses, roles and lag, never a password (like DescribeReplication)
    _CONFIG + name for name in ("EffectiveConfig", "LeaseGrant", "LeaseKeepAlive", "LeaseRevoke",
                                "DescribeStore")
} | {
    _RMQ + name for name in ("QueryRoute", "Heartbeat", "Telemetry", "NotifyClientTermination")
} | {
    # every service exports its spans to the trace collector with its own credentials
    "/opentelemetry.proto.collector.trace.v1.TraceService/Export",
})


# Listed to say so: what an unmapped method needs anyway (ADMIN on cluster:<method>)
ADMIN_ONLY = frozenset({
    # any message by its offset; a replica's copy of every group's offsets
    _BROKER + name for name in ("ViewMessage", "GetAllConsumerOffsets")
})


def needs_authentication(method: str) -> bool:
    return not method.startswith(UNAUTHENTICATED_SERVICES)


def required_permissions(method: str, request: Any) -> list[Permission]:
    """The permissions `request` to `method` needs (empty = a valid signature is enough)."""
    rule = RULES.get(method)
    if rule is not None:
        return rule(request)
    if method in AUTHENTICATED_ONLY:
        return []
    return [Permission("cluster", method.rsplit("/", 1)[-1], Action.ADMIN)]
