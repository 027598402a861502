"""ReadAdvisor: a master sends a far-behind reader to an in-sync slave, a slave sends a
caught-up reader back, and nothing is advised otherwise."""

from __future__ import annotations

import struct

import pytest
from tidemq.broker.replication.read_advice import MASTER_ID, ReadAdvisor, default_behind_bytes
from tidemq.common import record

LOG_END = 10_000


def records_at(physical_offset: int) -> bytes:
    head = bytearray(record.HEADER_SIZE)
    struct.pack_into(">q", head, record.OFF_PHYSICAL_OFFSET, physical_offset)
    return bytes(head)


def advisor(role: str, slaves=(2, 3)) -> ReadAdvisor:
    return ReadAdvisor(role=lambda: role, log_end=lambda: LOG_END,
                       in_sync_slave_ids=lambda: list(slaves), behind_bytes=1_000)


@pytest.mark.parametrize("role, first, slaves, expected", [
    ("MASTER", 0, (2, 3), 2),               # far behind: the first in-sync slave
    ("MASTER", LOG_END - 1_000, (2,), None),  # within reach: stay
    ("MASTER", 0, (), None),                # no in-sync slave to send it to
    ("SLAVE", LOG_END - 500, (), MASTER_ID),  # caught up: back to the master
    ("SLAVE", 0, (), None),                 # still far behind: stay on the slave
    ("", 0, (2,), None),                    # no role yet
])
def test_advice(role, first, slaves, expected):
    assert advisor(role, slaves).advise(records_at(first)) == expected


def test_nothing_pulled_nothing_advised():
    assert advisor("MASTER").advise(b"") is None


def test_the_default_distance_is_a_share_of_physical_memory():
    assert ReadAdvisor(role=str, log_end=int, in_sync_slave_ids=list,
                       behind_bytes=0).behind_bytes == default_behind_bytes() > 0
