"""Retention per topic over the shared CommitLog (docs/storage.md, "Retention per topic"): a
queue's minimum moves as its own retention.ms / retention.bytes passes, durably; a segment goes
only when no queue still needs it."""

from __future__ import annotations

import time

from tidemq.broker.store.reader import GetStatus
from tidemq.broker.store.retention import QueueRetention

from .helpers import encode_batch, reopened, small_config

# These tests judge which segments retention deletes by topic: the shared machine's disk
# passing the forced clean-up threshold (75 % by default) must not delete segments under them
# (it did, once). The forced clean-up itself is judged with a stated used ratio, below.
UNFORCED = {"disk_max_used_ratio": 1.0, "disk_full_ratio": 1.0}

BODY = b"r" * 1000


def _policies(**by_topic: QueueRetention):
    return lambda topic: by_topic.get(topic, QueueRetention())


def _fill(store, topic: str, count: int, queue_id: int = 0) -> None:
    for _ in range(count):
        store.append_batch(topic, queue_id, encode_batch(topic, [BODY])[0], 1)


def _now_ms() -> int:
    return int(time.time() * 1000)


def test_a_short_retention_topic_expires_while_the_shared_segment_stays(tmp_path):
    with reopened(small_config(tmp_path, delete_when_hour=None, **UNFORCED)) as store:
        _fill(store, "short", 30)
        _fill(store, "long", 30)
        assert store.wait_dispatched(10)
        store.retention.topic_policy = _policies(short=QueueRetention(ms=5000, holds=True))
        segments = len(store.commitlog.segments)
        assert store.retention.run_once(now_ms=_now_ms()) == 0
        assert store.min_offset("short", 0) == 0      # not 5 s old yet
        assert store.retention.run_once(now_ms=_now_ms() + 6000) == 0
        assert store.min_offset("short", 0) == store.max_offset("short", 0) == 30
        gone = store.get_messages("short", 0, 0)
        assert (gone.status, gone.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL, 30)
        assert store.min_offset("long", 0) == 0
        assert store.get_messages("long", 0, 0).status is GetStatus.FOUND
        assert len(store.commitlog.segments) == segments   # "long" still reads them
    with reopened(small_config(tmp_path, **UNFORCED)) as again:   # the expiry is durable
        assert again.min_offset("short", 0) == 30 and again.min_offset("long", 0) == 0


def test_retention_ms_expires_by_store_time_not_all_at_once(tmp_path):
    with reopened(small_config(tmp_path, **UNFORCED)) as store:
        _fill(store, "t", 5)
        assert store.wait_dispatched(10)
        cutoff = _now_ms()
        while _now_ms() <= cutoff:   # store times after `cutoff` (a millisecond clock)
            pass
        _fill(store, "t", 5)
        assert store.wait_dispatched(10)
        store.retention.topic_policy = _policies(t=QueueRetention(ms=1000, holds=True))
        store.retention.run_once(now_ms=cutoff + 1000)
        assert store.min_offset("t", 0) == 5


def test_retention_bytes_keeps_at_most_that_much_per_queue(tmp_path):
    with reopened(small_config(tmp_path, **UNFORCED)) as store:
        _fill(store, "t", 20)
        _fill(store, "t", 20, queue_id=1)
        assert store.wait_dispatched(10)
        size = len(store.read_record(store.queues.get("t", 0).physical_offset_of(0)))
        store.retention.topic_policy = _policies(t=QueueRetention(bytes=size * 7 + 10))
        store.retention.run_once()
        assert store.min_offset("t", 0) == 13 and store.min_offset("t", 1) == 13
        _fill(store, "t", 3)     # the next run counts only what is new
        assert store.wait_dispatched(10)
        store.retention.run_once()
        assert store.min_offset("t", 0) == 16 and store.min_offset("t", 1) == 13


def test_a_segment_goes_once_every_queue_in_it_expired(tmp_path):
    with reopened(small_config(tmp_path, delete_when_hour=None, **UNFORCED)) as store:
        _fill(store, "short", 200)     # about three 64 KiB segments
        assert store.wait_dispatched(10)
        segments = len(store.commitlog.segments)
        assert segments >= 3
        store.retention.topic_policy = _policies(short=QueueRetention(ms=1000, holds=True))
        assert store.retention.run_once(now_ms=_now_ms() + 2000) == segments - 1
        assert store.min_offset("short", 0) == 200


def test_a_topic_with_longer_retention_holds_a_segment_past_the_global_age(tmp_path):
    with reopened(small_config(tmp_path, delete_when_hour=None, retention_hours=1,
                                   **UNFORCED)) as store:
        _fill(store, "kept", 100)
        _fill(store, "plain", 100)
        assert store.wait_dispatched(10)
        later = _now_ms() + 2 * 3600 * 1000
        store.retention.topic_policy = _policies(kept=QueueRetention(ms=None, holds=True))
        assert store.retention.run_once(now_ms=later) == 0     # "kept" reads the oldest
        assert store.get_messages("kept", 0, 0).status is GetStatus.FOUND
        store.retention.topic_policy = _policies()            # back to the global rule
        assert store.retention.run_once(now_ms=later) > 0
        assert store.min_offset("kept", 0) > 0


def test_forced_clean_up_ignores_every_topic(tmp_path):
    with reopened(small_config(tmp_path, disk_max_used_ratio=0.5)) as store:
        _fill(store, "kept", 150)
        assert store.wait_dispatched(10)
        store.retention.topic_policy = _policies(kept=QueueRetention(holds=True))
        ratios = iter([0.9, 0.1])
        store.retention.used_ratio = lambda _path: next(ratios, 0.1)
        assert store.retention.run_once() == 1


def test_a_slave_running_its_own_retention_shows_its_readers_the_same_expiry(tmp_path):
    """docs/storage.md: every replica runs retention by the same topic settings, so a reader
    of a slave sees what a reader of the master sees (no marker replicates the expiry)."""
    with reopened(small_config(tmp_path / "m", **UNFORCED)) as master, \
            reopened(small_config(tmp_path / "s", **UNFORCED)) as slave:
        slave.become_slave()
        _fill(master, "short", 40)
        _fill(master, "long", 10)
        _fill(master, "short", 5, queue_id=1)
        slave.append_replicated(0, master.commitlog.read(0, master.commitlog.max_offset))
        assert master.wait_dispatched(10) and slave.wait_dispatched(10)
        policies = _policies(short=QueueRetention(bytes=10_000))
        now = _now_ms()
        for store in (master, slave):
            store.retention.topic_policy = policies
            store.retention.run_once(now_ms=now)
        for topic, queue_id in (("short", 0), ("short", 1), ("long", 0)):
            assert (slave.min_offset(topic, queue_id), slave.max_offset(topic, queue_id)) == (
                master.min_offset(topic, queue_id), master.max_offset(topic, queue_id))
        assert master.min_offset("short", 0) > 0 and master.min_offset("long", 0) == 0
        gone = slave.get_messages("short", 0, 0)
        assert (gone.status, gone.next_begin_offset) == (GetStatus.OFFSET_TOO_SMALL,
                                                         master.min_offset("short", 0))
