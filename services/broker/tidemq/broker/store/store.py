"""MessageStore: the broker's storage facade (docs/storage.md), wiring log, queues, index and threads.

Example:
    store = MessageStore(StoreConfig(data_dir=Path("/tmp/s"), segment_size=64 << 20),
                         store_host=record.pack_host("127.0.0.1", 10911))
    store.start()
    raw, _ = record.encode_message(record.OutgoingMessage("orders", b"hi", tags="eu"))
    result = store.append_batch("orders", 0, raw, 1)
    store.wait_dispatched(5)
    assert store.get_messages("orders", 0, 0).record_count == 1
    store.shutdown()
"""

from __future__ import annotations

import asyncio
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from tidemq.common import record
from tidemq.common.logs import get_logger
from tidemq.common.system_topics import COMPACTION_TOPIC, DELETED_TOPICS_TOPIC, RELOCATION_TOPIC

from .affinity import pin_threads, restore_threads
from .checkpoint import AbortMarker, Checkpoint, CheckpointState
from .commitlog import CommitLog, RecoveryReport
from .compaction import Compactor, decode_marker, encode_marker
from .config import (
    AppendResult,
    AppendStatus,
    GetResult,
    GetStatus,
    InvalidBatch,
    NotMaster,
    StoreClosed,
    StoreConfig,
    StoreError,
)
from .consume_queue import ConsumeQueueTable
from .disk import DiskGuard, DiskState
from .dispatcher import ArrivalListener, Dispatcher, deleted_topic_at
from .flush import FlushService
from .ha.epoch import EpochFile
from .ha.gate import ReplicationGate
from .incarnation import next_incarnation
from .index import IndexService
from .loop_appender import LoopAppender, _Append, _settle
from .loops import ACCELERATED
from .metadata import MetadataFile, fsync_dir
from .reader import PropertyFilter, StoreReader
from .relocation import Relocator, decode_relocation
from .retention import Retention
from .store_loop import StoreLoop
from .syncer import Syncer

log = get_logger(__name__)

# An ASYNC_FLUSH append of up to this many records is dispatched on the appending thread: for
# an ack's one revive record the dispatcher thread's wake-up and GIL hand-off cost more
# (about 100 µs of broker CPU per Ack, docs/consumption.md) than dispatching it here. Larger
# batches go to the dispatcher thread, which dispatches them beside the next request.
INLINE_DISPATCH_RECORDS = 4


@dataclass(frozen=True, slots=True)
class StartupReport:
    abnormal: bool             # the abort marker was present (or no checkpoint existed)
    commitlog: RecoveryReport
    cq_units_dropped: int      # consume queue units that pointed past the recovered log
    redispatched_records: int  # records re-fed to consume queues/index past the checkpoint
    elapsed_ms: float


class MessageStore:
    syncer_factory = Syncer   # fsyncs for asyncio appends (loop_appender.py)

    def __init__(self, config: StoreConfig, store_host: bytes = b"\0" * 8) -> None:
        if len(store_host) != 8:
            raise ValueError("store_host must be 8 bytes (record.pack_host)")
        self.config = config
        self.store_host = store_host
        self.commitlog = CommitLog(config.commitlog_dir, config.segment_size,
                                   config.max_message_size, config.warm_segments)
        self.queues = ConsumeQueueTable(config.consumequeue_dir,
                                        config.consume_queue_units_per_file)
        self.index = IndexService(config.index_dir, config.index_slots, config.index_entries)
        self.dispatcher = Dispatcher(self.commitlog, self.queues, self.index,
                                     config.max_message_size)
        self.flusher = FlushService(self.commitlog, config, store_host)
        self.reader = StoreReader(self.commitlog, self.queues, self.index)
        # A full disk is a state (disk.py): checked on the housekeeping thread's timer; an
        # append that finds no room for the next segment turns it FULL at once.
        self.disk = DiskGuard(config)
        self.commitlog.no_space = self.disk.no_space
        self.retention = Retention(config, self.commitlog, self.queues, self.index,
                                   guard=self.disk,
                                   dispatched=lambda: self.dispatcher.reput_offset)
        # compaction (compaction.py): decided here on the master, applied by the dispatcher
        self.compactor = Compactor(self.commitlog, self.queues, self.append_compaction,
                                   is_master=lambda: self._running and not self._slave,
                                   interval_s=config.compaction_interval_ms / 1000,
                                   budget_bytes_s=config.compaction_io_bytes_s)
        # copy-forward of compacted queues' live records (relocation.py): on the compactor's
        # thread after each pass, within its I/O budget; retention then frees the segments
        self.relocator = Relocator(self.commitlog, self.retention.relocation_plan,
                                   self.append_relocations, self.compactor._spend,
                                   stopping=self.compactor._stop.is_set)
        self.compactor.relocator = self.relocator
        self.retention.relocations_confirmed = self._relocations_confirmed
        self.retention.relocate_before_force = self._relocate_before_force
        self.checkpoint = Checkpoint(config.data_dir / "checkpoint")
        self.abort_marker = AbortMarker(config.data_dir / "abort")
        self.epochs = EpochFile(config.data_dir / "epochs")   # leader epochs (store/ha/epoch.py)
        # present while a rebuild discards this replica's data (restart_at): finished at start
        self.rebuild_marker = MetadataFile(config.data_dir / "rebuild")
        self._checkpoint_lock = threading.RLock()   # a checkpoint is never of a discarded log
        self.startup: StartupReport | None = None
        # "<store id>:<start>" (incarnation.py): which copy of the data, which start of it
        self.incarnation = ""
        self._running = False
        self._stop = threading.Event()
        self._housekeeper: threading.Thread | None = None
        self._pinned: dict[int, set[int]] = {}
        self._appenders: list[LoopAppender] = []   # one per event loop that appended
        self._appenders_lock = threading.Lock()
        self._store_loop: StoreLoop | None = None   # blocking callers' appends (store_loop.py)
        self._gate: ReplicationGate | None = None   # SYNC/ASYNC_MASTER replication (store/ha)
        self._slave = False   # a slave takes bytes from its master only (append_replicated)
        # The group's confirmed offset as its master last told this slave (or as this replica
        # knew it when it last served as a SYNC_MASTER): a slave's read fence, a new master's
        # first one. None: reads are not fenced (single replica, ASYNC_MASTER, unknown).
        self._confirmed: int | None = None
        self._write_listeners: list[Callable[[], None]] = []   # called once per written group
        self._visibility_listeners: list[Callable[[], None]] = []   # the read fence moved

    # -- lifecycle -------------------------------------------------------------------------
    def start(self) -> StartupReport:
        began = time.monotonic()
        if self.config.cpu_affinity is not None:
            self._pinned = pin_threads(self.config.cpu_affinity)
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self.incarnation = next_incarnation(self.config.data_dir)
        state = self.checkpoint.read()
        abnormal = self.abort_marker.exists() or state is None
        self.commitlog.load()
        if self.rebuild_marker.read() is not None:
            log.warning("a rebuild from the master was interrupted: discarding the rest of "
                        "this replica's data; the master's next handshake rebuilds it")
            self.index.load()
            self._discard_data(0)
            self._write_checkpoint()
            self._remove_rebuild_marker()
            state = None
        segments = self.commitlog.segments
        if abnormal:
            scan_from = min(state.commitlog_flushed, state.dispatched) if state else 0
        else:
            keep = self.config.normal_recovery_segments
            scan_from = segments[-keep].base_offset if len(segments) >= keep else 0
        report = self.commitlog.recover(max(scan_from, self.commitlog.min_offset))
        end = self.commitlog.max_offset
        self.queues.load()
        dropped = sum(queue.truncate_beyond(end) for queue in self.queues.all())
        for queue in self.queues.all():
            queue.correct_min_offset(self.commitlog.min_offset)
        self.index.load()
        self.index.resume_after = min(self.index.end_physical_offset(), end - 1)
        reput = state.dispatched if state else self.commitlog.min_offset
        self.dispatcher.reput_offset = min(max(reput, self.commitlog.min_offset), end)
        redispatched = self.dispatcher.dispatch_available()
        self.commitlog.set_queue_offsets(self.queues.max_offsets())
        self.epochs.truncate_after(end)
        if state is not None and state.confirmed is not None:
            self._confirmed = min(state.confirmed, end)
        self.abort_marker.create()
        self._write_checkpoint()
        self.disk.check()   # a store started on a full disk refuses sends from the start
        self.dispatcher.start()
        self.flusher.start()
        self._housekeeper = threading.Thread(target=self._housekeep, name="store-housekeeping",
                                             daemon=True)
        self._housekeeper.start()
        self._running = True
        self.compactor.start()
        self.startup = StartupReport(abnormal, report, dropped, redispatched,
                                     (time.monotonic() - began) * 1000)
        log.info("store recovered", incarnation=self.incarnation, abnormal=abnormal, scan_from=report.start_offset,
                 log_end=end, records_scanned=report.records_scanned,
                 truncated_tail=report.truncated_bytes, cq_units_dropped=dropped,
                 redispatched=redispatched, elapsed_ms=round(self.startup.elapsed_ms, 1),
                 native_loops=ACCELERATED)
        if not ACCELERATED:
            log.warning("store loops run in Python: tidemq_speedups (native/) is not installed; "
                        "appends and dispatch cost several times more CPU per message")
        return self.startup

    def shutdown(self) -> None:
        if not self._running:
            return
        self._running = False
        self._stop.set()
        self.compactor.stop()
        if self._housekeeper is not None:
            self._housekeeper.join()
        with self._appenders_lock:
            appenders, self._appenders = self._appenders, []
        for appender in appenders:
            appender.close()
        if self._gate is not None:
            self._gate.close()   # held appends: FLUSH_SLAVE_TIMEOUT (scheduled on their loops)
        with self._appenders_lock:
            store_loop, self._store_loop = self._store_loop, None
        if store_loop is not None:
            store_loop.close()   # after its appender's answers to the waiting callers
        self.dispatcher.stop()
        self.flusher.stop()
        self._write_checkpoint()
        self.abort_marker.remove()
        self.commitlog.close()
        self.queues.close()
        self.index.close()
        restore_threads(self._pinned)
        self._pinned = {}
        log.info("store shut down", log_end=self.commitlog.max_offset)

    def __enter__(self) -> MessageStore:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()

    def _write_checkpoint(self) -> None:
        """Queues and index first, then the checkpoint that vouches for them."""
        with self._checkpoint_lock:
            dispatched = self.dispatcher.reput_offset
            self.queues.flush()
            self.index.flush()
            self.checkpoint.write(CheckpointState(self.commitlog.flushed_offset, dispatched,
                                                  int(time.time() * 1000),
                                                  self.confirmed_offset()))

    def _housekeep(self) -> None:
        """Checkpoints, the disk guard's look at the file system, and retention, each on its
        own period; while the disk is FULL, retention runs at every disk check (forced
        clean-up) and the disk is looked at again once it deleted something."""
        config = self.config
        periods = (config.checkpoint_interval_ms / 1000, config.disk_check_interval_ms / 1000,
                   config.retention_check_interval_ms / 1000)
        now = time.monotonic()
        due = [now + periods[0], now + periods[1], now + periods[2]]
        while not self._stop.wait(max(0.0, min(due) - time.monotonic())):
            now = time.monotonic()
            try:
                if now >= due[0]:
                    due[0] = now + periods[0]
                    self._write_checkpoint()
                if now >= due[1]:
                    due[1] = now + periods[1]
                    if self.disk.check() is DiskState.FULL:
                        due[2] = now   # reclaim space now, not at the next retention run
                if now >= due[2]:
                    due[2] = now + periods[2]
                    if self.retention.run_once() and self.disk.state is not DiskState.OK:
                        self.disk.check()   # sends resume as soon as the space is back
            except Exception:
                log.exception("store housekeeping failed")

    # -- writes ----------------------------------------------------------------------------
    def append_batch(self, topic: str, queue_id: int, records: bytes,
                     record_count: int) -> AppendResult:
        """Append one producer batch for one queue; contiguous queue offsets, all or nothing.
        Blocking: with SYNC_FLUSH (or a SYNC replication gate) the append is made and
        acknowledged by the same path as `append_batch_async`, on the store's own loop thread
        (store_loop.py)."""
        if not self._running:
            raise StoreClosed("the store is not running")
        gate = self._gate
        if not self.flusher.sync and (gate is None or not gate.sync):
            self._check_writable(gate)   # ASYNC_FLUSH: a copy into the page cache, done now
            return self._append_now(topic, queue_id, records, record_count)
        return self._blocking_loop().append(topic, queue_id, records, record_count)

    def append_batch_async(self, topic: str, queue_id: int, records: bytes,
                           record_count: int, answer_within_s: float | None = None,
                           ) -> asyncio.Future[AppendResult]:
        """`append_batch` for an asyncio caller (RocketMQ's asyncPutMessage), to be awaited on
        the running loop: with SYNC_FLUSH the batch is written with the loop's other appends
        as one group and the future resolves once a syncer thread has fsynced it
        (loop_appender.py), so many concurrent appends share one fsync without a thread
        each. Same results and errors as `append_batch`; FLUSH_DISK_TIMEOUT after
        `sync_flush_timeout`. With a SYNC replication gate the answer waits, after that, for
        the in-sync replicas (FLUSH_SLAVE_TIMEOUT after `sync_replication_timeout`). Raises
        NotMaster on a slave and NotEnoughReplicas when too few replicas are in sync, before
        anything is appended.

        `answer_within_s`: the caller must have its answer within this many seconds (its
        request's deadline less a margin: broker/deadlines.py); the waits for the disk and for
        the replicas then end by then, answering FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT with
        the batch appended, if that comes before their configured timeouts."""
        loop = asyncio.get_running_loop()
        gate = self._gate
        self._check_writable(gate)
        answer_by = math.inf if answer_within_s is None else loop.time() + answer_within_s
        if self.flusher.sync and self._running:
            appenders = self._appenders
            appender = appenders[-1] if appenders else None
            if appender is None or appender.loop is not loop:   # a broker has one loop
                appender = self._appender_for(loop)
            return appender.append((topic, queue_id, records, record_count), answer_by, gate)
        future = loop.create_future()   # ASYNC_FLUSH: a copy into the page cache, done now
        try:
            if not self._running:
                raise StoreClosed("the store is not running")
            result = self._append_now(topic, queue_id, records, record_count)
        except StoreError as exc:
            future.set_exception(exc)
            return future
        if gate is None or not gate.sync:
            future.set_result(result)
        else:
            pending = _Append((topic, queue_id, records, record_count), future, answer_by)
            pending.outcome = (result.first_queue_offset, result.physical_offsets,
                               result.end_offset)
            gate.hold(result.end_offset, [pending], _settle, answer_by)
        return future

    def confirmed_async(self, end_offset: int, answer_within_s: float | None = None
                        ) -> asyncio.Future[AppendStatus]:
        """For a batch appended before and asked for again (an idempotent producer's retry,
        answered from the kept batches): resolves PUT_OK once the in-sync replicas hold the log
        below `end_offset` (at once without a SYNC gate, or below the confirmed offset),
        FLUSH_SLAVE_TIMEOUT as a waiting append would (the gate's timeout, `answer_within_s`,
        a master deposed meanwhile). NotMaster on a slave, as an append."""
        loop = asyncio.get_running_loop()
        gate = self._gate
        if self._slave or (gate is not None and not gate.may_acknowledge()):
            raise NotMaster("this broker is no longer the master of its replica group; "
                            "refresh the route and send to the new master")
        future: asyncio.Future[AppendStatus] = loop.create_future()
        if gate is None or not gate.sync:
            future.set_result(AppendStatus.PUT_OK)
            return future
        answer_by = math.inf if answer_within_s is None else loop.time() + answer_within_s
        gate.hold(end_offset, [_Confirm(future, answer_by)], _settle_confirm, answer_by)
        return future

    def _check_writable(self, gate: ReplicationGate | None) -> None:
        if self._slave:
            raise NotMaster("this broker is a slave of its replica group: it takes no sends; "
                            "refresh the route and send to the master")
        if gate is not None:
            gate.check_writable()

    def _append_now(self, topic: str, queue_id: int, records: bytes,
                    record_count: int) -> AppendResult:
        """ASYNC_FLUSH: acknowledged once in the page cache; the flush thread fsyncs later."""
        outcome = self.commitlog.append_group([(topic, queue_id, records, record_count)],
                                              self.store_host)[0]
        if isinstance(outcome, StoreError):
            raise outcome
        if record_count <= INLINE_DISPATCH_RECORDS:
            self.dispatcher.dispatch_here()
        else:
            self.dispatcher.wake()
        self._notify_written()
        return AppendResult(AppendStatus.PUT_OK, *outcome)

    def delete_topic(self, topic: str) -> int:
        """Master: put `topic`'s messages out of reach, on every replica. One marker record in
        the CommitLog names it; each replica's dispatcher empties the topic's consume queues
        where the marker stands (dispatcher.py), so a topic created again under the name starts
        empty instead of showing the old messages. Queue offsets go on from where they were
        (consume_queue.py: the floor). The records stay in the CommitLog until retention
        removes them, as with RocketMQ's deleteTopics. Returns the marker's CommitLog offset."""
        if not self._running:
            raise StoreClosed("the store is not running")
        if self._slave:
            raise NotMaster("a slave takes no topic deletion: its master's marker replicates")
        if topic == DELETED_TOPICS_TOPIC:
            raise InvalidBatch(f"{DELETED_TOPICS_TOPIC} is the log of topic deletions itself")
        return self._append_marker(DELETED_TOPICS_TOPIC, topic.encode())

    def append_compaction(self, topic: str, queue_id: int,
                          ranges: list[tuple[int, int]]) -> int:
        """Master: a compaction marker (compaction.py) removing the queue offsets in `ranges`
        from `topic`'s queue, on every replica; returns once this replica's dispatcher applied
        it (so the next pass does not decide it again), or after 30 s with a warning. Its
        CommitLog offset."""
        if not self._running:
            raise StoreClosed("the store is not running")
        if self._slave:
            raise NotMaster("a slave takes no compaction: its master's markers replicate")
        offset = self._append_marker(COMPACTION_TOPIC, encode_marker(topic, queue_id, ranges))
        if not self.dispatcher.wait_past(offset, 30.0):
            # harmless (the compactor's own state keeps it from deciding these again), but a
            # dispatcher 30 s behind is worth a line
            log.warning("compaction marker not applied within 30 s", topic=topic,
                        queue_id=queue_id, offset=offset)
        return offset

    def append_relocations(self, raws: list[bytes]) -> int:
        """Master: relocation records (relocation.py, each made with record.encode), in one
        group; returns once this replica's dispatcher applied them (their copies durable and
        the units repointed), the end offset of the last. Raises StoreError if it did not
        within 30 s (retention then still sees the old segment held)."""
        if not self._running:
            raise StoreClosed("the store is not running")
        if self._slave:
            raise NotMaster("a slave relocates nothing: its master's relocations replicate")
        outcomes = self.commitlog.append_group([(RELOCATION_TOPIC, 0, raw, 1) for raw in raws],
                                               self.store_host)
        for outcome in outcomes:
            if isinstance(outcome, StoreError):
                raise outcome
        self.dispatcher.wake()
        self._notify_written()
        last = outcomes[-1]
        if not self.dispatcher.wait_past(last[1][-1], 30.0):
            raise StoreError("relocation records not applied within 30 s")
        return last[2]

    def _relocate_before_force(self, base: int) -> None:
        if self._running and not self._slave:    # a slave's copies come from its master
            self.relocator.relocate_segment(base)

    def _relocations_confirmed(self) -> bool:
        """Every relocation record applied here is in every in-sync replica (below the
        confirmed offset; always, when reads are not fenced)."""
        confirmed = self.confirmed_offset()
        return confirmed is None or confirmed >= self.dispatcher.relocated_end

    def _append_marker(self, marker_topic: str, body: bytes) -> int:
        """One marker record of the system topic `marker_topic` (a topic deletion, a
        compaction), for every replica's dispatcher to apply; its CommitLog offset."""
        marker = record.encode(marker_topic, body)
        outcome = self.commitlog.append_group([(marker_topic, 0, marker, 1)],
                                              self.store_host)[0]
        if isinstance(outcome, StoreError):
            raise outcome
        self.dispatcher.wake()
        self._notify_written()
        return outcome[1][0]

    def add_write_listener(self, listener: Callable[[], None]) -> None:
        """`listener()` after every write to the log (once per group, on the writing thread:
        an event loop, the store loop, or an ASYNC_FLUSH appender): the HA server's wake-up."""
        self._write_listeners = [*self._write_listeners, listener]

    def remove_write_listener(self, listener: Callable[[], None]) -> None:
        self._write_listeners = [f for f in self._write_listeners if f is not listener]

    def add_visibility_listener(self, listener: Callable[[], None]) -> None:
        """`listener()` when the read fence moves (the confirmed offset advanced), on the
        thread that saw it: the long polls' wake-up for records appended before they were
        readable (long_poll.py)."""
        self._visibility_listeners = [*self._visibility_listeners, listener]

    def remove_visibility_listener(self, listener: Callable[[], None]) -> None:
        self._visibility_listeners = [f for f in self._visibility_listeners
                                      if f is not listener]

    def _notify_visible(self) -> None:
        for listener in self._visibility_listeners:
            listener()

    def _notify_written(self) -> None:
        for listener in self._write_listeners:
            listener()

    def set_replication_gate(self, gate: ReplicationGate | None) -> None:
        """Have appends wait for the in-sync replicas (store/ha/gate.py), or stop (None).
        Appends a replaced gate still holds are answered FLUSH_SLAVE_TIMEOUT.

        The gate is also the read fence: with a SYNC gate, readers see only records below
        its `readable_end` (reader.py); without one, or with an ASYNC gate, everything
        written (single replica, ASYNC_MASTER, and slaves, whose gate is removed)."""
        if self._fenced_master():
            self._confirmed = self._gate.readable_end()   # where a replacement gate starts
        previous, self._gate = self._gate, gate
        self._install_read_fence()
        if previous is not None and previous is not gate:
            previous.close()

    def _fenced_master(self) -> bool:
        gate = self._gate
        return not self._slave and gate is not None and gate.sync

    def _install_read_fence(self) -> None:
        """A master with a SYNC gate: readers see below the gate's readable end, which starts
        at the confirmed offset this replica knew as a slave (what it holds past that is not
        in every in-sync replica yet: it becomes readable when they have it), or at its log
        end when it knew none. A slave of such a master: below the master's confirmed offset
        (`follow_confirmed`). Otherwise (single replica, ASYNC_MASTER): everything."""
        gate = self._gate
        if self._fenced_master():
            gate.on_readable = self._notify_visible
            known = self._confirmed
            gate.raise_readable_end(self.commitlog.max_offset if known is None
                                    else min(known, self.commitlog.max_offset))
            self.reader.visible_end = gate.readable_end
        elif self._slave and self._confirmed is not None:
            self.reader.visible_end = lambda: self._confirmed
        else:
            self.reader.visible_end = None

    def confirmed_offset(self) -> int | None:
        """The group's confirmed offset as this replica knows it; None: reads not fenced."""
        if self._fenced_master():
            return self._gate.readable_end()
        return self._confirmed

    def follow_confirmed(self, confirmed: int | None) -> None:
        """A slave: its master's confirmed offset (None: its master does not fence reads, an
        ASYNC_MASTER). Monotonic while fenced (records confirmed once are in every replica
        that can be elected), and never past what this replica holds; wakes the long polls
        when it moves."""
        if confirmed is None:
            if self._confirmed is not None:
                self._confirmed = None
                self._install_read_fence()
                self._notify_visible()
            return
        known = self._confirmed
        if known is None or confirmed > known:
            self._confirmed = confirmed
            if known is None:
                self._install_read_fence()
            self._notify_visible()

    @property
    def replication_gate(self) -> ReplicationGate | None:
        return self._gate

    def _blocking_loop(self) -> StoreLoop:
        store_loop = self._store_loop
        if store_loop is None:
            with self._appenders_lock:
                if not self._running:
                    raise StoreClosed("the store is not running")
                if self._store_loop is None:
                    self._store_loop = StoreLoop(self.append_batch_async)
                store_loop = self._store_loop
        return store_loop

    def _appender_for(self, loop: asyncio.AbstractEventLoop) -> LoopAppender:
        with self._appenders_lock:
            appender = next((a for a in self._appenders if a.loop is loop), None)
            if appender is None:
                appender = LoopAppender(loop, self.flusher, self.commitlog,
                                        self.dispatcher.dispatch_here, self.syncer_factory,
                                        lambda: self._gate, self._notify_written)
            # the latest loop last (the one-look fast path); drop those of closed loops
            others = [a for a in self._appenders if a is not appender]
            for gone in [a for a in others if a.loop.is_closed()]:
                gone.close()
                others.remove(gone)
            self._appenders = [*others, appender]
        return appender

    # -- replication (store/ha) --------------------------------------------------------------
    @property
    def is_master(self) -> bool:
        return not self._slave

    def become_master(self, epoch: int, timeout_s: float = 30.0) -> None:
        """Take local appends from now on, as master of `epoch`: wait until every replicated
        byte is dispatched, take the queue offsets from the consume queues, and record that
        `epoch` starts at the log end (an epoch already recorded is kept)."""
        if not self._running:
            raise StoreClosed("the store is not running")
        last = self.epochs.last_epoch
        if epoch < last:
            raise StoreError(f"epoch {epoch} is older than this replica's epoch {last}")
        self.commitlog.drop_replica_tail()
        if not self.dispatcher.wait_dispatched(timeout_s):
            raise StoreError(f"the consume queues did not catch up within {timeout_s} s")
        self.commitlog.set_queue_offsets(self.queues.max_offsets())
        # A slave took its master's history, which may go past what it fetched.
        self.epochs.truncate_after(self.commitlog.max_offset)
        if epoch > last:
            self.epochs.append(epoch, self.commitlog.max_offset)
        self.flusher.replicating = False
        self.compactor.reset()   # its maps are of what this replica saw before: scan again
        self._slave = False
        self._install_read_fence()
        log.info("store is master", epoch=epoch, log_end=self.commitlog.max_offset)

    def become_slave(self) -> None:
        """Refuse local appends (NotMaster) and take bytes from a master
        (`append_replicated`). Idempotent."""
        if not self._slave:
            if self._fenced_master():   # a deposed master keeps serving what it confirmed
                self._confirmed = self._gate.readable_end()
            self._slave = True
            self.compactor.reset()
            self._install_read_fence()        # fenced at `_confirmed` (None: everything)
            self.flusher.replicating = True   # the periodic flush covers replicated bytes
            log.info("store is slave", epoch=self.epochs.last_epoch,
                     log_end=self.commitlog.max_offset)

    def append_replicated(self, physical_offset: int, data: bytes | memoryview) -> int:
        """A slave: the master's CommitLog bytes at `physical_offset` (must be this replica's
        end: else ReplicationGap), written as they are; returns the new log end, always a
        record boundary (a record cut by the chunk's end waits for the rest)."""
        if not self._slave:
            raise NotMaster("a master takes no replicated bytes")
        end = self.commitlog.append_replicated(physical_offset, data)
        self.dispatcher.wake()
        return end

    def truncate_to(self, offset: int) -> None:
        """Cut the log at `offset` (a record boundary), with what depends on it: consume queue
        units past it dropped, index hits past it hidden, re-dispatch from it, epochs that
        start past it dropped, queue offsets recomputed, a checkpoint written."""
        with self.dispatcher.paused():
            undeleted = (self._deletions_from(offset) | self._compactions_from(offset)
                         | self._relocations_from(offset))
            self.commitlog.truncate_to(offset)
            for queue in self.queues.all():
                queue.truncate_beyond(offset)
            self.index.hide_from(offset)
            self.dispatcher.reput_offset = min(self.dispatcher.reput_offset, offset)
            if undeleted:  # their floors came from the cut markers: rebuild them from the log
                for topic in undeleted:
                    self.queues.forget_topic(topic)
                self.dispatcher.reput_offset = self.commitlog.min_offset
                log.warning("topic deletions or compactions cut with the log; their queues "
                            "are rebuilt",
                            topics=sorted(undeleted))
        self.epochs.truncate_after(offset)
        self.commitlog.set_queue_offsets(self.queues.max_offsets())
        self.compactor.reset()
        if self._confirmed is not None and self._confirmed > offset:
            # confirmed records are in every replica that can be elected: this should not be
            log.error("truncated below the confirmed offset: consumers may have read records "
                      "that are now gone", offset=offset, confirmed=self._confirmed)
            self._confirmed = offset
        self._write_checkpoint()
        log.warning("commitlog truncated", offset=offset)

    def restart_at(self, offset: int, queue_floors: list[tuple[str, int, int]] = ()) -> dict:
        """A slave whose log ends below its master's oldest segment (a replaced disk, or down
        longer than retention): discard everything this replica holds — CommitLog, consume
        queues, index, epochs — and start an empty log at `offset`, the master's oldest
        offset (a segment base); the replicated records rebuild the queues and the index
        with the master's queue offsets; `queue_floors` (topic, queue id, next offset) are the
        master's queues that hold no record any more, which the log cannot tell. Only the HA
        client calls it, on its master's word.
        Crash-safe: a marker is durable before the first file goes and removed once the
        empty store is checkpointed; a start that finds it finishes the discarding (an empty
        store, rebuilt at the next handshake). Returns what was discarded."""
        if not self._slave:
            raise NotMaster("a master never discards its log to rebuild from another replica")
        if offset % self.commitlog.segment_size:
            raise StoreError(f"cannot rebuild from {offset}: not a segment base of this "
                             f"store's segment_size {self.commitlog.segment_size}")
        with self._checkpoint_lock, self.dispatcher.paused():
            discarded = {"log_start": self.commitlog.min_offset,
                         "log_end": self.commitlog.max_offset,
                         "epochs": [list(entry) for entry in self.epochs.entries]}
            self.rebuild_marker.write(str(offset).encode())
            discarded.update(self._discard_data(offset))
            for topic, queue_id, next_offset in queue_floors:
                self.queues.get_or_create(topic, queue_id).start_at(next_offset)
            self._write_checkpoint()
            self._remove_rebuild_marker()
        log.warning("replica data discarded to rebuild from the master", rebuild_from=offset,
                    **discarded)
        return discarded

    def _discard_data(self, offset: int) -> dict:
        """restart_at's deletions (the index loaded, the consume queues maybe not yet)."""
        segments = self.commitlog.restart_at(offset)
        self.compactor.reset()
        queues = self.queues.forget_all()
        index_files = self.index.forget_all()
        self.dispatcher.reput_offset = offset
        self.epochs.replace([])
        self._confirmed = None   # the master's next frame says where reads stop again
        self._install_read_fence()
        return {"segments": len(segments), "consume_queues": queues, "index_files": index_files}

    def empty_queues(self) -> list[tuple[str, int, int]]:
        """(topic, queue id, next offset) of the queues that hold no record but have a
        non-zero offset: what a rebuilding replica cannot learn from the log (restart_at)."""
        return [(q.topic, q.queue_id, q.max_offset) for q in self.queues.all()
                if q.max_offset > 0 and q.min_offset >= q.max_offset]

    def _remove_rebuild_marker(self) -> None:
        self.rebuild_marker.path.unlink(missing_ok=True)
        fsync_dir(self.rebuild_marker.path.parent)

    def _deletions_from(self, offset: int) -> set[str]:
        """The topics whose deletion markers lie at or past `offset` (a truncation cuts them)."""
        return self._marker_topics_from(DELETED_TOPICS_TOPIC, offset,
                                        lambda data: deleted_topic_at(data, 0))

    def _compactions_from(self, offset: int) -> set[str]:
        """The topics named by compaction markers at or past `offset`: a truncation cuts them,
        but their gaps are in the units before the cut, so those queues are rebuilt."""
        def topic_of(data: bytes) -> str:
            header = record.HEADER.unpack_from(data)
            return decode_marker(record.body_at(data, 0, header))[0]
        return self._marker_topics_from(COMPACTION_TOPIC, offset, topic_of)

    def _relocations_from(self, offset: int) -> set[str]:
        """The topics of relocated copies at or past `offset`: a truncation cuts the copies
        their units point at, so those queues are rebuilt (the originals, not deleted before
        the copies were confirmed, are in the log again)."""
        def topic_of(data: bytes) -> str:
            header = record.HEADER.unpack_from(data)
            return decode_relocation(record.body_at(data, 0, header)).topic
        return self._marker_topics_from(RELOCATION_TOPIC, offset, topic_of)

    def _marker_topics_from(self, marker_topic: str, offset: int,
                            topic_of: Callable[[bytes], str]) -> set[str]:
        """The topics the markers of `marker_topic` at or past CommitLog `offset` name, read
        newest first until one lies before it. Past the read fence: what a truncation cuts is
        the unconfirmed tail (a deposed master's markers, appended outside the gate)."""
        markers = self.queues.get(marker_topic, 0)
        topics: set[str] = set()
        position = markers.max_offset if markers else 0
        while markers is not None and position > markers.min_offset:
            position -= 1
            physical = markers.physical_offset_of(position)
            if physical is None or physical < offset:
                break
            topics.add(topic_of(self.reader.read_record(physical, fenced=False)))
        return topics

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        self.dispatcher.add_listener(listener)

    def wait_dispatched(self, timeout_s: float) -> bool:
        return self.dispatcher.wait_dispatched(timeout_s)

    # -- reads -----------------------------------------------------------------------------
    def get_messages(self, topic: str, queue_id: int, queue_offset: int, max_messages: int = 32,
                     max_bytes: int = 4 << 20,
                     tag_hashes: frozenset[int] | None = None,
                     property_filter: PropertyFilter | None = None, *,
                     fenced: bool = True) -> GetResult:
        """`fenced` False reads past the read fence (records not confirmed yet): only for
        the broker's replays of its own log, never for consumers (reader.py)."""
        return self.reader.get_messages(topic, queue_id, queue_offset, max_messages, max_bytes,
                                        tag_hashes, property_filter, fenced=fenced)

    def get_message_at(self, topic: str, queue_id: int, queue_offset: int, *,
                       fenced: bool = True) -> GetResult:
        """The record at exactly `queue_offset` (a pop's redelivery, revive): FOUND, or not
        when compaction removed it (NO_MATCHED_MESSAGE), where `get_messages` would answer
        the next record after the gap. `fenced` as for `get_messages`."""
        queue = self.queues.get(topic, queue_id)
        if queue is not None and queue.has_gaps and queue.is_gap(queue_offset):
            return GetResult(GetStatus.NO_MATCHED_MESSAGE, b"", 0, queue_offset + 1,
                             queue.min_offset, queue.max_offset)
        return self.reader.get_messages(topic, queue_id, queue_offset, 1, 4 << 20, None,
                                        fenced=fenced)

    def read_record(self, physical_offset: int) -> bytes:
        return self.reader.read_record(physical_offset)

    def query_by_key(self, topic: str, key: str, begin_ms: int, end_ms: int,
                     max_results: int = 32) -> list[bytes]:
        return self.reader.query_by_key(topic, key, begin_ms, end_ms, max_results)

    def offset_for_timestamp(self, topic: str, queue_id: int, timestamp_ms: int) -> int:
        return self.reader.offset_for_timestamp(topic, queue_id, timestamp_ms)

    def store_timestamp_at(self, physical_offset: int) -> int | None:
        """When the record at `physical_offset` was stored (epoch ms); None if not readable."""
        return self.reader.store_timestamp_at(physical_offset)

    def search_timestamp(self, topic: str, queue_id: int,
                         timestamp_ms: int) -> tuple[int, int | None]:
        """(first offset stored at or after `timestamp_ms`, its store time or None)."""
        return self.reader.search_timestamp(topic, queue_id, timestamp_ms)

    def min_offset(self, topic: str, queue_id: int) -> int:
        queue = self.queues.get(topic, queue_id)
        return queue.min_offset if queue else 0

    def max_offset(self, topic: str, queue_id: int) -> int:
        """The queue's max offset as consumers see it: on a SYNC_MASTER, below the records
        the in-sync replicas have not all confirmed yet (reader.py, the read fence)."""
        return self.reader.max_offset(topic, queue_id)

    def written_max_offset(self, topic: str, queue_id: int) -> int:
        """The queue's max offset including records not confirmed yet (not for readers)."""
        queue = self.queues.get(topic, queue_id)
        return queue.max_offset if queue else 0

    def queue_ids(self, topic: str) -> list[int]:
        return sorted(q.queue_id for q in self.queues.all() if q.topic == topic)

    def topics(self) -> list[str]:
        return sorted({q.topic for q in self.queues.all()})

    def commitlog_min_offset(self) -> int:
        return self.commitlog.min_offset

    def commitlog_max_offset(self) -> int:
        return self.commitlog.max_offset


class _Confirm:
    """A retried batch's wait in the replication gate (`confirmed_async`)."""

    __slots__ = ("future", "answer_by")

    def __init__(self, future: asyncio.Future, answer_by: float) -> None:
        self.future, self.answer_by = future, answer_by


def _settle_confirm(group: list[_Confirm], status: AppendStatus) -> int:
    settled = 0
    for waiting in group:
        if not waiting.future.done():
            waiting.future.set_result(status)
            settled += 1
    return settled
