"""Copy-forward (store/relocation.py, docs/storage.md "How compaction frees disk"): a compacted
topic's live records are copied out of the segments retention wants gone, so a changelog topic
no longer pins the shared CommitLog; offsets, bodies and keys stay as they were, on every
replica and across restarts."""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from tidemq.broker.store.compaction import CompactionPolicy
from tidemq.broker.store.consume_queue import UNIT
from tidemq.broker.store.reader import GetStatus
from tidemq.broker.store.relocation import decode_relocation, encode_relocation
from tidemq.broker.store.retention import QueueRetention
from tidemq.common import record

from .helpers import encode_batch, forget_derived_state, reopened, small_config
from .test_compaction_crash import TOPIC as STATE
from .test_compaction_crash import append, compacted_model
from .test_compaction_crash import readable as readable_state

TOPIC = "changelog"
OTHER = "events"
KEYS = 100
EAGER = CompactionPolicy(min_lag_ms=0, delete_retention_ms=0)
# Every finished segment is past the global age at once; the shared disk's own use must not
# force deletions under the test (forced clean-up ignores every topic).
CONFIG = dict(delete_when_hour=None, retention_hours=0.0, disk_max_used_ratio=1.0,
              disk_full_ratio=1.0, compaction_io_bytes_s=0)


def policies(store) -> None:
    store.compactor.topic_policy = lambda topic: EAGER if topic == TOPIC else None
    store.retention.topic_policy = lambda topic: (
        QueueRetention(holds=True, compact=True) if topic == TOPIC else QueueRetention())


def send(store, key: int, body: bytes) -> int:
    raw, _ = record.encode_message(record.OutgoingMessage(TOPIC, body, keys=[f"key-{key}"]))
    return store.append_batch(TOPIC, 0, raw, 1).first_queue_offset


def fill_other(store, count: int) -> None:
    for _ in range(count):
        store.append_batch(OTHER, 0, encode_batch(OTHER, [b"e" * 1000])[0], 1)


def round_of_updates(store, round_no: int, latest: dict[int, tuple[int, bytes]]) -> None:
    """Hot keys (10-99) updated every round, cold ones (0-9) only in round 0, between
    ordinary records of another topic."""
    for key in range(KEYS):
        if key >= 10 or round_no == 0:
            body = f"key-{key}-round-{round_no}".encode() * 8
            latest[key] = (send(store, key, body), body)
        if key % 10 == 0:
            fill_other(store, 5)


def housekeeping(store) -> int:
    """A compaction pass, the copy-forward after it, then retention: segments deleted."""
    assert store.wait_dispatched(10)
    store.compactor.run_once()
    store.relocator.run_once()
    return store.retention.run_once()


def readable(store) -> list[tuple[int, bytes]]:
    found, offset = [], store.min_offset(TOPIC, 0)
    while offset < store.max_offset(TOPIC, 0):
        got = store.get_messages(TOPIC, 0, offset, 16)
        for pos, header in record.scan_records(got.records) if got.records else []:
            found.append((header[record.H_QUEUE_OFFSET], record.body_at(got.records, pos, header)))
        assert got.next_begin_offset > offset, got
        offset = got.next_begin_offset
    return found


def expected(latest: dict[int, tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    return sorted(latest.values())


def test_relocation_record_round_trip():
    raw = record.encode(TOPIC, b"v", queue_id=3, queue_offset=42)
    moved = decode_relocation(encode_relocation(TOPIC, 3, 42, 1234, 7, raw))
    assert (moved.topic, moved.queue_id, moved.queue_offset, moved.from_physical, moved.tag,
            moved.size) == (TOPIC, 3, 42, 1234, 7, len(raw))


def test_a_changelog_topic_no_longer_pins_the_commitlog(tmp_path):
    config = small_config(tmp_path, **CONFIG)
    latest: dict[int, tuple[int, bytes]] = {}
    with reopened(config) as store:
        policies(store)
        round_of_updates(store, 0, latest)
        store.compactor.run_once()
        for round_no in range(1, 4):            # without copy-forward: the cold keys pin
            round_of_updates(store, round_no, latest)
            assert store.wait_dispatched(10)
            store.compactor.run_once()
            store.retention.run_once()
        pinned = store.commitlog.min_offset
        assert pinned == 0, "round 0's segment holds the cold keys"
        peak = len(store.commitlog.segments)
        for round_no in range(4, 30):
            round_of_updates(store, round_no, latest)
            housekeeping(store)
            assert readable(store) == expected(latest)
        housekeeping(store)
        assert store.commitlog.min_offset > pinned
        total_written = store.commitlog.max_offset
        # 30 rounds wrote ~30 segments; live data is ~100 records of ~150 bytes: what stays is
        # the current round's records and the segments still being emptied
        assert len(store.commitlog.segments) <= peak + 1
        assert total_written >= 20 * config.segment_size
        assert store.relocator.records_relocated >= 10      # the cold keys at least
        assert store.relocator.bytes_relocated > 0
        # offsets unchanged, latest value of every key at its original offset, superseded gone
        assert readable(store) == expected(latest)
        for offset, body in expected(latest):
            got = store.get_message_at(TOPIC, 0, offset)
            assert got.status is GetStatus.FOUND
            header = record.HEADER.unpack_from(got.records)
            assert header[record.H_QUEUE_OFFSET] == offset
            assert record.body_at(got.records, 0, header) == body
        assert store.max_offset(TOPIC, 0) == max(o for o, _ in latest.values()) + 1
        # the keys are indexed at the copies: one hit per key, its latest value
        for key in (0, 5, 99):
            hits = store.query_by_key(TOPIC, f"key-{key}", 0, 1 << 62)
            assert [record.body_at(h, 0, record.HEADER.unpack_from(h)) for h in hits] == [
                latest[key][1]]
    with reopened(config) as again:          # recovery replays the relocations harmlessly
        policies(again)
        assert readable(again) == expected(latest)
        housekeeping(again)
        assert readable(again) == expected(latest)


def test_a_segment_mostly_live_is_not_copied(tmp_path):
    """Copying a segment whose compacted records are more than the configured share of it
    would free too little: it stays (Kafka's min.cleanable.dirty.ratio, inverted)."""
    with reopened(small_config(tmp_path, **CONFIG)) as store:
        policies(store)
        for i in range(300):                 # distinct keys: every record stays live
            send(store, i, b"x" * 500)
        assert housekeeping(store) == 0
        assert store.relocator.records_relocated == 0
        assert store.commitlog.min_offset == 0


def copy_log(master, slave) -> None:
    """What the HA stream does: the master's log past the slave's end, a segment at a time,
    appended on the slave, then dispatched there."""
    offset = slave.commitlog.replica_end
    while offset < master.commitlog_max_offset():
        segment = master.commitlog.segment_for(offset)
        take = min(master.commitlog_max_offset(), segment.end_offset) - offset
        slave.append_replicated(offset, master.commitlog.read(offset, take))
        offset += take
    assert slave.wait_dispatched(10)


def test_a_slave_replaying_the_log_reaches_the_same_state_and_frees_the_same(tmp_path):
    latest: dict[int, tuple[int, bytes]] = {}
    with reopened(small_config(tmp_path / "m", **CONFIG)) as master, \
            reopened(small_config(tmp_path / "s", **CONFIG)) as slave:
        slave.become_slave()
        policies(master)
        policies(slave)

        confirmed, held_back = 0, 0
        slave.follow_confirmed(confirmed)     # a SYNC_MASTER's slave: reads fenced
        for round_no in range(20):
            round_of_updates(master, round_no, latest)
            copy_log(master, slave)          # before the master deletes what the slave has not got
            housekeeping(master)
            copy_log(master, slave)
            if slave.dispatcher.relocated_end > confirmed:   # copies not confirmed yet:
                assert slave.retention.run_once() == 0       # their originals stay
                held_back += 1
            confirmed = slave.commitlog.max_offset
            slave.follow_confirmed(confirmed)
            slave.retention.run_once()      # a slave decides nothing; it deletes what it may
        assert master.relocator.records_relocated > 0 and held_back > 0
        assert readable(slave) == readable(master) == expected(latest)
        assert slave.commitlog.min_offset == master.commitlog.min_offset > 0


def test_queues_rebuilt_from_the_log_alone_find_the_relocated_records(tmp_path):
    """Consume queues and index deleted (or a queue rebuilt after a truncation): the
    dispatcher rebuilds them from the log, whose originals of relocated records are gone, so
    the relocation records themselves give those offsets their units back."""
    config = small_config(tmp_path, **CONFIG)
    latest: dict[int, tuple[int, bytes]] = {}
    with reopened(config) as store:
        policies(store)
        for round_no in range(12):
            round_of_updates(store, round_no, latest)
            housekeeping(store)
        assert store.commitlog.min_offset > 0 and store.relocator.records_relocated >= 10
        assert readable(store) == expected(latest)
    forget_derived_state(config)
    with reopened(config) as rebuilt:
        policies(rebuilt)
        assert readable(rebuilt) == expected(latest)
        assert rebuilt.max_offset(TOPIC, 0) == max(o for o, _ in latest.values()) + 1
        hits = rebuilt.query_by_key(TOPIC, "key-3", 0, 1 << 62)
        assert [record.body_at(h, 0, record.HEADER.unpack_from(h)) for h in hits] == [
            latest[3][1]]
        for round_no in range(12, 16):     # and it goes on compacting and relocating
            round_of_updates(rebuilt, round_no, latest)
            housekeeping(rebuilt)
        assert readable(rebuilt) == expected(latest)


def test_a_truncation_cutting_relocation_records_rebuilds_the_queue(tmp_path):
    """A slave that took relocation records its new master never had cuts them (truncate_to):
    the units pointing at the cut copies are rebuilt from the log, where the originals still
    are (retention deletes none before the copies are confirmed)."""
    latest: dict[int, tuple[int, bytes]] = {}
    with reopened(small_config(tmp_path / "m", **CONFIG)) as master, \
            reopened(small_config(tmp_path / "s", **CONFIG)) as slave:
        slave.become_slave()
        policies(master)
        for round_no in range(3):
            round_of_updates(master, round_no, latest)
            assert master.wait_dispatched(10)
            master.compactor.run_once()
        before = master.commitlog.max_offset
        assert master.relocator.run_once() >= 10
        offset = 0
        while offset < master.commitlog_max_offset():
            segment = master.commitlog.segment_for(offset)
            take = min(master.commitlog_max_offset(), segment.end_offset) - offset
            slave.append_replicated(offset, master.commitlog.read(offset, take))
            offset += take
        assert slave.wait_dispatched(10)
        assert readable(slave) == expected(latest)
        slave.truncate_to(before)
        assert slave.wait_dispatched(10)
        assert readable(slave) == expected(latest)
        assert slave.queues.get(TOPIC, 0).min_live_physical() < before   # the originals


def test_min_live_physical_follows_appends_gaps_and_repoints(tmp_path):
    """Retention's holder check reads it every run: kept between runs, rescanned only past
    what it saw unless units changed in place."""
    from tidemq.broker.store.consume_queue import ConsumeQueue

    queue = ConsumeQueue(tmp_path / "q", TOPIC, 0, 8)
    queue.load()

    def brute() -> int | None:
        return min((physical for _, physical, _, _ in queue.live_units()), default=None)

    for offset in range(20):
        queue.put(offset, 1000 + offset * 10, 10, 0)
    queue.mark_gaps([(0, 3)])
    assert queue.min_live_physical() == brute() == 1030
    queue.put_units(20, b"".join(UNIT.pack(2000 + i, 10, 0) for i in range(5)))
    assert queue.min_live_physical() == brute() == 1030
    assert queue.repoint(3, 1030, 5000, 10)
    assert queue.min_live_physical() == brute() == 1040
    assert not queue.repoint(3, 1030, 6000, 10)      # already moved: idempotent
    assert queue.repoint(10, 1100, 7000, 10)          # another unit moves: the lowest stays
    assert queue.min_live_physical() == brute() == 1040
    queue.mark_gaps([(6, 8)])                         # gaps elsewhere: the lowest stays
    assert queue.min_live_physical() == brute() == 1040
    queue.mark_gaps([(4, 20)])
    assert queue.min_live_physical() == brute() == 2000
    queue.close()


def test_forced_clean_up_of_a_full_disk_copies_compacted_records_first(tmp_path):
    """Forced clean-up deletes the oldest segments whatever holds them; a compacted queue's
    live records in them are copied forward first (by retention itself, not waiting for the
    compactor's thread), so the disk's state does not cost the changelog its cold keys."""
    latest: dict[int, tuple[int, bytes]] = {}
    with reopened(small_config(tmp_path, **{**CONFIG, "retention_hours": 72.0})) as store:
        policies(store)
        for round_no in range(6):
            round_of_updates(store, round_no, latest)
            assert store.wait_dispatched(10)
            store.compactor.run_once()
        assert store.retention.run_once() == 0          # nothing due by age
        segments = len(store.commitlog.segments)
        store.retention.used_ratio = lambda _path: 1.01   # past every clean-up ratio
        deleted = store.retention.run_once()
        assert deleted == segments - 1                 # down to the active segment
        assert store.relocator.records_relocated >= 10
        assert readable(store) == expected(latest)


steps = st.lists(st.one_of(
    st.tuples(st.just("update"), st.integers(0, 1), st.one_of(st.none(), st.integers(0, 7)),
              st.integers(1, 2500), st.booleans()),
    st.tuples(st.just("fill"), st.integers(5, 40)),            # KiB of another topic
    st.tuples(st.just("housekeeping"))), min_size=1, max_size=60)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(plan=steps)
def test_any_interleaving_keeps_exactly_what_compaction_keeps(tmp_path_factory, plan):
    """Keyed updates, tombstones and keyless records over two compacted queues, other topics'
    records, and compaction + copy-forward + retention at any points: the readable records
    are always exactly those a full compaction keeps, at their offsets, also after a
    restart; and the log ends no longer than what is live plus what retention keeps."""
    config = small_config(tmp_path_factory.mktemp("relocation-plans"), **CONFIG)
    updates = []

    def model():
        return {q: offsets for q, offsets in compacted_model(updates).items() if offsets}

    def state(store):
        return {q: offsets for q, offsets in readable_state(store).items() if offsets}

    with reopened(config) as store:
        store.compactor.topic_policy = lambda topic: EAGER if topic == STATE else None
        store.retention.topic_policy = lambda topic: (
            QueueRetention(holds=True, compact=True) if topic == STATE else QueueRetention())
        for n, step in enumerate(plan):
            if step[0] == "update":
                _, queue_id, key, size, tombstone = step
                append(store, queue_id, key, size, tombstone, n)
                updates.append((queue_id, key, size, tombstone))
            elif step[0] == "fill":
                fill_other(store, step[1])
            else:
                housekeeping(store)
                assert state(store) == model()
        housekeeping(store)
        assert state(store) == model()
        event(f"records relocated: {'some' if store.relocator.records_relocated else 'none'}")
        event(f"segments deleted: {'some' if store.commitlog.min_offset else 'none'}")
    with reopened(config) as again:
        assert state(again) == model()


def test_relocated_units_stay_visible_behind_a_read_fence(tmp_path):
    """A slave of a SYNC_MASTER reads below the confirmed offset, counting a queue's units
    as a prefix in log order; relocated units point past later ones (at the log's head, maybe
    past the fence): they stay visible, so the queue's visible end never moves back while
    newer records wait for confirmation."""
    latest: dict[int, tuple[int, bytes]] = {}
    with reopened(small_config(tmp_path / "m", **CONFIG)) as master, \
            reopened(small_config(tmp_path / "s", **CONFIG)) as slave:
        slave.become_slave()
        policies(master)

        for round_no in range(4):
            round_of_updates(master, round_no, latest)
            assert master.wait_dispatched(10)
            master.compactor.run_once()
        fill_other(master, 80)          # the last round's segment is finished
        copy_log(master, slave)
        slave.follow_confirmed(slave.commitlog.max_offset)
        visible = slave.max_offset(TOPIC, 0)
        confirmed = dict(latest)
        assert master.relocator.run_once() >= 90       # the last round's values too
        for key in range(10, 30):                      # newer records, not confirmed yet
            body = f"key-{key}-late".encode()
            latest[key] = (send(master, key, body), body)
        copy_log(master, slave)
        assert slave.max_offset(TOPIC, 0) == visible
        assert readable(slave) == expected(confirmed)
        assert master.wait_dispatched(10)
        master.compactor.run_once()
        copy_log(master, slave)
        slave.follow_confirmed(slave.commitlog.max_offset)
        assert readable(slave) == readable(master) == expected(latest)


def test_the_live_share_setting_is_validated(tmp_path):
    import pytest

    with pytest.raises(ValueError, match="compaction_relocate_max_live_ratio must be within"):
        small_config(tmp_path, compaction_relocate_max_live_ratio=1.5)


def test_which_topics_have_their_live_records_copied_forward():
    """`compact` alone, and `compact,delete` with its own retention.ms, are copied forward;
    `compact,delete` following the global age rule loses its records with their segment,
    as `delete` does."""
    from tidemq.broker.topic_retention import topic_retention
    from tidemq.configclient.topics import TopicConfig

    def policy(**config):
        return topic_retention(TopicConfig("t", 1, config=tuple(config.items())))

    compacted = policy(**{"cleanup.policy": "compact"})
    assert (compacted.compact, compacted.holds) == (True, True)
    both = policy(**{"cleanup.policy": "compact,delete", "retention.ms": 60_000})
    assert (both.compact, both.holds, both.ms) == (True, True, 60_000)
    aging = policy(**{"cleanup.policy": "compact,delete"})
    assert (aging.compact, aging.holds) == (False, False)
    assert not policy(**{"cleanup.policy": "delete"}).compact
