"""Query-parameter parsing and the waterfall layout the trace page draws."""

from __future__ import annotations

import pytest
from tidemq.common.errors import InvalidArgument
from tidemq.tracecollector.model import parse_trace_id
from tidemq.tracecollector.query import (
    MAX_LIMIT,
    format_duration,
    parse_limit,
    parse_since,
    service_colour,
    service_colours,
)
from tidemq.tracecollector.waterfall import build_waterfall

from tests.unit.tracecollector.spans import make_span, new_trace_id

NOW = 1_700_000_000 * 10**9


@pytest.mark.parametrize(("text", "expected"), [
    (None, 0), ("", 0), ("15m", NOW - 900 * 10**9), ("2h", NOW - 7200 * 10**9),
    ("1700000000", NOW), ("1700000000.5", NOW + 5 * 10**8),
    ("2023-11-14T22:13:20Z", NOW), ("2023-11-14T22:13:20", NOW),
])
def test_parse_since_accepts_epoch_iso_and_lookback(text, expected):
    assert parse_since(text, NOW) == expected


@pytest.mark.parametrize("text", ["yesterday", "15x", "-"])
def test_parse_since_rejects_garbage_with_a_sentence(text):
    with pytest.raises(InvalidArgument, match="since must be"):
        parse_since(text, NOW)


def test_parse_limit_bounds():
    assert parse_limit(None) == 20 and parse_limit("7") == 7
    for bad in ("0", str(MAX_LIMIT + 1), "ten"):
        with pytest.raises(InvalidArgument, match="limit must be"):
            parse_limit(bad)


def test_parse_trace_id_normalises_and_rejects():
    assert parse_trace_id(" " + "AB" * 16 + " ") == "ab" * 16
    with pytest.raises(InvalidArgument, match="32 hex characters"):
        parse_trace_id("abc")


def test_format_duration_picks_a_readable_unit():
    assert format_duration(0) == "0"
    assert [format_duration(n) for n in (12, 1_500, 2_340_000, 3_000_000_000)] == [
        "12 ns", "1.5 µs", "2.34 ms", "3 s"]


def test_service_colours_are_distinct_for_ten_services_and_stable():
    names = [f"svc-{i}" for i in range(10)]
    colours = service_colours(list(reversed(names)))
    assert sorted(colours.values()) == list(range(10))
    assert service_colour("svc-3", colours) == colours["svc-3"]
    assert service_colour("new", colours) == service_colour("new")  # hash fallback
    assert 0 <= service_colour("gateway") < 10


def test_waterfall_orders_depth_first_and_positions_bars():
    trace_id = new_trace_id()
    root = make_span(trace_id, name="root", start=0, duration=100)
    late_child = make_span(trace_id, parent=root.span_id, name="b", start=50, duration=50)
    early_child = make_span(trace_id, parent=root.span_id, name="a", start=10, duration=20)
    grandchild = make_span(trace_id, parent=early_child.span_id, name="a1", start=15,
                           duration=5)
    orphan = make_span(trace_id, parent="00000000000000ff", name="orphan", start=60,
                       duration=10)
    waterfall = build_waterfall([late_child, orphan, grandchild, root, early_child])
    layout = [(r.span.name, r.depth, r.offset_pct, r.width_pct, r.orphan)
              for r in waterfall.rows]
    assert layout == [
        ("root", 0, 0.0, 100.0, False),
        ("a", 1, 10.0, 20.0, False),
        ("a1", 2, 15.0, 5.0, False),
        ("b", 1, 50.0, 50.0, False),
        ("orphan", 0, 60.0, 10.0, True),
    ]
    assert waterfall.duration_ns == 100
    assert waterfall.ticks()[-1] == (100.0, 100)


def test_waterfall_survives_parent_cycles():
    trace_id = new_trace_id()
    a = make_span(trace_id, span_id="00000000000000a1", parent="00000000000000b2", name="a")
    b = make_span(trace_id, span_id="00000000000000b2", parent="00000000000000a1", name="b")
    rows = build_waterfall([a, b]).rows
    assert sorted(r.span.name for r in rows) == ["a", "b"]
    assert all(r.orphan for r in rows)
