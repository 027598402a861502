"""The soak's verdict (tests/soak.py) judges something: a slope over too few samples after
warm-up, or over samples whose pop metrics were not found, fails instead of reading flat."""

from __future__ import annotations

from tests.soak import MIN_SAMPLES, Sample, SoakResult, after_warmup, failures, slope_per_min


def _sample(at_s: float, anon_mib: float, incarnation: int = 0, expired: float = 0) -> Sample:
    return Sample(at_s, anon_mib, anon_mib, 10, 0, expired, 0, 1.0, 0, 0, incarnation)


def test_slope_counts_only_the_points_it_fitted():
    points = [(0.0, 10.0), (60.0, 12.0), (120.0, 14.0), (200.0, 1.0)]
    slope, judged = slope_per_min(points, [0, 0, 0, 1])  # the lone point of process 1: nothing
    assert slope == 2.0
    assert judged == 3
    assert slope_per_min([], []) == (0.0, 0)


RESTARTED = [(240.0, 0.5, 1000)]  # at, start-up s, revive records replayed


def test_too_few_samples_fail_instead_of_reading_flat():
    result = SoakResult(samples=[_sample(70, 50)], restarts=RESTARTED, judged=1)
    found = failures(result, 2.0)
    assert len(found) == 1 and "nothing to judge" in found[0]


def test_missing_pop_metrics_fail():
    samples = [_sample(60 + 10 * i, 50, expired=-1) for i in range(MIN_SAMPLES)]
    found = failures(SoakResult(samples=samples, restarts=RESTARTED, judged=MIN_SAMPLES), 2.0)
    assert len(found) == 1 and "metrics were not found" in found[0]


def test_a_restart_whose_replay_line_was_not_found_fails():
    samples = [_sample(60 + 10 * i, 50) for i in range(MIN_SAMPLES)]
    for restarts in ([], [(240.0, 0.5, -1)]):
        found = failures(SoakResult(samples=samples, restarts=restarts, judged=MIN_SAMPLES), 2.0)
        assert len(found) == 1 and "replayed' log line" in found[0]


def test_enough_flat_samples_pass_and_growth_fails():
    samples = [_sample(60 + 10 * i, 50) for i in range(MIN_SAMPLES)]
    assert failures(SoakResult(samples=samples, restarts=RESTARTED, judged=MIN_SAMPLES),
                    2.0) == []
    grown = SoakResult(samples=samples, restarts=RESTARTED, judged=MIN_SAMPLES,
                       slope_mib_per_min=5.0)
    assert "grows 5.00 MiB/min" in failures(grown, 2.0)[0]


def _compacted(live: int, removed: float, relocated: float = 0) -> SoakResult:
    samples = [Sample(60 + 10 * i, 50, 50, 10, 0, 0, 0, 1.0, 0, 0, 0, 3, live, 100 * i,
                      removed * i, i, relocated) for i in range(MIN_SAMPLES)]
    return SoakResult(samples=samples, restarts=RESTARTED, judged=MIN_SAMPLES,
                      compacted_live_bound=1000)


def test_the_compacted_topic_is_judged():
    assert failures(_compacted(live=900, removed=50), 2.0) == []
    assert "holds 1200 live records" in failures(_compacted(live=1200, removed=50), 2.0)[0]
    assert "removed no record" in failures(_compacted(live=900, removed=0), 2.0)[0]
    unread = failures(_compacted(live=-1, removed=50), 2.0)
    assert len(unread) == 1 and "were not read" in unread[0]
    unmeasured = failures(_compacted(live=900, removed=50, relocated=-1), 2.0)
    assert len(unmeasured) == 1 and "compaction metrics were not found" in unmeasured[0]


def test_a_restarted_process_counter_is_not_growth_between_samples():
    result = _compacted(live=900, removed=0)
    result.samples[3].incarnation = result.samples[4].incarnation = \
        result.samples[5].incarnation = 1
    for sample in result.samples[3:]:   # the new process's counter, from its own start
        sample.c_removed = 700
    assert "removed no record" in failures(result, 2.0)[0]


def test_a_growing_data_directory_fails():
    grown = SoakResult(samples=[_sample(60 + 10 * i, 50) for i in range(MIN_SAMPLES)],
                       restarts=RESTARTED, judged=MIN_SAMPLES, data_slope_mib_per_min=9.0)
    assert failures(grown, 2.0, 10.0) == []
    assert "data directory grows 9.00 MiB/min" in failures(grown, 2.0, 2.0)[0]


def test_each_process_is_judged_from_its_own_warm_up():
    """A restarted process refills its time-bounded state as the first did: its samples count
    once it has run for the warm-up, not from the run's warm-up on (the hour run: each process
    rose for ten minutes after its restart, then stayed level)."""
    restarts = [(300.0, 1.0, 10)]
    samples = [_sample(at, 50) for at in (50, 100, 200, 290)] + \
        [_sample(at, 50, incarnation=1) for at in (310, 350, 400, 450)]
    result = SoakResult(samples=samples, restarts=restarts, warmup_s=100)
    assert [s.at_s for s in after_warmup(result)] == [100, 200, 290, 400, 450]
