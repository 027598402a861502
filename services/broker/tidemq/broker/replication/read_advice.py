"""Which replica a consumer should pull from next (RocketMQ's suggestWhichBrokerId).

A consumer reading far behind the log end reads bytes that are no longer in the page cache:
serving it from the master costs the master disk reads that compete with the producers'
appends. The master therefore suggests an in-sync slave to a pull whose first record lies
more than `behind_bytes` behind the log end (RocketMQ: 40 % of physical memory), and a slave
sends the consumer back to the master once it has caught up to within that distance. The
answer rides on the pull reply; the client honours it on its next pull of that queue. One
8-byte read per pull, nothing per message.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable

from tidemq.broker.registration import MASTER, SLAVE
from tidemq.common import record

MASTER_ID = 0
MEMORY_RATIO = 0.40   # RocketMQ's accessMessageInMemoryMaxRatio
_PHYSICAL = struct.Struct(">q")


def default_behind_bytes() -> int:
    """40 % of this machine's physical memory (what the page cache can hold, roughly)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * MEMORY_RATIO)
    except (ValueError, OSError):
        return 4 << 30


class ReadAdvisor:
    """`advise(records)` → the registered broker id to suggest for the next pull, or None
    (keep reading where you are: this replica is the master and the reader is close enough,
    or no in-sync slave exists)."""

    def __init__(self, *, role: Callable[[], str], log_end: Callable[[], int],
                 in_sync_slave_ids: Callable[[], list[int]], behind_bytes: int) -> None:
        self._role = role                            # MASTER / SLAVE / "" (registration)
        self._log_end = log_end
        self._in_sync_slave_ids = in_sync_slave_ids  # registered ids (replica + 1), sorted
        self.behind_bytes = behind_bytes if behind_bytes > 0 else default_behind_bytes()

    def advise(self, records: bytes) -> int | None:
        if len(records) < record.OFF_PHYSICAL_OFFSET + 8:
            return None
        (first,) = _PHYSICAL.unpack_from(records, record.OFF_PHYSICAL_OFFSET)
        far_behind = self._log_end() - first > self.behind_bytes
        role = self._role()
        if role == MASTER and far_behind:
            slaves = self._in_sync_slave_ids()
            return slaves[0] if slaves else None
        if role == SLAVE and not far_behind:
            return MASTER_ID
        return None
