"""Where whole records end in replicated bytes: a slave's log end only ever advances to a
record or filler boundary, so a chunk of the stream that ends inside a record leaves that
record's head as a tail until the rest arrives.

Only the 8-byte (total_size, magic) heads are read, one per record: the slave never decodes a
record (its dispatcher scans them afterwards, in C, as on the master).
"""

from __future__ import annotations

import struct

from tidemq.common import record

from ..config import ReplicationGap
from ..segment import FILLER_MIN, MIN_RECORD_SIZE

_SIZE_MAGIC = struct.Struct(">iI")


def complete_prefix(chunk: bytes | bytearray | memoryview, physical_offset: int,
                    segment_size: int, max_message_size: int) -> int:
    """How many leading bytes of `chunk` (which starts at log position `physical_offset`, a
    boundary) are whole records and fillers. A filler spans to its segment's end and counts
    once all its bytes are there. Raises ReplicationGap where no record or filler starts."""
    unpack, size, pos = _SIZE_MAGIC.unpack_from, len(chunk), 0
    message_magic, blank_magic = record.MESSAGE_MAGIC, record.BLANK_MAGIC
    while pos + FILLER_MIN <= size:
        total, magic = unpack(chunk, pos)
        at = physical_offset + pos
        if magic == blank_magic:
            if total != segment_size - at % segment_size:
                raise ReplicationGap(f"a filler at commitlog offset {at} does not reach its "
                                     "segment's end")
        elif magic != message_magic or not MIN_RECORD_SIZE <= total <= max_message_size:
            raise ReplicationGap(f"no record starts at commitlog offset {at} in the replicated "
                                 "bytes")
        if pos + total > size:
            break
        pos += total
    return pos
