"""The HA stream's framing: plain TCP, big-endian, no per-record structure.

How the broker's role layer (`tidemq.broker.replication.host`) uses it: not directly (HAServer and HAClient speak it); the layout is documented in
docs/replication.md.

    handshake  slave -> master   u32 length | JSON {"replica_id", "last_epoch", "max_offset",
                                                    "epochs", "confirmed_offsets": true}
    reply      master -> slave   u32 length | JSON {"epoch", "truncate_to", "epochs",
                                                    "confirmed"}, or {"epoch", "rebuild_from",
                                                    "log_end", "epochs", "confirmed", "queues"}
                                 (below the master's oldest segment), or {"error"}
    data       master -> slave   i64 physical_offset | u32 size | i64 confirmed
                                 | size bytes of the CommitLog
                                 (size 0: a heartbeat; physical_offset is then the sender's cursor)
    report     slave -> master   i64 the slave's log end (after every append and periodically)

Data frames carry CommitLog bytes as they are (records and fillers, cut anywhere): the
master never decodes a record to ship it. `confirmed` is the master's confirmed offset (its
read fence; -1 when it fences no reads, an ASYNC_MASTER): a slave serves reads below it only,
as a Kafka follower serves below the high watermark its fetches return. A peer that does not
send "confirmed_offsets" / "confirmed" in its handshake (an older build, during a rolling
upgrade) gets frames without the field, and the slave then fences nothing.
"""

from __future__ import annotations

import asyncio
import json
import struct
from collections.abc import Callable
from typing import Any

HANDSHAKE_LENGTH = struct.Struct(">I")
DATA_HEADER = struct.Struct(">qI")    # physical_offset 8 | size 4
FENCED_DATA_HEADER = struct.Struct(">qIq")   # ... | confirmed 8
NOT_FENCED = -1
REPORT = struct.Struct(">q")          # the slave's log end
MAX_HANDSHAKE = 1 << 20
MAX_FRAME = 1 << 30


class ProtocolError(Exception):
    """The peer sent something that is not this protocol."""


def encode_handshake(message: dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return HANDSHAKE_LENGTH.pack(len(body)) + body


async def read_handshake(reader: asyncio.StreamReader) -> dict[str, Any]:
    (length,) = HANDSHAKE_LENGTH.unpack(await reader.readexactly(HANDSHAKE_LENGTH.size))
    if length > MAX_HANDSHAKE:
        raise ProtocolError(f"a handshake of {length} bytes is too large")
    try:
        message = json.loads(await reader.readexactly(length))
    except ValueError as exc:
        raise ProtocolError(f"the handshake is not JSON ({exc})") from None
    if not isinstance(message, dict):
        raise ProtocolError("the handshake is not a JSON object")
    return message


def encode_data_header(physical_offset: int, size: int, confirmed: int | None = None) -> bytes:
    """A data frame's header; `confirmed` None: the older header without it."""
    if confirmed is None:
        return DATA_HEADER.pack(physical_offset, size)
    return FENCED_DATA_HEADER.pack(physical_offset, size, confirmed)


async def read_frame(reader: asyncio.StreamReader,
                     fenced: bool = False) -> tuple[int, bytes, int | None]:
    """(physical offset, bytes, confirmed) of the next data frame: empty bytes for a
    heartbeat; confirmed None when the header has no such field (`fenced` False) or it is
    NOT_FENCED."""
    if fenced:
        physical_offset, size, confirmed = FENCED_DATA_HEADER.unpack(
            await reader.readexactly(FENCED_DATA_HEADER.size))
    else:
        physical_offset, size = DATA_HEADER.unpack(await reader.readexactly(DATA_HEADER.size))
        confirmed = NOT_FENCED
    if size > MAX_FRAME:
        raise ProtocolError(f"a frame of {size} bytes is too large")
    if confirmed < NOT_FENCED:
        raise ProtocolError(f"a frame's confirmed offset {confirmed} is negative")
    return (physical_offset, await reader.readexactly(size) if size else b"",
            None if confirmed == NOT_FENCED else confirmed)


def encode_report(log_end: int) -> bytes:
    return REPORT.pack(log_end)


async def read_report(reader: asyncio.StreamReader) -> int:
    return REPORT.unpack(await reader.readexactly(REPORT.size))[0]


async def watch_silence(transport: asyncio.BaseTransport, last_heard: Callable[[], float],
                        timeout_s: float) -> None:
    """Abort `transport` once nothing was heard for `timeout_s` (the housekeeping timeout):
    one watchdog per connection instead of a timeout around every read."""
    loop = asyncio.get_running_loop()
    while True:
        silent = loop.time() - last_heard()
        if silent >= timeout_s:
            transport.abort()
            return
        await asyncio.sleep(timeout_s - silent)   # a deadline, not synchronisation
