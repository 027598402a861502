"""EpochFile: leader-epoch history, persisted atomically, against a list model (hypothesis)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.broker.store import StoreError
from tidemq.broker.store.ha import EpochEntry, EpochFile

operations = st.lists(st.one_of(
    st.tuples(st.just("append"), st.integers(0, 4), st.integers(0, 5000)),
    st.tuples(st.just("truncate"), st.integers(0, 20_000), st.just(0)),
), max_size=25)


def model_end_of(model: list[tuple[int, int]], epoch: int, log_end: int) -> int:
    later = [start for e, start in model if e > epoch]
    return min(later[0], log_end) if later else log_end


@settings(max_examples=60, deadline=None)
@given(operations, st.integers(0, 8), st.integers(0, 30_000))
def test_epoch_file_matches_its_model_and_survives_reopening(tmp_path_factory, ops, probe,
                                                             log_end):
    path = tmp_path_factory.mktemp("epochs") / "epochs"
    epochs, model = EpochFile(path), []
    for op, a, b in ops:
        if op == "append":
            epoch = (model[-1][0] if model else 0) + a   # a == 0: not increasing
            start = (model[-1][1] if model else 0) + b
            if model and a == 0:
                with pytest.raises(StoreError, match="does not follow"):
                    epochs.append(epoch, start)
                continue
            epochs.append(epoch, start)
            model.append((epoch, start))
        else:
            epochs.truncate_after(a)
            model = [(e, s) for e, s in model if s <= a]
        reopened = EpochFile(path)
        assert reopened.entries == [EpochEntry(*entry) for entry in model] == epochs.entries
    assert epochs.last_epoch == (model[-1][0] if model else 0)
    assert epochs.end_of(probe, log_end) == model_end_of(model, probe, log_end)
    assert [p.name for p in path.parent.iterdir()] == (["epochs"] if path.exists() else [])


def test_end_of_an_epoch_the_replica_never_had_is_the_start_of_the_next(tmp_path):
    epochs = EpochFile(tmp_path / "epochs")
    for epoch, start in ((1, 0), (2, 500), (4, 900)):
        epochs.append(epoch, start)
    assert [epochs.end_of(e, 1200) for e in (0, 1, 2, 3, 4, 5)] == [0, 500, 900, 900, 1200, 1200]
    assert epochs.entries_after(2) == [EpochEntry(4, 900)]
