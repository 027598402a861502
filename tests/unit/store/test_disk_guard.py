"""The disk guard (store/disk.py): states from statvfs figures, a no-space append turning the
store FULL without leaving a half-made segment, forced retention, and the way back."""

from __future__ import annotations

import errno
import os

import pytest
from tidemq.broker.store import DiskGuard, DiskState, DiskUsage, StorageFull
from tidemq.broker.store import mapped_file as mapped_file_module

from tests.support.processes import wait_until
from tests.unit.store.helpers import encode_batch, open_store, small_config

MIB = 1 << 20


class FakeDisk:
    """A file system of `total` bytes whose use the test sets."""

    def __init__(self, total: int = 100 * MIB, used: int = 0) -> None:
        self.total, self.used, self.looks = total, used, 0

    def ratio(self, ratio: float) -> None:
        self.used = int(self.total * ratio)

    def __call__(self, path) -> DiskUsage:
        self.looks += 1
        return DiskUsage(str(path), self.total, self.total - self.used, self.used)


def test_states_follow_the_marks_and_listeners_hear_each_change(tmp_path):
    disk = FakeDisk()
    guard = DiskGuard(small_config(tmp_path, disk_warn_ratio=0.7, disk_full_ratio=0.9), disk)
    heard = []
    guard.add_listener(lambda state, usage: heard.append((state, round(usage.used_ratio, 2))))
    for ratio, expected in ((0.5, DiskState.OK), (0.7, DiskState.WARN), (0.8, DiskState.WARN),
                            (0.9, DiskState.FULL), (0.95, DiskState.FULL),
                            (0.89, DiskState.WARN), (0.1, DiskState.OK)):
        disk.ratio(ratio)
        assert guard.check() is expected, ratio
        assert guard.refuses_writes is (expected is DiskState.FULL)
    assert heard == [(DiskState.WARN, 0.7), (DiskState.FULL, 0.9), (DiskState.WARN, 0.89),
                     (DiskState.OK, 0.1)]


def test_the_refusal_names_the_path_the_free_space_and_the_mark(tmp_path):
    disk = FakeDisk(total=1000 * MIB)
    guard = DiskGuard(small_config(tmp_path), disk)
    disk.ratio(0.9)
    guard.check()
    error = guard.refusal()
    assert isinstance(error, StorageFull) and error.code == "STORAGE_FULL"
    assert str(tmp_path) in str(error) and "100.0 MiB free" in str(error)
    assert "90.0% used" in str(error) and "from 85% used" in str(error)
    assert (error.path, error.free_bytes) == (str(tmp_path), 100 * MIB)


def test_a_no_space_append_turns_the_store_full_until_a_segment_fits(tmp_path, monkeypatch):
    disk = FakeDisk(total=100 * MIB)
    config = small_config(tmp_path, disk_check_interval_ms=3_600_000)
    store = open_store(config)
    store.disk._usage_of = disk
    store.retention.used_ratio = lambda _path: disk(_path).used_ratio
    try:
        raw = encode_batch("t", [b"x" * 4000])[0]
        store.append_batch("t", 0, raw, 1)
        real_fallocate = os.posix_fallocate

        def no_space(fd, offset, length):   # only CommitLog segments find no room
            if "commitlog" in os.readlink(f"/proc/self/fd/{fd}"):
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            real_fallocate(fd, offset, length)

        monkeypatch.setattr(mapped_file_module.os, "posix_fallocate", no_space)
        disk.used = disk.total - 10 * 1024   # 10 KiB left: less than a 64 KiB segment
        appended = 1
        with pytest.raises(StorageFull) as refused:
            while True:   # fills the first segment, then needs the next one
                store.append_batch("t", 0, raw, 1)
                appended += 1
        assert "the next CommitLog segment (64.0 KiB) does not fit" in str(refused.value)
        assert "No space left on device" in str(refused.value)
        assert store.disk.state is DiskState.FULL
        # No half-made segment file is left to fail the next start's load.
        assert [p.name for p in config.commitlog_dir.iterdir() if not p.name.startswith(".")] \
            == ["00000000000000000000"]
        assert store.max_offset("t", 0) == appended   # nothing of the refused batch counted
        # Space comes back, but not a segment's worth: still FULL.
        disk.used = disk.total - 32 * 1024   # 0.03 % free
        assert store.disk.check() is DiskState.FULL
        assert store.retention.over_disk()   # forced clean-up wants a segment's room
        # Space returns: the next check lets writes through, and the append works again.
        monkeypatch.setattr(mapped_file_module.os, "posix_fallocate", real_fallocate)
        disk.used = int(disk.total * 0.3)
        assert store.disk.check() is DiskState.OK
        assert not store.retention.over_disk()
        store.append_batch("t", 0, raw, 1)
        assert store.max_offset("t", 0) == appended + 1
    finally:
        store.shutdown()


def test_full_disk_makes_housekeeping_run_retention_at_once_and_resume(tmp_path):
    """Retention every hour, the disk looked at every 50 ms: a FULL disk runs retention on
    the next look; once it deleted enough the guard lets writes through without waiting."""
    config = small_config(tmp_path, retention_check_interval_ms=3_600_000,
                          disk_check_interval_ms=50, disk_max_used_ratio=0.8)
    store = open_store(config)
    try:
        for _ in range(40):   # ~3 segments of 64 KiB
            store.append_batch("t", 0, encode_batch("t", [b"r" * 5000])[0], 1)
        segments = len(store.commitlog.segments)
        assert segments >= 3

        def used_ratio(_path):   # each deleted segment frees 10 % of the fake disk
            return 0.95 - 0.1 * (segments - len(store.commitlog.segments))

        heard = []
        store.disk.add_listener(lambda state, _usage: heard.append(state))
        store.retention.used_ratio = used_ratio
        store.disk._usage_of = lambda path: DiskUsage(
            str(path), 100 * MIB, int((1 - used_ratio(path)) * 100 * MIB),
            int(used_ratio(path) * 100 * MIB))
        wait_until(lambda: heard[-1:] == [DiskState.WARN], 10, message="space reclaimed")
        assert heard == [DiskState.FULL, DiskState.WARN]   # 0.75: at the warning level
        assert len(store.commitlog.segments) == segments - 2   # 0.95 → 0.75, below 0.8
        assert store.min_offset("t", 0) > 0
    finally:
        store.shutdown()


def test_the_ratios_are_checked(tmp_path):
    with pytest.raises(ValueError, match="disk_warn_ratio <= disk_full_ratio"):
        small_config(tmp_path, disk_warn_ratio=0.9, disk_full_ratio=0.8)
    with pytest.raises(ValueError, match="disk_check_interval_ms"):
        small_config(tmp_path, disk_check_interval_ms=0)
