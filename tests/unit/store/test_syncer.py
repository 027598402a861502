"""The Syncer contract, for the C syncer and the Python fallback alike: fsync passes reported
through a real eventfd with their highest ticket, merged requests, a real fdatasync error
(a pipe cannot be synced: EINVAL), closed descriptors skipped, and a clean close."""

from __future__ import annotations

import errno
import os
import select
import threading

import pytest
import tidemq_speedups
from tidemq.broker.store.syncer import PySyncer, Syncer

IMPLEMENTATIONS = pytest.mark.parametrize("make", [Syncer, PySyncer], ids=["native", "python"])


def test_the_native_syncer_is_the_default():
    assert Syncer is tidemq_speedups.Syncer


def finished_passes(syncer, notify_fd: int, wanted_ticket: int) -> list[tuple[int, int]]:
    """Poll on the eventfd until a pass reports `wanted_ticket` (10 s at most)."""
    passes: list[tuple[int, int]] = []
    while not any(ticket == wanted_ticket for ticket, _ in passes):
        ready, _, _ = select.select([notify_fd], [], [], 10)
        assert ready, f"no pass reported ticket {wanted_ticket}; got {passes}"
        os.eventfd_read(notify_fd)
        passes += syncer.poll()
    return passes


@pytest.fixture
def notify_fd():
    fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
    yield fd
    os.close(fd)


@IMPLEMENTATIONS
def test_a_request_is_synced_and_reported(tmp_path, notify_fd, make):
    syncer = make(notify_fd)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    os.write(fd, b"x" * 4096)
    syncer.request([fd, fd], 4096)       # the same file twice: one fsync
    assert finished_passes(syncer, notify_fd, 4096) == [(4096, 0)]
    syncer.request([], 5000)             # nothing to sync still reports its ticket
    assert finished_passes(syncer, notify_fd, 5000) == [(5000, 0)]
    syncer.close()
    os.close(fd)


@IMPLEMENTATIONS
def test_requests_made_during_a_pass_are_merged_into_the_next(tmp_path, notify_fd, make):
    syncer = make(notify_fd)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    for ticket in range(1, 201):
        os.write(fd, b"y" * 512)
        syncer.request([fd], ticket)
    passes = finished_passes(syncer, notify_fd, 200)
    tickets = [ticket for ticket, _ in passes]
    assert tickets == sorted(tickets) and len(tickets) < 200, passes
    assert {err for _, err in passes} == {0}
    syncer.close()
    os.close(fd)


@IMPLEMENTATIONS
def test_a_failed_fdatasync_is_reported_with_its_errno(notify_fd, make):
    syncer = make(notify_fd)
    read_end, write_end = os.pipe()
    syncer.request([write_end], 7)
    assert finished_passes(syncer, notify_fd, 7) == [(7, errno.EINVAL)]
    syncer.close()
    os.close(read_end)
    os.close(write_end)


@IMPLEMENTATIONS
def test_a_closed_descriptor_is_skipped_and_close_is_final(tmp_path, notify_fd, make):
    syncer = make(notify_fd)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    os.close(fd)
    syncer.request([fd], 3)              # its segment was deleted meanwhile
    assert finished_passes(syncer, notify_fd, 3) == [(3, 0)]
    syncer.close()
    with pytest.raises(RuntimeError, match="closed"):
        syncer.request([], 4)


@IMPLEMENTATIONS
def test_close_serves_what_waits(tmp_path, notify_fd, make):
    syncer = make(notify_fd)
    fd = os.open(tmp_path / "f", os.O_RDWR | os.O_CREAT)
    barrier = threading.Barrier(4)

    def requester(base: int) -> None:
        barrier.wait()
        for n in range(50):
            syncer.request([fd], base + n)

    threads = [threading.Thread(target=requester, args=(k * 1000,)) for k in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    syncer.close()
    passes = syncer.poll()
    assert passes and max(ticket for ticket, _ in passes) == 3049
    os.close(fd)
