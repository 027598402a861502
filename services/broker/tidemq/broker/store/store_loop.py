"""StoreLoop: the store's own event-loop thread, for appenders that have no event loop.

SYNC_FLUSH appends (and any append while a replication gate is set) are acknowledged in one
place: a LoopAppender on an event loop, then the gate. A blocking caller (a thread: tests,
`bench/store`, tools) has no loop, so its append is handed to this thread's loop and the
caller sleeps on the answer: same group commit, same fsync sharing, same timeouts, same
replication wait as the broker's asyncio appends. Started on first use, stopped by
`MessageStore.shutdown` after the loop's appender answered everything it held.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import Future

from .config import AppendResult, StoreClosed

# What the loop runs for one append: MessageStore.append_batch_async.
AsyncAppend = Callable[[str, int, bytes, int], "asyncio.Future[AppendResult]"]


class StoreLoop:
    def __init__(self, append_async: AsyncAppend) -> None:
        self._append_async = append_async
        self.loop = asyncio.new_event_loop()
        self._lock = threading.Lock()   # an append scheduled after the loop's stop never runs
        self._closed = False
        self._thread = threading.Thread(target=self._run, name="store-loop", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.loop.run_forever()

    def append(self, topic: str, queue_id: int, records: bytes,
               record_count: int) -> AppendResult:
        """Append on the loop and wait for the answer; raises what the append raised."""
        answer: Future[AppendResult] = Future()
        with self._lock:
            if self._closed:
                raise StoreClosed("the store is not running")
            self.loop.call_soon_threadsafe(self._start, answer, topic, queue_id, records,
                                           record_count)
        return answer.result()

    def _start(self, answer: Future, topic: str, queue_id: int, records: bytes,
               record_count: int) -> None:
        try:
            pending = self._append_async(topic, queue_id, records, record_count)
        except BaseException as exc:   # refused before appending (closed, not master, ...)
            answer.set_exception(exc)
            return
        pending.add_done_callback(lambda done: _forward(done, answer))

    def close(self) -> None:
        """Stop after every callback already scheduled (an appender's shutdown answers) ran."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        # The last iteration's answers scheduled their callbacks (the callers' wake-ups) for
        # an iteration that stop() skipped: run those now, here.
        self.loop.run_until_complete(_few_iterations())
        self.loop.close()


async def _few_iterations() -> None:
    for _ in range(3):
        await asyncio.sleep(0)


def _forward(done: asyncio.Future, answer: Future) -> None:
    if done.cancelled():
        answer.set_exception(StoreClosed("the append was cancelled by a shutdown"))
    elif (error := done.exception()) is not None:
        answer.set_exception(error)
    else:
        answer.set_result(done.result())
