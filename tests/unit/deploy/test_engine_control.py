"""Stopping the Docker engine stops only the daemon whose PID we recorded."""

from __future__ import annotations

import subprocess

from deploy.engine import stop_engine


def test_stop_engine_terminates_the_recorded_process_and_forgets_it(tmp_path):
    daemon = subprocess.Popen(["sleep", "300"])
    pid_file = tmp_path / "dockerd.pid"
    pid_file.write_text(str(daemon.pid))
    try:
        assert stop_engine(pid_file, timeout=10)
        assert daemon.wait(timeout=10) is not None
        assert not pid_file.exists()
    finally:
        daemon.kill()


def test_stop_engine_without_a_recorded_daemon_does_nothing(tmp_path):
    assert not stop_engine(tmp_path / "missing.pid")
    (tmp_path / "garbage.pid").write_text("not a pid")
    assert not stop_engine(tmp_path / "garbage.pid")
