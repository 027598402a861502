"""bench/config/run.py's bookkeeping: lost watch deliveries are counted instead of timed as
10 s samples, each worker thread keeps its own CAS chain, failed compares are counted."""

from __future__ import annotations

import importlib.util
import threading
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


def test_every_operation_runs_once_and_each_worker_on_one_thread(bench):
    seen: dict[int, set[int]] = {}
    done: list[int] = []
    lock = threading.Lock()

    def operation(worker: int, i: int) -> None:
        with lock:
            seen.setdefault(worker, set()).add(threading.get_ident())
            done.append(i)

    bench.rate(10, 3, operation)
    assert sorted(done) == list(range(10))
    assert set(seen) == {0, 1, 2} and all(len(threads) == 1 for threads in seen.values())


def test_a_cas_chain_goes_on_from_the_revision_it_is_given(bench):
    store = {"/p/cas/0": 5, "/p/cas/1": 7}   # key -> mod revision
    calls = []

    def cas(key: str, expected: int) -> tuple[bool, int]:
        calls.append((key, expected))
        if store[key] != expected:
            return False, store[key]
        store[key] = max(store.values()) + 1
        return True, store[key]

    chains = bench.CasChains("/p/", 2, lambda key: store[key], cas)
    chains(0, 0)
    store["/p/cas/1"] = 20            # someone else wrote worker 1's key
    chains(1, 1)
    chains(1, 3)
    assert calls == [("/p/cas/0", 5), ("/p/cas/1", 7), ("/p/cas/1", 20)]
    assert chains.failed == 1
