"""Truncating a segment while readers read it through its mapping: the file never shrinks, so
no reader ever touches a page past its end (a SIGBUS would kill the broker). The cut part reads
as zeros and the file keeps its size. Run in a child process: a SIGBUS there fails the test
instead of killing pytest."""

from __future__ import annotations

import subprocess
import sys
import textwrap

STRESS = textwrap.dedent("""
    import sys, threading
    from pathlib import Path
    from tidemq.broker.store.segment import Segment

    size = 1 << 20
    segment = Segment(Path(sys.argv[1]), 0, size)
    stop = threading.Event()

    def read_the_tail():
        while not stop.is_set():
            segment.mm[size - 4096:size]   # the pages a shrinking file would take away

    readers = [threading.Thread(target=read_the_tail) for _ in range(2)]
    for reader in readers:
        reader.start()
    for round in range(100):
        segment.write(4096, b"x" * 65536)
        segment.truncate(4096)
        assert segment.mm[4096:size] == bytes(size - 4096), round
    stop.set()
    for reader in readers:
        reader.join()
    assert Path(sys.argv[1]).stat().st_size == size
    print("ok")
""")


def test_truncating_a_segment_under_readers_keeps_its_size_and_zeroes_the_cut(tmp_path):
    done = subprocess.run([sys.executable, "-c", STRESS, str(tmp_path / "segment")],
                          capture_output=True, text=True, timeout=240)
    assert done.returncode == 0 and done.stdout.strip() == "ok", \
        f"exit {done.returncode} (-7 is SIGBUS): {done.stderr[-2000:]}"
