"""HAClient: a slave's end of the HA stream, on the broker's event loop.

How the broker's role layer (`tidemq.broker.replication.host`) uses it, on becoming (or staying) a slave of a master at `master_ha_addr`:

    store.become_slave()
    client = HAClient(store, replica_id, master_ha_addr, cfg)   # "host:port"
    client.start()              # a task on the running loop; reconnects until stopped
    ...
    await client.stop()         # the master changed (then a new client) or we become master

Per connection: the handshake (replica id, last epoch, log end, epoch history); the master
answers where our log stops being a prefix of its own and its epoch history; we truncate, take
that history,
then append every data frame at exactly its physical offset (`store.append_replicated`) and
report our log end after each append and every `report_interval_ms`. A connection silent for
`housekeeping_timeout_ms` (the master heartbeats every second when idle) is dropped and made
again after a pause doubling from `FIRST_RETRY_S` to `reconnect_interval_ms` (back to the
shortest once a connection worked). A slave told of a new master usually dials it a few milliseconds before
the promoted replica opens its HA server, so waiting the whole interval there would add it to
every failover's write outage.

A slave whose log ends below the master's oldest segment is told to rebuild: it discards
everything it holds (`store.restart_at`, loudly) and takes the master's log from that segment
on, its queues and index rebuilt from the records. Only on the word of a master at least as
new as the epoch it was told to follow and its own last epoch; a master store never does it.
`rebuilding` is true until its log end reaches the master's end at that handshake.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator

from tidemq.common.logs import get_logger

from ..config import StoreError
from .config import HAConfig
from .protocol import (
    NOT_FENCED,
    ProtocolError,
    encode_handshake,
    encode_report,
    read_frame,
    read_handshake,
    watch_silence,
)
from .tasks import cancel_and_wait

log = get_logger(__name__)

FIRST_RETRY_S = 0.05
# The master's end closed the stream or nobody listens at its address (not a timeout, not a
# refused handshake: those come from a live or unreachable process).
PEER_GONE = (ConnectionRefusedError, ConnectionResetError, BrokenPipeError,
             asyncio.IncompleteReadError)


class HandshakeRefused(Exception):
    """The master would not serve us (it is not master, or its epoch is older)."""


def split_address(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]") or "127.0.0.1", int(port)


class HAClient:
    def __init__(self, store, replica_id: int, master_address: str, config: HAConfig,
                 follow_epoch: int = 0) -> None:
        self.store = store
        self.replica_id = replica_id
        self.master_address = master_address
        self.config = config
        self.follow_epoch = follow_epoch   # the epoch the controller named this master in
        self.rebuilds = 0                  # rebuilds from the master started by this client
        self.rebuild_target: int | None = None   # rebuilding until the log end reaches this
        self.connected = False
        self.master_epoch = 0
        self.last_error: str | None = None
        self.last_received = 0.0    # loop time of the last frame
        # What the controller asks of a slave before replacing a master whose lease lasts
        # (docs/replication.md, "Detecting a failed master"): since when it heard nothing,
        # and whether the master's end closed or refused the stream since (its process gone).
        self.heard_at = time.monotonic()
        self.master_gone = False
        self.rebuild_started = 0.0         # loop time the current rebuild began
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self.store.become_slave()
        self._task = asyncio.ensure_future(self._run())

    def contact(self) -> tuple[float, bool]:
        """(seconds since the master was last heard, whether its end is gone)."""
        return time.monotonic() - self.heard_at, self.master_gone

    async def stop(self) -> None:
        if self._task is not None:
            await cancel_and_wait([self._task])
            self._task = None
        self.connected = False

    async def _run(self) -> None:
        pauses = retry_pauses(self.config.reconnect_interval_ms / 1000)
        while True:
            try:
                await self._replicate_once()
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ProtocolError, HandshakeRefused, StoreError, KeyError, ValueError) as exc:
                self.last_error = repr(exc)
                self.master_gone = isinstance(exc, PEER_GONE)
                log.info("replication connection ended", master=self.master_address,
                         reason=self.last_error)
            finally:
                if self.connected:   # a connection that worked: retry soon again
                    pauses = retry_pauses(self.config.reconnect_interval_ms / 1000)
                self.connected = False
            await asyncio.sleep(next(pauses))   # a retry period

    async def _replicate_once(self) -> None:
        host, port = split_address(self.master_address)
        timeout_s = self.config.housekeeping_timeout_ms / 1000
        tls = self.config.tls
        if tls is not None:
            tls.client.refresh()
        reader, writer = await asyncio.wait_for(asyncio.open_connection(
            host, port, ssl=tls.client.context if tls else None,
            server_hostname=(tls.server_name or host) if tls else None), timeout_s)
        reporter = watchdog = None
        try:
            store = self.store
            store.commitlog.drop_replica_tail()
            writer.write(encode_handshake({
                "replica_id": self.replica_id, "last_epoch": store.epochs.last_epoch,
                "max_offset": store.commitlog_max_offset(),
                "epochs": [list(entry) for entry in store.epochs.entries],
                "incarnation": getattr(store, "incarnation", ""),
                "confirmed_offsets": True}))
            await writer.drain()
            reply = await asyncio.wait_for(read_handshake(reader), timeout_s)
            if "error" in reply:
                raise HandshakeRefused(reply["error"])
            self._adopt(reply)
            self.connected = True
            self.master_gone = False
            clock = asyncio.get_running_loop().time
            self.last_received = clock()
            self.heard_at = time.monotonic()
            writer.write(encode_report(store.commitlog_max_offset()))
            reporter = asyncio.ensure_future(self._report_periodically(writer))
            watchdog = asyncio.ensure_future(
                watch_silence(writer.transport, lambda: self.last_received, timeout_s))
            fenced = "confirmed" in reply   # else an older master: frames without it
            while True:
                offset, chunk, confirmed = await read_frame(reader, fenced)
                self.last_received = clock()
                if chunk:
                    end = store.append_replicated(offset, chunk)
                    writer.write(encode_report(end))
                    if self.rebuild_target is not None and end >= self.rebuild_target:
                        self._rebuilt(end)
                store.follow_confirmed(confirmed)
                if writer.transport.get_write_buffer_size() > 1 << 16:
                    await writer.drain()
        finally:
            for task in (reporter, watchdog):
                if task is not None:
                    task.cancel()
            writer.close()

    def _adopt(self, reply: dict) -> None:
        self.master_epoch = int(reply["epoch"])
        if "rebuild_from" in reply:
            self._rebuild(reply)
        adopt(self.store, reply)

    def _rebuild(self, reply: dict) -> None:
        """The master says our log ends below its oldest segment: discard what we hold, if
        this master may say so."""
        known = max(self.follow_epoch, self.store.epochs.last_epoch)
        if self.master_epoch < known:
            raise HandshakeRefused(f"master epoch {self.master_epoch} asks for a rebuild but "
                                   f"this replica knows epoch {known}: not discarding")
        log.warning("rebuilding from the master: its oldest offset is past this replica's log",
                    master=self.master_address, master_epoch=self.master_epoch,
                    rebuild_from=reply["rebuild_from"], master_log_end=reply["log_end"],
                    log_start=self.store.commitlog_min_offset(),
                    log_end=self.store.commitlog_max_offset())
        self.rebuilds += 1
        self.rebuild_target = int(reply["log_end"])
        self.rebuild_started = asyncio.get_running_loop().time()

    def _rebuilt(self, end: int) -> None:
        log.info("rebuilt from the master: caught up with its log end at the rebuild",
                 master=self.master_address, log_start=self.store.commitlog_min_offset(),
                 log_end=end, elapsed_s=round(asyncio.get_running_loop().time()
                                              - self.rebuild_started, 2))
        self.rebuild_target = None

    @property
    def rebuilding(self) -> bool:
        return self.rebuild_target is not None

    async def _report_periodically(self, writer: asyncio.StreamWriter) -> None:
        while True:
            await asyncio.sleep(self.config.report_interval_ms / 1000)   # a period
            writer.write(encode_report(self.store.commitlog_max_offset()))
            await writer.drain()


def retry_pauses(longest_s: float) -> Iterator[float]:
    """FIRST_RETRY_S, doubling, then `longest_s` for ever."""
    pause = min(FIRST_RETRY_S, longest_s)
    while True:
        yield pause
        pause = min(pause * 2, longest_s)


def adopt(store, reply: dict) -> None:
    """A slave takes the master's handshake reply: truncate where the master says our log
    stops being a prefix of its own (or start again from its oldest offset: a rebuild), then
    take the master's epoch history (ours describes bytes that may be gone; below the cut the
    master's describes the same bytes) and its confirmed offset (an older master sends none:
    reads are then not fenced)."""
    if "rebuild_from" in reply:
        store.restart_at(int(reply["rebuild_from"]),
                         [(str(t), int(q), int(o)) for t, q, o in reply.get("queues", [])])
    else:
        truncate_to = int(reply["truncate_to"])
        if 0 <= truncate_to < store.commitlog_max_offset():
            log.warning("truncating a divergent tail", offset=truncate_to,
                        log_end=store.commitlog_max_offset(), master_epoch=reply["epoch"])
            store.truncate_to(truncate_to)
    store.epochs.replace(reply["epochs"])
    confirmed = int(reply.get("confirmed", NOT_FENCED))
    store.follow_confirmed(None if confirmed == NOT_FENCED else confirmed)
