"""HAServer: a master's end of the HA stream (RocketMQ's HAService), on the broker's loop.

How the broker's role layer (`tidemq.broker.replication.host`) uses it, on becoming master of `epoch`:

    store.become_master(epoch)
    tracker = InSyncTracker(replica_id, set(group.in_sync), cfg.replica_lag_max_ms,
                            cfg.min_in_sync_replicas)
    gate = ReplicationGate(tracker, store.commitlog_max_offset, sync=cfg.sync,
                           timeout_ms=cfg.sync_replication_timeout_ms)
    store.set_replication_gate(gate)
    server = HAServer(store, gate, cfg, propose=controller_alter_in_sync)  # async or sync
    await server.start(host, port)          # server.port: the bound port (ha_addr)
    ...
    gate.depose(); store.set_replication_gate(None); await server.stop()   # stepping down

Per slave connection: the handshake (truncation point from the epochs), then one sender that
ships CommitLog bytes from the slave's position in frames of at most `transfer_batch_bytes`,
never across a segment end (a heartbeat when idle), woken by the store's write listener once
per written group; and one reader of the slave's log-end reports, which feed the tracker and
release the gate's held appends. No per-message work: bytes are read as slices of segments.
A connection silent for `housekeeping_timeout_ms` is dropped. In-sync set changes go through
`propose(new_set)` and apply only when it returns True.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import threading
import time
from collections.abc import Awaitable, Callable

from tidemq.common.logs import get_logger

from .config import HAConfig
from .epoch import EpochEntry, divergence_point
from .gate import ReplicationGate
from .protocol import (
    NOT_FENCED,
    ProtocolError,
    encode_data_header,
    encode_handshake,
    read_handshake,
    read_report,
    watch_silence,
)
from .tasks import cancel_and_wait

log = get_logger(__name__)

Propose = Callable[[frozenset[int]], "bool | Awaitable[bool]"]


def _now_ms() -> float:
    return time.monotonic() * 1000


class _Slave:
    """One connected slave: its sender's wake-up and its position."""

    def __init__(self, replica_id: int, cursor: int, heard: float, fenced: bool) -> None:
        self.replica_id = replica_id
        self.cursor = cursor            # next byte to ship
        self.wakeup = asyncio.Event()
        self.heard = heard              # loop time of its last report
        self.fenced = fenced            # it asked for the confirmed offset in every frame
        self.sent_confirmed: int | None = None


def handshake_reply(store, serving: bool, hello: dict) -> dict:
    """The master's answer to a slave's handshake {replica_id, last_epoch, max_offset, epochs}:
    where the slave's log stops being a prefix of ours (`truncate_to`, -1 when nothing is cut;
    from the whole epoch histories, else where the slave's last epoch ended here) and our
    whole epoch history, which the slave, a prefix of our log once cut, takes as its own; or {"error"} when this replica is not (or no longer) master or when its epoch is
    older than the slave's (it was deposed). A slave whose prefix ends below our oldest
    segment (a replaced disk, or down longer than retention) is told to rebuild instead:
    {"rebuild_from": our oldest offset, "log_end", "epochs", "queues": our queues that hold
    no record any more, as (topic, queue id, next offset)} (Kafka's restart from the leader's
    log start offset)."""
    epochs = store.epochs
    epoch = epochs.last_epoch
    slave_epoch, slave_end = int(hello["last_epoch"]), int(hello["max_offset"])
    slave_epochs = [EpochEntry(int(e), int(s)) for e, s in hello.get("epochs", [])]
    if slave_epochs:   # the whole history: exact even where the last epochs differ
        start = divergence_point(epochs.entries, store.commitlog_max_offset(), slave_epochs,
                                 slave_end)
    else:              # the contract's minimal handshake
        start = min(slave_end, epochs.end_of(slave_epoch, store.commitlog_max_offset()))
    error = None
    if not store.is_master or not serving:
        error = "this replica is not the master"
    elif slave_epoch > epoch:
        error = f"this master's epoch {epoch} is older than the slave's {slave_epoch}"
    if error is not None:
        return {"error": error, "epoch": epoch}
    oldest = store.commitlog_min_offset()
    if start < oldest:
        reply = {"epoch": epoch, "rebuild_from": oldest, "log_end": store.commitlog_max_offset(),
                 "queues": [list(floor) for floor in store.empty_queues()]}
    else:
        reply = {"epoch": epoch, "truncate_to": start if start < slave_end else -1}
    reply["epochs"] = [list(entry) for entry in epochs.entries]
    if hello.get("confirmed_offsets"):
        reply["confirmed"] = confirmed_for_slaves(store)
    return reply


def confirmed_for_slaves(store) -> int:
    """What a slave may serve reads below: the read fence, NOT_FENCED without one."""
    confirmed = store.confirmed_offset()
    return NOT_FENCED if confirmed is None else confirmed


class HAServer:
    def __init__(self, store, gate: ReplicationGate, config: HAConfig,
                 propose: Propose | None = None) -> None:
        self.store = store
        self.gate = gate
        self.tracker = gate.tracker
        self.config = config
        self.propose = propose
        self.port = 0
        self._server: asyncio.Server | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._slaves: dict[int, _Slave] = {}
        self._tasks: set[asyncio.Task] = set()
        self._proposing = False
        self.rebuilding: dict[int, int] = {}   # replica -> our log end when told to rebuild

    # -- lifecycle ---------------------------------------------------------------------------
    async def start(self, host: str = "0.0.0.0", port: int = 0) -> None:
        self._loop = asyncio.get_running_loop()
        self._loop_thread = threading.get_ident()
        self.store.add_write_listener(self._on_written)
        self.store.add_visibility_listener(self._on_written)   # the slaves' fence moved
        now = _now_ms()
        for member in self.tracker.in_sync:   # members get replica_lag_max from our start
            self.tracker.caught_up_ms.setdefault(member, now)
        tls = self.config.tls
        self._server = await asyncio.start_server(self._serve, host, port,
                                                  ssl=tls.server.context if tls else None)
        self.port = self._server.sockets[0].getsockname()[1]
        self._spawn(self._housekeep())
        log.info("ha server listening", port=self.port, epoch=self.store.epochs.last_epoch)

    async def stop(self) -> None:
        self.store.remove_write_listener(self._on_written)
        self.store.remove_visibility_listener(self._on_written)
        if self._server is not None:
            self._server.close()
        await cancel_and_wait(list(self._tasks))
        if self._server is not None:
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    def _spawn(self, coroutine) -> asyncio.Task:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _on_written(self) -> None:
        """The store wrote a group (on any thread): wake every sender."""
        if threading.get_ident() == self._loop_thread:
            for slave in self._slaves.values():
                slave.wakeup.set()
        elif self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake_all)

    def _wake_all(self) -> None:
        for slave in self._slaves.values():
            slave.wakeup.set()

    # -- one slave ---------------------------------------------------------------------------
    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Hand the connection to a task of our own: stop() cancels those, never the stream
        callback's task (asyncio would log its cancellation as an error)."""
        self._spawn(self._connection(reader, writer))

    async def _connection(self, reader: asyncio.StreamReader,
                          writer: asyncio.StreamWriter) -> None:
        replica_id, slave = None, None
        try:
            timeout_s = self.config.housekeeping_timeout_ms / 1000
            hello = await asyncio.wait_for(read_handshake(reader), timeout_s)
            replica_id = int(hello["replica_id"])
            start, rebuild_target = self._handshake(hello, writer)
            if start is None:
                await writer.drain()
                return
            await writer.drain()
            loop = asyncio.get_running_loop()
            slave = _Slave(replica_id, start, loop.time(),
                           fenced=bool(hello.get("confirmed_offsets")))
            previous = self._slaves.get(replica_id)
            self._slaves[replica_id] = slave
            if previous is not None:
                previous.wakeup.set()
            incarnation = str(hello.get("incarnation", ""))
            confirmed = self.tracker.confirmed_offset(self.store.commitlog_max_offset())
            if self.tracker.connect(replica_id, start, _now_ms(), incarnation, confirmed):
                log.warning("in-sync replica came back without its copy: out of the in-sync "
                            "set until it catches up", replica=replica_id,
                            incarnation=incarnation, log_end=start, confirmed=confirmed,
                            behind_bytes=max(0, confirmed - start))
                self._spawn(self._review_in_sync())
            if rebuild_target is not None:
                self.rebuilding[replica_id] = rebuild_target
            log.info("slave connected", replica=replica_id, offset=start)
            sender = self._spawn(self._send(slave, writer))
            watchdog = self._spawn(watch_silence(writer.transport, lambda: slave.heard, timeout_s))
            try:
                await self._read_reports(slave, reader)
            finally:
                sender.cancel()
                watchdog.cancel()
        except (TimeoutError, OSError, asyncio.IncompleteReadError, ProtocolError, KeyError,
                ValueError) as exc:
            log.info("slave connection ended", replica=replica_id, reason=repr(exc))
        finally:
            self._forget(replica_id, slave)
            writer.close()

    def _forget(self, replica_id: int | None, slave: _Slave | None) -> None:
        """A connection ended; a newer one of the same replica stays."""
        if slave is not None and self._slaves.get(replica_id) is slave:
            del self._slaves[replica_id]
            self.tracker.disconnect(replica_id)
            self.rebuilding.pop(replica_id, None)   # a reconnection below our start: again

    def _handshake(self, hello: dict,
                   writer: asyncio.StreamWriter) -> tuple[int | None, int | None]:
        """Answer the slave's handshake: the offset to stream from (None: refused) and, for a
        slave told to rebuild, our log end it is rebuilding to. A slave that must rebuild
        while still in the in-sync set is refused until it has left it (proposed here): it
        could be elected, and it is about to discard its log."""
        reply = handshake_reply(self.store, self.gate.master, hello)
        replica = int(hello["replica_id"])
        if "rebuild_from" in reply and replica in self.tracker.in_sync:
            self.tracker.fell_behind(replica)   # it holds none of our log
            self._spawn(self._review_in_sync())
            reply = {"error": f"replica {replica} must rebuild but is in the in-sync set: "
                              f"its removal is proposed, it rebuilds once out",
                     "epoch": reply["epoch"]}
        writer.write(encode_handshake(reply))
        if "error" in reply:
            log.warning("slave refused", replica=hello.get("replica_id"), reason=reply["error"])
            return None, None
        if "rebuild_from" in reply:
            log.warning("slave told to rebuild from this master's oldest offset",
                        replica=hello.get("replica_id"), slave_log_end=hello["max_offset"],
                        rebuild_from=reply["rebuild_from"], log_end=reply["log_end"])
            return reply["rebuild_from"], reply["log_end"]
        truncate_to = reply["truncate_to"]
        return truncate_to if truncate_to >= 0 else int(hello["max_offset"]), None

    async def _send(self, slave: _Slave, writer: asyncio.StreamWriter) -> None:
        try:
            await self._ship(slave, writer)
        except (OSError, ProtocolError) as exc:   # the reader then ends the connection
            log.info("stopped shipping to a slave", replica=slave.replica_id, reason=repr(exc))
            writer.transport.abort()

    async def _ship(self, slave: _Slave, writer: asyncio.StreamWriter) -> None:
        """Frames from the slave's cursor as the log grows; each carries the confirmed offset
        (for a slave that asked), and an idle slave gets a heartbeat when only that moved, so
        its readers see a record as soon as the master's do."""
        store, batch = self.store, self.config.transfer_batch_bytes
        commitlog = store.commitlog
        heartbeat_s = self.config.heartbeat_interval_ms / 1000

        def confirmed() -> int | None:
            if not slave.fenced:
                return None
            slave.sent_confirmed = confirmed_for_slaves(store)
            return slave.sent_confirmed

        while self._slaves.get(slave.replica_id) is slave:
            cursor, end = slave.cursor, commitlog.max_offset
            if cursor < end:
                segment = commitlog.segment_for(cursor)
                if segment is None:
                    raise ProtocolError(f"offset {cursor} is no longer in the commitlog")
                size = min(batch, end - cursor, segment.end_offset - cursor)
                chunk = commitlog.read(cursor, size)
                if chunk is None:
                    raise ProtocolError(f"offset {cursor} is no longer in the commitlog")
                writer.write(encode_data_header(cursor, size, confirmed()))
                writer.write(chunk)
                slave.cursor = cursor + size
                await writer.drain()
                continue
            slave.wakeup.clear()
            if commitlog.max_offset > cursor:
                continue
            if slave.fenced and confirmed_for_slaves(store) != slave.sent_confirmed:
                writer.write(encode_data_header(cursor, 0, confirmed()))
                await writer.drain()
                continue
            try:
                await asyncio.wait_for(slave.wakeup.wait(), heartbeat_s)
            except TimeoutError:
                writer.write(encode_data_header(cursor, 0, confirmed()))
                await writer.drain()

    async def _read_reports(self, slave: _Slave, reader: asyncio.StreamReader) -> None:
        tracker, gate, commitlog = self.tracker, self.gate, self.store.commitlog
        clock = asyncio.get_running_loop().time
        while self._slaves.get(slave.replica_id) is slave:
            offset = await read_report(reader)
            if self._slaves.get(slave.replica_id) is not slave:
                return   # replaced by a newer connection (a restart): its reports are stale
            slave.heard = clock()
            tracker.on_ack(slave.replica_id, offset, commitlog.max_offset, _now_ms())
            target = self.rebuilding.get(slave.replica_id)
            if target is not None and offset >= target:
                del self.rebuilding[slave.replica_id]
                log.info("slave rebuilt: it holds what this master held when it was told",
                         replica=slave.replica_id, log_end=offset)
            if slave.replica_id in tracker.in_sync:
                gate.on_progress()
            elif not self._proposing and offset >= tracker.confirmed_offset(commitlog.max_offset):
                self._spawn(self._review_in_sync())   # caught up: propose it at once

    # -- the in-sync set ---------------------------------------------------------------------
    async def _housekeep(self) -> None:
        interval_s = max(0.05, min(1.0, self.config.replica_lag_max_ms / 4000))
        while True:
            await asyncio.sleep(interval_s)   # a period, not synchronisation
            if self.config.tls is not None:
                self.config.tls.server.refresh()   # a rotated certificate, for new slaves
            if not self._proposing:
                await self._review_in_sync()

    async def _review_in_sync(self) -> None:
        """Propose dropping members that fell behind and adding caught-up slaves."""
        tracker = self.tracker
        now = _now_ms()
        confirmed = tracker.confirmed_offset(self.store.commitlog_max_offset())
        leaving = tracker.shrink_candidates(now)
        joining = tracker.expand_candidates(confirmed)
        if not leaving and not joining or self._proposing or not self.gate.master:
            return
        proposed = frozenset((tracker.in_sync - leaving) | joining)
        self._proposing = True
        try:
            accepted = True
            if self.propose is not None:
                answer = self.propose(proposed)
                accepted = bool(await answer if inspect.isawaitable(answer) else answer)
        except Exception:
            log.exception("in-sync set proposal failed", proposed=sorted(proposed))
            accepted = False
        finally:
            self._proposing = False
        if accepted:
            tracker.apply(proposed, _now_ms())
            log.info("in-sync set changed", in_sync=sorted(tracker.in_sync))
            self.gate.on_progress()

    # -- observation -------------------------------------------------------------------------
    def lag_bytes(self) -> dict[int, int]:
        return self.tracker.lag_bytes(self.store.commitlog_max_offset())

    @property
    def connected(self) -> set[int]:
        return set(self._slaves)
