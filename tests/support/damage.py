"""Damage a pull reply the ways a reader must survive, for property tests of record decoders."""

from __future__ import annotations

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
