"""Damage the ways a reader or a restarted replica must survive: a pull reply drawn damaged
(property tests of record decoders), and a CommitLog that lost its unflushed tail (a power
loss: the integration tests of issue #36 and the chaos suite's disk faults)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import strategies as st


def damaged(raw: bytes, data: st.DataObject) -> bytes:
    """`raw` as drawn: intact, a byte flipped, a torn tail, or garbage after it."""
    out = bytearray(raw)
    damage = data.draw(st.sampled_from(["none", "flip", "tear", "garbage"]))
    if damage == "flip":
        out[data.draw(st.integers(0, len(out) - 1))] ^= data.draw(st.integers(1, 255))
    elif damage == "tear":
        out = out[:data.draw(st.integers(1, len(out) - 1))]
    elif damage == "garbage":
        out += data.draw(st.binary(min_size=1, max_size=200))
    return bytes(out)


def _segments(commitlog: Path) -> list[tuple[int, Path]]:
    return sorted((int(p.name), p) for p in commitlog.iterdir() if p.name.isdigit())


def written_end(commitlog: Path) -> int:
    """The log end as the files show it: the base of the last segment holding data plus the
    offset past its last non-zero byte (segments are preallocated with zeros; 0 for an empty
    log). A record ending in zero bytes reads a little short: what `lose_tail` cuts from
    there is still the end of the log."""
    for base, path in reversed(_segments(commitlog)):
        data = path.read_bytes().rstrip(b"\0")
        if data:
            return base + len(data)
    return 0


def lose_tail(commitlog: Path, end: int, length: int) -> int:
    """What a power loss does to an ASYNC_FLUSH replica's unflushed tail: the last `length`
    bytes below log end `end` never reached the disk (zeros, as the preallocated segment
    held before; the cut lands inside a record, so recovery also drops that torn record).
    Only the segment holding `end` is cut (a power loss loses the active segment's tail).
    Returns how many bytes were zeroed."""
    segments = [s for s in _segments(commitlog) if s[0] < end]
    if not segments:
        return 0
    base, path = max(segments, key=lambda s: s[0])
    cut = max(0, end - length - base)
    with open(path, "r+b") as f:
        f.seek(cut)
        f.write(bytes(end - base - cut))
    return end - base - cut
