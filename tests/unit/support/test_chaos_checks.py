"""The chaos suite's verdicts must catch what they claim to catch."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from tests.chaos.schedule import KINDS, schedule
from tests.chaos.verify import Ack, check_acks, check_replicas


def test_every_ack_found_is_clean_and_a_retried_copy_is_a_duplicate():
    stored = {(0, 0): b"a", (0, 1): b"b", (1, 0): b"b"}
    verdict = check_acks([Ack(0, 0, b"a"), Ack(1, 0, b"b")], stored)
    assert verdict.ok and verdict.acks == 2 and verdict.duplicates == 1


def test_a_missing_or_overwritten_ack_is_a_loss():
    stored = {(0, 0): b"other"}
    verdict = check_acks([Ack(0, 0, b"a"), Ack(0, 1, b"b")], stored)
    assert not verdict.ok
    assert [(a.queue_offset) for a in verdict.losses] == [0, 1]


def _write_log(directory, data: bytes, segment: int) -> None:
    directory.mkdir()
    for base in range(0, len(data), segment):
        (directory / f"{base:020d}").write_bytes(data[base:base + segment].ljust(segment, b"\0"))


def test_replicas_compared_byte_for_byte_below_the_confirmed_offset(tmp_path):
    data = bytes(range(256)) * 10
    _write_log(tmp_path / "a", data, 1024)
    _write_log(tmp_path / "b", data[:2000] + b"X" * 560, 1024)   # differs only past 2000
    logs = {"a": tmp_path / "a", "b": tmp_path / "b"}
    assert check_replicas(logs, 2000) == []
    assert check_replicas(logs, 2001) == ["b"]


@given(st.integers(0, 2**32), st.integers(0, 40))
def test_a_seed_replays_the_same_schedule(seed, count):
    first = schedule(seed, count, lease_ttl_s=3)
    assert first == schedule(seed, count, lease_ttl_s=3)
    assert all(f.kind in KINDS for f in first)
    assert all(f.hold_s > 3 for f in first if f.kind in ("pause_master", "partition_master"))
