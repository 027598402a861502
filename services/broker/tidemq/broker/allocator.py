"""Keep freed heap memory in the broker process instead of returning it to the kernel.

Pull replies are large buffers (hundreds of KiB to a few MiB) allocated and freed on every
pull. With glibc's defaults, freeing one trims the heap or unmaps the block, and the next reply
page-faults all of it back in, a cost paid per message consumed (the figures:
docs/architecture.md, "Measurements behind the code"). Raising the trim and mmap thresholds keeps those pages mapped and reused;
the cost is that up to `keep_bytes` of freed memory stays resident.
"""

from __future__ import annotations

import ctypes
import ctypes.util

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD_MAX = 32 << 20  # glibc refuses larger values on 64-bit (HEAP_MAX_SIZE / 2)


def keep_freed_memory(keep_bytes: int) -> bool:
    """Apply the thresholds; False where the C library is not glibc or refuses them."""
    if keep_bytes <= 0:
        return False
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        mallopt = getattr(libc, "mallopt", None)
    except OSError:
        return False
    if mallopt is None:
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    trimmed = mallopt(M_TRIM_THRESHOLD, keep_bytes)
    mapped = mallopt(M_MMAP_THRESHOLD, min(keep_bytes, MMAP_THRESHOLD_MAX))
    return bool(trimmed and mapped)
