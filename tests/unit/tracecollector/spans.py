"""Builders for SpanRecords used across the collector's unit tests."""

from __future__ import annotations

import itertools

from tidemq.tracecollector.model import SpanRecord

_ids = itertools.count(1)
BASE_NS = 1_700_000_000_000_000_000


def new_trace_id() -> str:
    return f"{next(_ids):032x}"


def new_span_id() -> str:
    return f"{next(_ids):016x}"


def make_span(trace_id: str, *, parent: str | None = None, name: str = "op",
              service: str = "broker", start: int = 0, duration: int = 1_000_000,
              status: str = "UNSET", span_id: str | None = None, **attributes) -> SpanRecord:
    return SpanRecord(
        trace_id=trace_id, span_id=span_id or new_span_id(), parent_span_id=parent, name=name,
        service_name=service, kind="SERVER", start_ns=BASE_NS + start,
        end_ns=BASE_NS + start + duration, status_code=status, attributes=dict(attributes),
    )
