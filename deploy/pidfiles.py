"""PID files of the daemons the deploy tools start (supervisord, dockerd).

A PID file can outlive its daemon (a SIGKILL, a crash, a reboot), and the kernel hands PIDs out
again: on a machine with the default `pid_max` of 32768 a test suite goes round several times
in one run. Signalling the PID in a stale file would then hit whatever process has it now, so
a recorded PID counts only while that process still runs the program that wrote the file.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path


def runs(pid: int, program: str) -> bool:
    """Whether process `pid` is alive and runs `program` (a word of its command line, e.g.
    "supervisord"): False when it is gone, a zombie, or now another program."""
    try:
        command_line = Path(f"/proc/{pid}/cmdline").read_bytes()  # empty for a zombie
    except OSError:
        return False
    return program in (Path(word.decode(errors="replace")).name
                       for word in command_line.split(b"\0"))


def recorded_pid(pid_file: Path, program: str) -> int | None:
    """The PID in `pid_file` while that process runs `program`; None when the file is missing
    or unreadable, or the PID is stale."""
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return None
    return pid if runs(pid, program) else None


def await_exit(pid: int, program: str, timeout: float) -> None:
    """Wait until `pid` no longer runs `program` (asked to stop already), SIGKILL it after
    `timeout`, and reap it if it is this process's child. Checked by program, not by PID: once
    it exits its PID may go to another process, which must not be killed."""
    deadline = time.monotonic() + timeout
    while runs(pid, program):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            break
        time.sleep(0.1)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # a zombie child of ours
