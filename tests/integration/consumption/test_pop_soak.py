"""The CI soak (issue #39): `make soak` for a few minutes — a real cluster under seeded pop /
ack / change-invisible / invisibility-timeout churn with a short CommitLog retention (36 s) and
a compacted topic updated all along — and its slope check: least-squares lines through the
broker's anonymous-memory and data-directory samples after warm-up must grow less than
MAX_GROWTH_MIB_PER_MIN and MAX_DATA_GROWTH_MIB_PER_MIN, the compacted topic's live records stay
under their bound and compaction and copy-forward keep running. Not a timing assertion: the
samples are taken when they are taken, the fit uses their real times, and a slow machine only
produces less churn.

Before the fix (commit "Pop state stays flat") the same churn grew the broker by about
18 MiB/min at 1 000 msgs/s (9 MiB/min at this test's 500): every expired handle was kept an hour,
and the live pop book held every record after the first snapshot in its out-of-order set."""

from __future__ import annotations

import io
import os

import pytest

from tests.soak import failures, run_soak

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
DURATION_S = float(os.environ.get("SOAK_CI_DURATION_S", "150"))
MAX_GROWTH_MIB_PER_MIN = 3.0
# 4 MiB segments freed one at a time make a saw tooth; a compacted topic pinning the shared
# CommitLog (no copy-forward) would grow it by the whole write rate, about 15 MiB/min here
MAX_DATA_GROWTH_MIB_PER_MIN = 5.0


def test_pop_churn_leaves_the_broker_flat(tmp_path, capsys):
    out = io.StringIO()
    result = run_soak(tmp_path, duration_s=DURATION_S, seed=39, interval_s=5, warmup_s=60,
                      rate=500, retention_hours=0.01, compacted_rate=50, compacted_keys=500,
                      out=out)
    with capsys.disabled():
        print("\n" + out.getvalue())
    after = [s for s in result.samples if s.at_s >= 60]
    assert len(after) >= 6, f"too few samples after warm-up to fit a line: {len(after)}"
    assert after[-1].popped > after[0].popped, "no pops after warm-up: nothing was measured"
    assert result.slope_mib_per_min < MAX_GROWTH_MIB_PER_MIN, (
        f"the broker's anonymous memory grows {result.slope_mib_per_min:.2f} MiB/min after "
        f"warm-up (bound {MAX_GROWTH_MIB_PER_MIN}); samples:\n{out.getvalue()}")
    # the pop state itself levels off: expired handles are forgotten after 30 s here
    assert max(s.expired for s in after) < 30 * 500, "expired handles are not forgotten"
    assert result.restarts and result.restarts[-1][2] >= 0, "the restart replayed nothing"
    # the compacted topic stays compacted, and copy-forward frees the segments it would pin
    assert any(s.relocated_segments > 0 for s in after), "copy-forward never emptied a segment"
    found = failures(result, MAX_GROWTH_MIB_PER_MIN, MAX_DATA_GROWTH_MIB_PER_MIN)
    assert not found, f"{found}; samples:\n{out.getvalue()}"
