"""Older Kafka client releases beside the project's own: a uv-managed venv under .data.

The project's environment pins the newest clients (kafka-python 3.0.12, confluent-kafka 2.16.1,
aiokafka 0.14.0); the older ones the Kafka tests also drive cannot share it. They live in
`.data/kafka-old-clients/venv`, installed by `uv pip install --require-hashes` from
tests/integration/kafka/old_clients/requirements.txt (versions and hashes pinned there), and
built again only when that file changes. A lock keeps two test processes from building it at
once.
"""

from __future__ import annotations

import fcntl
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REQUIREMENTS = REPO / "tests" / "integration" / "kafka" / "old_clients" / "requirements.txt"
HOME = REPO / ".data" / "kafka-old-clients"
INSTALL_TIMEOUT_S = 600


def old_clients_python() -> Path:
    """The interpreter of the venv holding the pinned older clients, built if missing."""
    HOME.mkdir(parents=True, exist_ok=True)
    venv = HOME / "venv"
    python = venv / "bin" / "python"
    stamp = HOME / "requirements.sha256"
    wanted = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()
    with (HOME / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if python.exists() and stamp.exists() and stamp.read_text() == wanted:
            return python
        shutil.rmtree(venv, ignore_errors=True)
        stamp.unlink(missing_ok=True)
        subprocess.run(["uv", "venv", "--quiet", "--python", sys.executable, str(venv)],
                       check=True, timeout=INSTALL_TIMEOUT_S)
        subprocess.run(["uv", "pip", "install", "--quiet", "--python", str(python),
                        "--require-hashes", "-r", str(REQUIREMENTS)],
                       check=True, timeout=INSTALL_TIMEOUT_S)
        stamp.write_text(wanted)
    return python
