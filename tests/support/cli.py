"""Run the installed `tidemq` console script as a user would, Ctrl-C included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass

from tests.support.processes import wait_until

TIDEMQ = os.path.join(os.path.dirname(sys.executable), "tidemq")


@dataclass
class Interrupted:
    returncode: int
    stdout: str
    stderr: str


def interrupt_when_waiting(args: list[str], waiting_for: str, *, env: dict | None = None,
                           timeout: float = 30.0) -> Interrupted:
    """Start `tidemq ARGS`, wait until its stderr says `waiting_for`, press Ctrl-C (SIGINT),
    and return how it ended."""
    proc = subprocess.Popen([TIDEMQ, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, **(env or {})})
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")),
                              daemon=True)
    reader.start()
    try:
        wait_until(lambda: any(waiting_for in line for line in lines) or proc.poll() is not None,
                   timeout, message=f"tidemq {' '.join(args)} to say {waiting_for!r}")
        assert proc.poll() is None, f"exited {proc.returncode} before waiting: {lines}"
        proc.send_signal(signal.SIGINT)
        stdout = proc.stdout.read()
        proc.wait(timeout)
        reader.join(timeout)
        return Interrupted(proc.returncode, stdout, "".join(lines))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
