"""Lay out one trace as waterfall rows: depth-first by start, bars as % of the trace's span.

Spans whose parent never arrived (lost, expired, or still in flight) become extra roots
marked `orphan`, so a partial trace still renders instead of hiding spans.
"""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.tracecollector.model import SpanRecord

TICK_COUNT = 5


@dataclass(frozen=True, slots=True)
class WaterfallRow:
    span: SpanRecord
    depth: int
    offset_pct: float
    width_pct: float
    orphan: bool


@dataclass(frozen=True, slots=True)
class Waterfall:
    rows: list[WaterfallRow]
    start_ns: int
    end_ns: int

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    def ticks(self) -> list[tuple[float, int]]:
        """(position %, offset ns) pairs for the time axis."""
        return [
            (100.0 * i / (TICK_COUNT - 1), self.duration_ns * i // (TICK_COUNT - 1))
            for i in range(TICK_COUNT)
        ]


def build_waterfall(spans: list[SpanRecord]) -> Waterfall:
    if not spans:
        return Waterfall(rows=[], start_ns=0, end_ns=0)
    start = min(span.start_ns for span in spans)
    end = max(span.end_ns for span in spans)
    total = max(1, end - start)
    ids = {span.span_id for span in spans}
    children: dict[str | None, list[SpanRecord]] = {}
    roots: list[tuple[SpanRecord, bool]] = []
    for span in spans:
        if span.parent_span_id and span.parent_span_id in ids and span.parent_span_id != span.span_id:
            children.setdefault(span.parent_span_id, []).append(span)
        else:
            roots.append((span, span.parent_span_id is not None))
    for siblings in children.values():
        siblings.sort(key=lambda s: (s.start_ns, s.span_id))
    roots.sort(key=lambda pair: (pair[0].start_ns, pair[0].span_id))

    rows: list[WaterfallRow] = []
    seen: set[str] = set()
    # Iterative depth-first walk: deep traces must not hit the recursion limit, and `seen`
    # stops a malformed parent cycle from looping.
    stack = [(span, 0, orphan) for span, orphan in reversed(roots)]
    while stack:
        span, depth, orphan = stack.pop()
        if span.span_id in seen:
            continue
        seen.add(span.span_id)
        rows.append(WaterfallRow(
            span=span, depth=depth,
            offset_pct=100.0 * (span.start_ns - start) / total,
            width_pct=100.0 * span.duration_ns / total,
            orphan=orphan,
        ))
        for child in reversed(children.get(span.span_id, [])):
            stack.append((child, depth + 1, False))
    # Spans only reachable through a parent cycle are still shown, as orphans.
    for span in spans:
        if span.span_id not in seen:
            seen.add(span.span_id)
            rows.append(WaterfallRow(span, 0, 100.0 * (span.start_ns - start) / total,
                                     100.0 * span.duration_ns / total, True))
    return Waterfall(rows=rows, start_ns=start, end_ns=end)
