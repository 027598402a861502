"""Ending the HA stream's tasks for certain.

Python 3.11's `asyncio.wait_for` can swallow a cancellation that races the completion of the
future it waits on (CPython gh-86296): the task it runs in then goes on as if never
cancelled. The HA client and server wait that way on every connect, handshake and read, so
one `cancel()` may not end them, and a role change that awaited such a task hung for good (the
chaos suite found it: a broker blocked in a role change stopped renewing its lease).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

RECANCEL_S = 0.2   # how long one cancel is given before the next


async def cancel_and_wait(tasks: Iterable[asyncio.Task]) -> None:
    """Cancel every task and return once all have ended, cancelling again any that went on."""
    pending = {task for task in tasks if not task.done()}
    while pending:
        for task in pending:
            task.cancel()
        _, pending = await asyncio.wait(pending, timeout=RECANCEL_S)
    for task in tasks:
        if task.done() and not task.cancelled():
            task.exception()   # retrieved: no "exception was never retrieved" at exit
