"""The "consumer" group protocol's payloads, and the leader's per-topic assignment step.

The coordinator treats subscription metadata and assignments as opaque bytes; this module is
what the group leader (SDK) and admin tools use to read and write them, in the JSON layouts
the broker.proto comments fix:

    subscription metadata: {"topics": ["orders", ...]}
    assignment:            {"queues": [["orders", "broker-a", 0], ...]}

Strategies work on one topic at a time (RocketMQ allocates per topic), so a member only
receives queues of topics it subscribed to.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence

from tidemq.common.assignors import QueueRef, get_assignor
from tidemq.common.errors import InvalidArgument
from tidemq.common.jsondoc import load_object

TopicQueue = tuple[str, str, int]
"""(topic, broker_name, queue_id): one queue of one topic, the unit a member consumes."""


def encode_subscription(topics: Iterable[str]) -> bytes:
    return json.dumps({"topics": sorted(set(topics))}, separators=(",", ":")).encode()


def decode_subscription(metadata: bytes) -> list[str]:
    """Topics a member subscribed to; InvalidArgument for anything that is not the layout."""
    document = _load(metadata, "subscription metadata")
    topics = document.get("topics")
    if not isinstance(topics, list) or not all(isinstance(t, str) and t for t in topics):
        raise InvalidArgument('subscription metadata needs {"topics": [non-empty strings]}')
    return sorted(set(topics))


def encode_assignment(queues: Iterable[TopicQueue]) -> bytes:
    rows = sorted({(str(t), str(b), int(q)) for t, b, q in queues})
    return json.dumps({"queues": [list(r) for r in rows]}, separators=(",", ":")).encode()


def decode_assignment(assignment: bytes) -> list[TopicQueue]:
    """Queues in an assignment; b"" (a member the leader gave nothing) is an empty list."""
    if not assignment:
        return []
    document = _load(assignment, "assignment")
    rows = document.get("queues")
    if not isinstance(rows, list) or not all(_is_queue_row(r) for r in rows):
        raise InvalidArgument('assignment needs {"queues": [[topic, broker_name, queue_id]]}')
    return sorted((t, b, q) for t, b, q in rows)


def assign_subscriptions(
    strategy: str,
    topic_queues: Mapping[str, Sequence[QueueRef]],
    subscriptions: Mapping[str, Iterable[str]],
    previous: Mapping[str, Iterable[TopicQueue]] | None = None,
) -> dict[str, list[TopicQueue]]:
    """The leader's job: run `strategy` once per topic over the members subscribed to it.

    `topic_queues` is the route (queues per topic, from the name server), `subscriptions`
    member -> topics (decoded JoinGroup metadata), `previous` the last assignment (for sticky).
    Every member gets an entry; topics without route data are skipped.
    """
    assignor = get_assignor(strategy)
    result: dict[str, list[TopicQueue]] = {member: [] for member in subscriptions}
    subscribed: dict[str, list[str]] = {}
    for member, topics in subscriptions.items():
        for topic in set(topics):
            subscribed.setdefault(topic, []).append(member)
    for topic, members in sorted(subscribed.items()):
        queues = topic_queues.get(topic)
        if not queues:
            continue
        earlier = {
            member: [QueueRef(b, q) for t, b, q in rows if t == topic]
            for member, rows in (previous or {}).items()
        }
        for member, refs in assignor(queues, members, earlier).items():
            result[member].extend((topic, ref.broker_name, ref.queue_id) for ref in refs)
    return {member: sorted(rows) for member, rows in result.items()}


def _load(payload: bytes, what: str) -> dict:
    return load_object(payload, what, InvalidArgument)


def _is_queue_row(row: object) -> bool:
    return (
        isinstance(row, list)
        and len(row) == 3
        and isinstance(row[0], str)
        and isinstance(row[1], str)
        and isinstance(row[2], int)
        and not isinstance(row[2], bool)
        and row[2] >= 0
    )
