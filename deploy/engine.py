"""A Docker engine to talk to: the running one, or a dockerd we start (as root) and later stop.

The PID of a dockerd we started is recorded in a pid file so `make compose-down` (another
process) can stop exactly that daemon and nothing else.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

from deploy.pidfiles import await_exit, recorded_pid
from deploy.topology import REPO_ROOT

DEFAULT_PID_FILE = REPO_ROOT / ".data" / "run" / "dockerd.pid"


class EngineUnavailable(RuntimeError):
    pass


def engine_answers() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "info"], capture_output=True, timeout=30)
    return probe.returncode == 0


def ensure_engine(pid_file: Path = DEFAULT_PID_FILE, timeout: float = 60.0) -> int | None:
    """Return None when an engine already answers, else the PID of the dockerd started here."""
    if engine_answers():
        return None
    if shutil.which("docker") is None:
        raise EngineUnavailable(
            "no `docker` client: install Docker (Debian: `apt-get install docker-compose`, "
            "which brings docker.io)"
        )
    dockerd = shutil.which("dockerd")
    if dockerd is None or os.geteuid() != 0:
        raise EngineUnavailable(
            "the Docker engine is not running and cannot be started here "
            f"({'not root' if dockerd else 'no dockerd binary'}): start dockerd, or as root "
            "install it with `apt-get install docker-compose`"
        )
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    log = open(pid_file.with_name("dockerd.log"), "ab")  # noqa: SIM115 - handed to the daemon
    daemon = subprocess.Popen(
        [dockerd], stdout=log, stderr=subprocess.STDOUT, start_new_session=True
    )
    pid_file.write_text(str(daemon.pid))
    deadline = time.monotonic() + timeout
    while not engine_answers():
        if daemon.poll() is not None or time.monotonic() > deadline:
            raise EngineUnavailable(f"dockerd did not come up; see {log.name}")
        time.sleep(0.25)
    return daemon.pid


def stop_engine(pid_file: Path = DEFAULT_PID_FILE, timeout: float = 30.0) -> bool:
    """Stop the dockerd recorded in `pid_file` (only one we started); True if one was stopped.
    A stale file (its PID now another program's) is removed and nothing is signalled."""
    pid = recorded_pid(pid_file, "dockerd")
    pid_file.unlink(missing_ok=True)
    if pid is None:
        return False
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return False
    await_exit(pid, "dockerd", timeout)
    return True
