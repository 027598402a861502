"""Pop state across a SIGKILL at any point (issue #39), crash injection as in the store's
recovery tests: a child process churns pops, acks, changes of invisible time, expiries and
compactions (multi-record snapshots) on a real store and is SIGKILLed after a drawn delay; the
store and pop state recovered from its directory must hand out again every message sent and not
acked (none lost) and never one whose ack was answered (none revived)."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tidemq.broker.pop.service import SNAPSHOT_GROUP
from tidemq.common import record
from tidemq.common.system_topics import retry_topic

from tests.support.processes import wait_until
from tests.unit.broker.test_pop_state_machine import GROUP, REVIVE, TOPIC, PopMachine

ROOT = Path(__file__).resolve().parents[3]


def journal(directory: Path) -> tuple[set[bytes], set[bytes], set[bytes]]:
    """Sent (answered), acked (answered), and acks tried whose answer the kill may have cut."""
    events: dict[str, set[bytes]] = {"S": set(), "A": set(), "a": set()}
    text = (directory / "journal").read_text() if (directory / "journal").exists() else ""
    for line in text.split("\n")[:-1]:  # the last piece is empty, or a line the kill tore
        kind, body = line.split(" ", 1)
        events[kind].add(body.encode())
    return events["S"], events["A"], events["a"] - events["A"]


def drain(machine: PopMachine) -> set[bytes]:
    """Time far ahead, pop and ack everything: the bodies handed out again."""
    seen: set[bytes] = set()
    for _ in range(6):
        machine.clock.offset += 13 * 3600
        while machine.run(machine.pop.revive_due()):
            pass
        assert machine.store.wait_dispatched(10)
        while True:
            popped = machine.run(machine.pop.pop(GROUP, TOPIC, 32, 3_600_000, 0, ""))
            if not popped.handles:
                break
            seen.update(bytes(r.body) for r in record.iter_records(popped.records))
            machine.run(machine.pop.ack_many(GROUP, popped.handles))
    return seen


@settings(max_examples=5, deadline=None, suppress_health_check=list(HealthCheck))
@given(seed=st.integers(0, 2**16), run_s=st.floats(0.5, 4.0))
def test_a_sigkill_at_any_point_loses_no_unacked_pop_and_revives_no_acked_one(seed, run_s):
    directory = Path(tempfile.mkdtemp(prefix="pop-crash-"))
    try:
        child = subprocess.Popen(
            [sys.executable, "-m", "tests.unit.broker.pop_crash_child", str(directory),
             str(seed)], cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            # the run starts once an ack was answered: the verdicts below judge something
            wait_until(lambda: journal(directory)[1] or child.poll() is not None,
                       60, message="the child to have an ack answered")
            deadline = time.monotonic() + run_s
            while time.monotonic() < deadline and child.poll() is None:
                time.sleep(0.05)  # the drawn moment of the crash, not synchronisation
            assert child.poll() is None, child.stderr.read().decode()[-2000:]
        finally:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            child.stderr.close()
        sent, acked, tried = journal(directory)
        assert sent and acked, "nothing sent and acked before the kill: nothing to judge"
        machine = PopMachine(directory)  # recovers the store; the pop state from its log
        try:
            if machine.messaging.topics.get(retry_topic(GROUP)) is None:
                machine.broker.define(retry_topic(GROUP), 1)
            machine.pop.rebuild()
            saved = machine.offsets.query(SNAPSHOT_GROUP, REVIVE)
            if saved:  # a snapshot was saved (and flushed) before the kill: replay starts there
                assert machine.pop._last_snapshot >= saved[0][2]
            again = drain(machine)
            assert not again & acked, f"acked messages revived: {sorted(again & acked)[:5]}"
            lost = sent - acked - tried - again
            assert not lost, f"un-acked messages lost: {sorted(lost)[:5]}"
        finally:
            machine.teardown()
    finally:
        shutil.rmtree(directory, ignore_errors=True)

