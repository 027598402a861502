"""Watch: an iterator of config-center changes that survives disconnects without gaps.

A background thread holds the Watch stream and remembers the highest revision it has covered
(the server reports it even when no event matched). When the stream breaks — config-center
restart, Redis restart, network — it reopens it on the next instance from that revision + 1,
so the caller sees every change exactly once and in revision order. A start revision that the
store has compacted is reported as WatchCompacted: re-read with `range` and watch from there.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import grpc
from tidemq.common import errors
from tidemq.common.kv import Event, EventType, KeyValue, RevisionCompacted
from tidemq.common.logs import get_logger
from tidemq.v1 import config_pb2 as pb

if TYPE_CHECKING:
    from tidemq.v1.config_pb2_grpc import ConfigServiceStub

log = get_logger(__name__)

# Errors that say "this request is wrong" rather than "this connection broke".
_FINAL_STATUSES = {grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.FAILED_PRECONDITION,
                   grpc.StatusCode.UNIMPLEMENTED, grpc.StatusCode.PERMISSION_DENIED}
_CLOSED = object()


def kv_from_pb(kv: pb.KeyValue) -> KeyValue:
    return KeyValue(kv.key, kv.value, kv.create_revision, kv.mod_revision, kv.version, kv.lease)


def event_from_pb(event: pb.Event) -> Event:
    return Event(EventType(pb.Event.EventType.Name(event.type)), kv_from_pb(event.kv))


WatchCompacted = RevisionCompacted  # the name watchers know it by


class Watch:
    """Iterate changes under a prefix; `close()` (or the context manager) ends it."""

    def __init__(self, stub_for: Callable[[int], tuple[str, ConfigServiceStub]], prefix: str,
                 start_revision: int = 0) -> None:
        """`stub_for(attempt)`: the address and stub to stream from (ConfigClient.stub_for)."""
        if start_revision < 0:
            raise errors.InvalidArgument(f"start revision must be >= 0, got {start_revision}")
        self.prefix = prefix
        self.reconnects = 0
        # Highest revision whose events (if any) have been queued; None until the server says.
        self.revision: int | None = start_revision - 1 if start_revision else None
        self._stub_for = stub_for
        self._queue: queue.Queue = queue.Queue()
        self._lock = threading.Lock()
        self._call: Any = None
        self._closed = threading.Event()
        self._established = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name=f"watch{prefix}")
        self._thread.start()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def __iter__(self) -> Watch:
        return self

    def __next__(self) -> Event:
        return self._unwrap(self._queue.get())

    def poll(self, timeout: float) -> Event | None:
        """The next event, or None if none arrives within `timeout` seconds."""
        try:
            return self._unwrap(self._queue.get(timeout=timeout))
        except queue.Empty:
            return None

    def wait_established(self, timeout: float) -> bool:
        """True once the server has acknowledged the watch (changes from now on are seen)."""
        return self._established.wait(timeout)

    def reconnect(self) -> None:
        """Drop the current stream; the watch resumes from its last revision (as after a fault)."""
        with self._lock:
            if self._call is not None:
                self._call.cancel()

    def close(self) -> None:
        self._closed.set()
        self.reconnect()
        self._queue.put(_CLOSED)
        if self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _unwrap(self, item: Any) -> Event:
        if item is _CLOSED:
            self._queue.put(_CLOSED)  # keep later calls ending too
            raise StopIteration
        if isinstance(item, BaseException):
            self._queue.put(item)
            raise item
        return item

    def _run(self) -> None:
        # Here, not at module level: the watch thread is the only user, and importing it (with
        # wrapt) costs every importer of the config-center client, `tidemq` commands included.
        from opentelemetry.instrumentation.utils import suppress_instrumentation

        attempt, backoff = 0, 0.05
        while not self._closed.is_set():
            start = 0 if self.revision is None else self.revision + 1
            addr, stub = self._stub_for(attempt)
            # Untraced: in a traced process (ServiceRuntime) the gRPC client instrumentation
            # wraps a server stream in a generator with no cancel(), so close() could not end
            # it; a watch that lives for hours is no span anyway.
            with suppress_instrumentation():
                call = stub.Watch(pb.WatchRequest(prefix=self.prefix, start_revision=start))
            with self._lock:
                self._call = call
            if self._closed.is_set():
                call.cancel()
                return
            try:
                for reply in call:
                    if reply.compacted:
                        self._queue.put(WatchCompacted(start, reply.compact_revision))
                        return
                    self._deliver(reply)
                    backoff = 0.05
            except grpc.RpcError as exc:
                if self._closed.is_set():
                    return
                status = exc.code()
                if status in _FINAL_STATUSES:
                    self._queue.put(errors.from_rpc_error(exc))
                    return
                if status != grpc.StatusCode.CANCELLED:  # CANCELLED = our own reconnect()
                    log.info("watch stream broke; resuming", addr=addr, status=status.name,
                             from_revision=start)
                    attempt += 1
                    self._closed.wait(backoff)
                    backoff = min(backoff * 2, 1.0)
            self.reconnects += 1

    def _deliver(self, reply: pb.WatchResponse) -> None:
        for event in reply.events:
            if self.revision is None or event.kv.mod_revision > self.revision:
                self._queue.put(event_from_pb(event))
        if self.revision is None or reply.revision > self.revision:
            self.revision = reply.revision
        self._established.set()
