"""Queue assignment strategies: which group member consumes which message queue.

Shared by the broker's coordinator docs/tests and the SDK's group leader (tidemq.client.group).

The group leader runs one of these on the member list it gets from JoinGroup and sends the
result in SyncGroup. Every strategy is a pure, deterministic function

    assign(queues, members, previous) -> {member: [queues]}

so any leader (or a test) computes the same answer from the same input. The result has an
entry for every member (possibly empty), each queue appears exactly once, and lists are sorted.
`previous` (the last assignment) only matters to `sticky`; the others ignore it.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Callable, Sequence
from typing import NamedTuple

from tidemq.common.errors import InvalidArgument

UNKNOWN_ASSIGNOR = "UNKNOWN_ASSIGNOR"


class QueueRef(NamedTuple):
    """A message queue: (broker name, queue id). Tuples sort by broker, then queue id."""

    broker_name: str
    queue_id: int


Assignment = dict[str, list[QueueRef]]
Assignor = Callable[[Sequence[QueueRef], Sequence[str], "Assignment | None"], Assignment]

CONSISTENT_HASH_VIRTUAL_NODES = 10  # RocketMQ AllocateMessageQueueConsistentHash default


def _prepare(queues: Sequence[QueueRef], members: Sequence[str]) -> tuple[list, list[str]]:
    return sorted({QueueRef(*q) for q in queues}), sorted(set(members))


def averagely(
    queues: Sequence[QueueRef], members: Sequence[str], previous: Assignment | None = None
) -> Assignment:
    """RocketMQ AllocateMessageQueueAveragely (the default): contiguous blocks of the sorted
    queues; the first `len(queues) % n` sorted members take one extra queue."""
    queue_list, member_list = _prepare(queues, members)
    result: Assignment = {m: [] for m in member_list}
    n = len(member_list)
    if n == 0:
        return result
    base, extra = divmod(len(queue_list), n)
    start = 0
    for index, member in enumerate(member_list):
        size = base + (1 if index < extra else 0)
        result[member] = queue_list[start : start + size]
        start += size
    return result


def averagely_by_circle(
    queues: Sequence[QueueRef], members: Sequence[str], previous: Assignment | None = None
) -> Assignment:
    """RocketMQ AllocateMessageQueueAveragelyByCircle: deal the sorted queues round robin, so
    each member's queues are spread over brokers instead of one contiguous block."""
    queue_list, member_list = _prepare(queues, members)
    result: Assignment = {m: [] for m in member_list}
    for index, queue in enumerate(queue_list):
        if member_list:
            result[member_list[index % len(member_list)]].append(queue)
    return result


def _ring_hash(key: str) -> int:
    # md5 like RocketMQ's ring: stable across processes and Python versions (unlike hash()).
    return int.from_bytes(hashlib.md5(key.encode()).digest()[:8], "big")


def consistent_hash(
    queues: Sequence[QueueRef],
    members: Sequence[str],
    previous: Assignment | None = None,
    *,
    virtual_nodes: int = CONSISTENT_HASH_VIRTUAL_NODES,
) -> Assignment:
    """RocketMQ AllocateMessageQueueConsistentHash: each member owns `virtual_nodes` points on
    a hash ring; a queue goes to the first point clockwise of its own hash. Adding a member
    only takes queues over to the newcomer and nothing else moves; counts are not balanced."""
    queue_list, member_list = _prepare(queues, members)
    result: Assignment = {m: [] for m in member_list}
    if not member_list:
        return result
    ring = sorted(
        (_ring_hash(f"{member}-{replica}"), member)
        for member in member_list
        for replica in range(virtual_nodes)
    )
    points = [point for point, _ in ring]
    for queue in queue_list:
        slot = bisect.bisect_left(points, _ring_hash(f"{queue.broker_name}@{queue.queue_id}"))
        result[ring[slot % len(ring)][1]].append(queue)
    return result


def sticky(
    queues: Sequence[QueueRef], members: Sequence[str], previous: Assignment | None = None
) -> Assignment:
    """Keep queues where they were, balance counts (differ by at most one), move the minimum.

    The members already holding the most queues get the `len(queues) % n` larger quotas,
    which maximises the number of queues that stay; a member over quota gives up its
    highest-sorted queues; freed and new queues go to the members furthest under quota.
    """
    queue_list, member_list = _prepare(queues, members)
    result: Assignment = {m: [] for m in member_list}
    if not member_list:
        return result
    existing = set(queue_list)
    owned: set[QueueRef] = set()
    for member in member_list:  # sorted order decides a queue claimed twice in `previous`
        for queue in sorted({QueueRef(*q) for q in (previous or {}).get(member, ())}):
            if queue in existing and queue not in owned:
                owned.add(queue)
                result[member].append(queue)
    base, extra = divmod(len(queue_list), len(member_list))
    by_holding = sorted(member_list, key=lambda m: (-len(result[m]), m))
    quota = {m: base + (1 if rank < extra else 0) for rank, m in enumerate(by_holding)}
    free = [q for q in queue_list if q not in owned]
    for member in member_list:
        if len(result[member]) > quota[member]:
            free.extend(result[member][quota[member] :])
            del result[member][quota[member] :]
    free.sort()
    for queue in free:
        member = min(member_list, key=lambda m: (len(result[m]) - quota[m], m))
        result[member].append(queue)
    for member in member_list:
        result[member].sort()
    return result


ASSIGNORS: dict[str, Assignor] = {
    "averagely": averagely,
    "averagely-by-circle": averagely_by_circle,
    "consistent-hash": consistent_hash,
    "sticky": sticky,
}
DEFAULT_ASSIGNOR = "averagely"


def get_assignor(name: str) -> Assignor:
    """The strategy registered under `name`; UNKNOWN_ASSIGNOR lists the valid names."""
    try:
        return ASSIGNORS[name]
    except KeyError:
        raise InvalidArgument(
            f"no assignment strategy named {name!r}; choose one of {sorted(ASSIGNORS)}",
            code=UNKNOWN_ASSIGNOR,
        ) from None
