"""Waiting for a remote state: poll it with a deadline (never a bare sleep as synchronisation).

What the admin client and the gateway use after defining a topic, until name servers route it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def poll(probe: Callable[[], T], timeout: float, *, interval: float = 0.1,
         until: Callable[[T], object] = bool) -> T:
    """Call `probe` until `until(outcome)` holds or `timeout` seconds passed; the last outcome."""
    deadline = time.monotonic() + timeout
    while True:
        outcome = probe()
        if until(outcome) or time.monotonic() >= deadline:
            return outcome
        time.sleep(interval)  # polling a remote state with a deadline, not syncing
