"""Wait in the main thread until SIGTERM or SIGINT asks a process to stop.

CPython runs a signal's Python handler only in the main thread, between bytecodes. The kernel
may deliver a process's SIGTERM to any thread that does not block it: a gRPC, fsync or exporter
thread. The main thread is then not interrupted, and if it sits in an untimed
`threading.Event.wait()` it never returns to bytecode to run the handler: the process ignores
SIGTERM until a supervisor kills it, skipping the graceful drain. Waking every `WAKE_S` runs a
pending handler within that time, wherever the signal landed.
"""

from __future__ import annotations

import signal
import threading
from typing import Any

WAKE_S = 0.2
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


class StopSignal:
    """`install()` (in the main thread), then `wait()`."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def install(self) -> StopSignal:
        for signum in STOP_SIGNALS:
            signal.signal(signum, self._handle)
        return self

    def _handle(self, *_: Any) -> None:
        self._event.set()

    def wait(self) -> None:
        while not self._event.wait(WAKE_S):
            pass
