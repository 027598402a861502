"""The CI soak (issue #39): `make soak` for a few minutes — a real cluster under seeded pop /
ack / change-invisible / invisibility-timeout churn with a short CommitLog retention — and its
slope check: a least-squares line through the broker's anonymous-memory samples after warm-up
must grow less than MAX_GROWTH_MIB_PER_MIN. Not a timing assertion: the samples are taken when
they are taken, the fit uses their real times, and a slow machine only produces less churn.

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


def test_pop_churn_leaves_the_broker_flat(tmp_path, capsys):
    out = io.StringIO()
    result = run_soak(tmp_path, duration_s=DURATION_S, seed=39, interval_s=5, warmup_s=60,
                      rate=500, out=out)
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
    assert not failures(result, MAX_GROWTH_MIB_PER_MIN), failures(result, MAX_GROWTH_MIB_PER_MIN)
