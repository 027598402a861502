"""Optional CPU pinning of the process's threads while the store runs (`StoreConfig.cpu_affinity`).

Why: under the GIL only one Python thread runs at a time, and SYNC_FLUSH with many one-message
appenders is bound by thread wake-ups; a wake-up across CPUs costs far more than on the same
CPU, so pinning every thread to one CPU speeds up many one-message SYNC_FLUSH appenders, while
batched ASYNC appends do not change measurably (figures: docs/architecture.md, "Measurements
behind the code"). It also takes the other CPUs away from gRPC's C
threads and from GIL-free work (fsync, pwrite copies), hence opt-in.
"""

from __future__ import annotations

import os

from tidemq.common.logs import get_logger

log = get_logger(__name__)


def pin_threads(cpus: frozenset[int]) -> dict[int, set[int]]:
    """Pin every thread of this process to `cpus` (threads created later by them inherit it);
    returns each thread's previous CPU set for `restore_threads`."""
    if not hasattr(os, "sched_setaffinity"):
        log.warning("cpu_affinity is not supported on this platform; ignored")
        return {}
    previous: dict[int, set[int]] = {}
    for entry in os.listdir("/proc/self/task"):
        tid = int(entry)
        try:
            mask = os.sched_getaffinity(tid)
            os.sched_setaffinity(tid, cpus)
        except OSError:  # the thread ended meanwhile
            continue
        previous[tid] = mask
    log.info("store threads pinned", cpus=sorted(cpus), threads=len(previous))
    return previous


def restore_threads(previous: dict[int, set[int]]) -> None:
    for tid, mask in previous.items():
        try:
            os.sched_setaffinity(tid, mask)
        except OSError:
            continue
