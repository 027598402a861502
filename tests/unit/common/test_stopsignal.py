"""StopSignal: SIGTERM stops the process even when the kernel delivers it to another thread."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

# The main thread blocks SIGTERM, so the kernel must hand it to the helper thread: the case where
# an untimed Event.wait() in the main thread never runs the Python handler.
CHILD = textwrap.dedent("""
    import signal, sys, threading
    from tidemq.common.stopsignal import StopSignal
    {wait_setup}
    parked = threading.Event()
    threading.Thread(target=parked.wait, daemon=True).start()
    signal.pthread_sigmask(signal.SIG_BLOCK, {{signal.SIGTERM}})
    print("ready", flush=True)
    {wait}
    print("stopped", flush=True)
""")


def run_child(wait_setup: str, wait: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(wait_setup=wait_setup, wait=wait)],
        stdout=subprocess.PIPE, text=True,
    )
    assert proc.stdout.readline().strip() == "ready"
    proc.send_signal(signal.SIGTERM)
    return proc


def test_stop_signal_wakes_when_sigterm_lands_on_another_thread():
    # With an untimed threading.Event().wait() here the child never prints "stopped".
    proc = run_child("stop = StopSignal().install()", "stop.wait()")
    try:
        out, _ = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out.strip() == "stopped"

