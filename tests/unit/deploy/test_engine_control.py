"""Stopping the Docker engine stops only the daemon whose PID we recorded."""

from __future__ import annotations

import shutil
import subprocess

from deploy.engine import stop_engine
from deploy.pidfiles import await_exit, recorded_pid, runs
from tests.support.processes import wait_until


def _stand_in(tmp_path, name: str) -> subprocess.Popen:
    """A long sleep whose command line names it `name` (a symlink to sleep); returned once
    its command line shows (right after a vfork it can read empty for a moment)."""
    program = tmp_path / name
    program.symlink_to(shutil.which("sleep"))
    process = subprocess.Popen([str(program), "300"])
    wait_until(lambda: runs(process.pid, name), 10, interval=0.01,
               message=f"{name}'s command line")
    return process


def test_stop_engine_terminates_the_recorded_process_and_forgets_it(tmp_path):
    daemon = _stand_in(tmp_path, "dockerd")
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


def test_a_stale_pid_file_signals_nothing(tmp_path):
    """The recorded dockerd is gone and the kernel gave its PID to another program: that
    program is left alone and the stale file is removed."""
    other = _stand_in(tmp_path, "not-dockerd")
    pid_file = tmp_path / "dockerd.pid"
    pid_file.write_text(str(other.pid))
    try:
        assert not stop_engine(pid_file, timeout=10)
        assert other.poll() is None and runs(other.pid, "not-dockerd")
        assert not pid_file.exists()
    finally:
        other.kill()
        other.wait(10)


def test_a_recorded_pid_counts_only_while_it_runs_the_program(tmp_path):
    daemon = _stand_in(tmp_path, "supervisord")
    pid_file = tmp_path / "supervisord.pid"
    pid_file.write_text(str(daemon.pid))
    assert recorded_pid(pid_file, "supervisord") == daemon.pid
    assert recorded_pid(pid_file, "dockerd") is None
    daemon.kill()
    daemon.wait(10)
    assert recorded_pid(pid_file, "supervisord") is None


def test_a_daemon_that_outlives_the_wait_is_killed_and_reaped(tmp_path):
    daemon = _stand_in(tmp_path, "supervisord")  # a sleep: never asked to stop, it stays
    try:
        await_exit(daemon.pid, "supervisord", timeout=0.2)
        # reaped by await_exit or by wait(), whichever comes first: its exit status is lost
        wait_until(lambda: not runs(daemon.pid, "supervisord"), 10, message="the daemon gone")
        daemon.wait(timeout=10)
    finally:
        daemon.kill()


def test_the_wait_leaves_a_process_running_another_program_alone(tmp_path):
    """Its PID, once the daemon's, went to another program: nothing to wait for or kill."""
    other = _stand_in(tmp_path, "not-supervisord")
    try:
        await_exit(other.pid, "supervisord", timeout=0.2)
        assert other.poll() is None and runs(other.pid, "not-supervisord")
    finally:
        other.kill()
        other.wait(10)
