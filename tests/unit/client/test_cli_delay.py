"""`tidemq send --delay / --delay-level / --deliver-at` turned into a delivery time, without a
cluster (the send itself: tests/integration/consumption/test_scheduled.py)."""

from __future__ import annotations

import time

import pytest
import typer
from tidemq.client.cli_stream import _deliver_at_ms


def test_a_delay_counts_from_now():
    before = int(time.time() * 1000)
    at = _deliver_at_ms("10s", None, 0)
    assert before + 10_000 <= at <= int(time.time() * 1000) + 10_000
    assert _deliver_at_ms("250ms", None, 0) - int(time.time() * 1000) <= 250


@pytest.mark.parametrize("text, expected", [
    ("1795507200000", 1795507200000),
    ("2026-11-24T08:00:00Z", 1795507200000),
    ("2026-11-24T09:00:00+01:00", 1795507200000),
])
def test_a_delivery_time_is_epoch_ms_or_iso_8601(text, expected):
    assert _deliver_at_ms(None, text, 0) == expected


def test_a_level_alone_leaves_the_time_to_the_broker():
    assert _deliver_at_ms(None, None, 3) == 0


@pytest.mark.parametrize("delay, at, level", [
    ("10s", "1795507200000", 0), ("10s", None, 2), (None, "1795507200000", 2),
    ("ten seconds", None, 0), (None, "tomorrow", 0),
])
def test_conflicting_or_unreadable_options_are_refused(delay, at, level):
    with pytest.raises(typer.BadParameter):
        _deliver_at_ms(delay, at, level)
