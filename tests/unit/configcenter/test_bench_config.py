"""bench/config/run.py counts lost watch deliveries instead of timing them as 10 s samples."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

RUN = Path(__file__).resolve().parents[3] / "bench" / "config" / "run.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_config_run", RUN)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_lost_delivery_is_counted_not_timed(bench):
    sent = []
    samples, lost = bench.latencies(4, sent.append, lambda i: i != 2)
    assert sent == [0, 1, 2, 3]
    assert (len(samples), lost) == (3, 1)


def test_a_late_delivery_is_not_taken_for_the_awaited_one(bench):
    deliveries = iter(["0", "1"])  # change 0 arrives late, while change 1 is awaited
    assert bench._await(1, lambda timeout: next(deliveries, None))
