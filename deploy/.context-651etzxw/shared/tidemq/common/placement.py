"""Which master broker coordinates a consumer group.

Every client and broker must pick the same coordinator for a group without asking anyone, so
the choice is a pure function of the group name and the set of broker group names (the
coordinator is the chosen group's master; with replication a group keeps its place while its
broker group elects a new master): CRC32 of
the UTF-8 group name modulo the number of masters, indexing the sorted, de-duplicated names
(Kafka: hash of the group id modulo the partitions of __consumer_offsets).

Why zlib.crc32 and not hash(): Python salts str hashes per process (PYTHONHASHSEED), so two
processes would disagree on the coordinator; CRC32 is fixed forever and fast. Sorting the
names makes the answer independent of the order the name server lists brokers in.
The price of plain modulo: adding or removing a master moves most groups to a new
coordinator (each moved group rebalances once, its members rediscover the coordinator on
NOT_COORDINATOR); broker-set changes are rare, so simplicity wins over rendezvous hashing.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from tidemq.common.errors import ServiceUnavailable


def coordinator_for(group: str, broker_names: Iterable[str]) -> str:
    """The broker name coordinating `group` among `broker_names` (order irrelevant).

    >>> coordinator_for("orders-consumers", ["broker-b", "broker-a"])
    'broker-a'
    """
    names = sorted(set(broker_names))
    if not names:
        raise ServiceUnavailable(
            f"no broker is registered, so group {group!r} has no coordinator",
            code="COORDINATOR_NOT_AVAILABLE",
        )
    return names[zlib.crc32(group.encode("utf-8")) % len(names)]
