"""A fixed-size memory-mapped file, the building block of consume queue and index files."""

from __future__ import annotations

import contextlib
import mmap
import os
from pathlib import Path


class MappedFile:
    """Fixed-size file mapped read-write; `preallocate` reserves blocks (no SIGBUS on ENOSPC)."""

    def __init__(self, path: Path, size: int, *, preallocate: bool = True) -> None:
        self.path = path
        self.size = size
        self.dirty = False
        existed = os.path.exists(path)
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            actual = os.fstat(self._fd).st_size
            if actual < size:
                if preallocate:
                    os.posix_fallocate(self._fd, 0, size)
                else:
                    os.ftruncate(self._fd, size)
            elif actual != size:
                raise ValueError(f"{path} is {actual} bytes, expected {size}")
            self.mm = mmap.mmap(self._fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        except BaseException:
            os.close(self._fd)
            if not existed:   # a file half made (ENOSPC) would fail the next start's load
                with contextlib.suppress(OSError):
                    os.unlink(path)
            raise

    @property
    def fd(self) -> int:
        """The file's descriptor; -1 once closed."""
        return self._fd

    def sync(self) -> None:
        fd = self._fd
        if self.dirty and fd >= 0:  # fd < 0: deleted by retention meanwhile
            self.dirty = False
            os.fdatasync(fd)

    def close(self) -> None:
        if not self.mm.closed:
            self.mm.close()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def delete(self) -> None:
        self.close()
        self.path.unlink(missing_ok=True)
