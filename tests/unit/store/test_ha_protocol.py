"""The HA stream's framing: frames and handshakes written as one byte stream and read back
through a real asyncio StreamReader fed in arbitrary pieces give exactly what was sent."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.broker.store.ha.protocol import (
    NOT_FENCED,
    ProtocolError,
    encode_data_header,
    encode_handshake,
    encode_report,
    read_frame,
    read_handshake,
    read_report,
)

frames = st.lists(st.tuples(st.integers(0, 2**62), st.binary(max_size=300),
                            st.one_of(st.none(), st.integers(0, 2**62))), max_size=12)
handshakes = st.dictionaries(st.text(max_size=8), st.one_of(st.integers(-1, 2**62),
                                                            st.text(max_size=20)), max_size=4)


def pieces(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(stream) + 1) for c in cuts} | {0, len(stream)})
    return [stream[a:b] for a, b in zip(points, points[1:], strict=False)]


def read_back(stream: bytes, cuts: list[int], frames: int, reports: int, fenced: bool):
    async def read():
        reader = asyncio.StreamReader()
        for piece in pieces(stream, cuts):
            reader.feed_data(piece)
        reader.feed_eof()
        got_hello = await read_handshake(reader)
        got = [await read_frame(reader, fenced) for _ in range(frames)]
        got_reports = [await read_report(reader) for _ in range(reports)]
        assert await reader.read() == b""
        return got_hello, got, got_reports

    return asyncio.run(read())


@settings(max_examples=200, deadline=None)
@given(handshakes, frames, st.lists(st.integers(0, 2**62), max_size=5),
       st.lists(st.integers(0, 10_000), max_size=20), st.booleans())
def test_frames_round_trip_through_a_stream_in_any_pieces(hello, sent, reports, cuts, fenced):
    """With the confirmed offset (fenced; None travels as NOT_FENCED) and without it (an
    older peer's frames: no confirmed offset comes back)."""
    stream = encode_handshake(hello) + b"".join(
        encode_data_header(offset, len(chunk),
                           (NOT_FENCED if confirmed is None else confirmed) if fenced else None)
        + chunk for offset, chunk, confirmed in sent
    ) + b"".join(encode_report(r) for r in reports)
    expected = [(offset, chunk, confirmed if fenced else None)
                for offset, chunk, confirmed in sent]
    assert read_back(stream, cuts, len(sent), len(reports), fenced) == (hello, expected, reports)


def test_a_negative_confirmed_offset_is_refused():
    stream = encode_handshake({}) + encode_data_header(0, 0, -2)
    with pytest.raises(ProtocolError, match="negative"):
        read_back(stream, [], 1, 0, True)


def test_a_handshake_that_is_not_a_json_object_is_refused():
    async def read(raw: bytes):
        reader = asyncio.StreamReader()
        reader.feed_data(raw)
        reader.feed_eof()
        return await read_handshake(reader)

    with pytest.raises(ProtocolError, match="not JSON"):
        asyncio.run(read(b"\0\0\0\3abc"))
    with pytest.raises(ProtocolError, match="not a JSON object"):
        asyncio.run(read(b"\0\0\0\x011"))
    with pytest.raises(ProtocolError, match="too large"):
        asyncio.run(read(b"\x7f\0\0\0"))
    with pytest.raises(asyncio.IncompleteReadError):
        asyncio.run(read(b"\0\0\0\x09{}"))
