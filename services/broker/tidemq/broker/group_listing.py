"""Which groups a broker lists (ListGroups): every group that consumed here, however it did.

The group coordinator only knows the groups whose members joined it (push consumers); a group
that pops (the HTTP gateway, RocketMQ 5 clients) or pulls and commits offsets without joining
never meets it. So the listing merges three sources of this broker: the coordinator's groups
(PUSH), the pop book's cursors (POP) and the committed offsets (PULL), each group once with the
first of PUSH, POP, PULL it was seen doing, plus whether the config center defines it.

The brokers' own bookkeeping groups (the pop snapshot cursor, the transaction check-back, the
timer's progress) are never listed; any other group is listed for its offsets when one of them
is on a user topic or its own retry topic.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from tidemq.broker.pop.service import SNAPSHOT_GROUP
from tidemq.broker.schedule.deliverer import PROGRESS_GROUP
from tidemq.broker.transactions.service import CHECK_GROUP
from tidemq.common.system_topics import is_system_topic, retry_topic

PUSH, POP, PULL = "push", "pop", "pull"
_RANK = {PUSH: 0, POP: 1, PULL: 2}
BOOKKEEPING_GROUPS = frozenset({SNAPSHOT_GROUP, PROGRESS_GROUP, CHECK_GROUP})


class ListedGroup(NamedTuple):
    group_id: str
    state: str  # the coordinator's state ("" when the coordinator does not know the group)
    consume_type: str  # PUSH, POP or PULL
    defined: bool


def first_type(types: Iterable[str]) -> str:
    """The type a group seen consuming several ways is listed by (PUSH, then POP, then PULL)."""
    return min(types, key=_RANK.__getitem__)


def consumed_offsets(group: str, topics: Iterable[str]) -> bool:
    """True when a group's committed offsets show it consuming (not broker bookkeeping)."""
    if group in BOOKKEEPING_GROUPS:
        return False
    own_retry = retry_topic(group)
    return any(not is_system_topic(t) or t == own_retry for t in topics)


def list_groups(coordinated: Iterable[tuple[str, str]],
                offsets: Mapping[str, Iterable[tuple[str, int, int]]],
                popping: Iterable[str], defined: Callable[[str], bool]) -> list[ListedGroup]:
    """`coordinated`: (group, state) from the coordinator; `offsets`: group -> its committed
    (topic, queue, offset); `popping`: groups with pop state; `defined(group)`: has a
    definition. Sorted by group id."""
    states: dict[str, str] = {}
    seen: dict[str, set[str]] = {}
    for group, state in coordinated:
        states[group] = state
        seen.setdefault(group, set()).add(PUSH)
    for group in popping:
        seen.setdefault(group, set()).add(POP)
    for group, entries in offsets.items():
        if consumed_offsets(group, (topic for topic, _, _ in entries)):
            seen.setdefault(group, set()).add(PULL)
    return [ListedGroup(group, states.get(group, ""), first_type(types), defined(group))
            for group, types in sorted(seen.items())]
