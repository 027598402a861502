"""Plain records the collector stores and serves, free of protobuf and transport types.

Ids are lowercase hex (32 chars for a trace, 16 for a span) because that is how every
OpenTelemetry tool prints them, so an id copied from a log line finds its trace here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from tidemq.common.errors import InvalidArgument

TRACE_ID_HEX_LEN = 32
SPAN_ID_HEX_LEN = 16
_TRACE_ID_RE = re.compile(r"^[0-9a-f]{32}$")


@dataclass(frozen=True, slots=True)
class SpanRecord:
    """One finished span as received over OTLP."""

    trace_id: str
    span_id: str
    parent_span_id: str | None
    name: str
    service_name: str
    kind: str
    start_ns: int
    end_ns: int
    status_code: str = "UNSET"
    status_message: str = ""
    attributes: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    links: list[dict[str, Any]] = field(default_factory=list)

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    def to_json(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "span_id": self.span_id,
            "parent_span_id": self.parent_span_id,
            "name": self.name,
            "service": self.service_name,
            "kind": self.kind,
            "start_ns": self.start_ns,
            "end_ns": self.end_ns,
            "duration_ns": self.duration_ns,
            "status": {"code": self.status_code, "message": self.status_message},
            "attributes": self.attributes,
            "events": self.events,
            "links": self.links,
        }


@dataclass(frozen=True, slots=True)
class TraceSummary:
    """What the trace list shows: enough to pick a trace without loading its spans."""

    trace_id: str
    root_name: str | None
    root_service: str | None
    services: tuple[str, ...]
    span_count: int
    start_ns: int
    end_ns: int
    error_count: int = 0

    @property
    def duration_ns(self) -> int:
        return max(0, self.end_ns - self.start_ns)

    def to_json(self) -> dict[str, Any]:
        return {
            "trace_id": self.trace_id,
            "root_name": self.root_name,
            "root_service": self.root_service,
            "services": list(self.services),
            "span_count": self.span_count,
            "error_count": self.error_count,
            "start_ns": self.start_ns,
            "duration_ns": self.duration_ns,
        }


def parse_trace_id(text: str) -> str:
    """Normalise a user-supplied trace id or raise INVALID_ARGUMENT saying what is wrong."""
    trace_id = text.strip().lower()
    if not _TRACE_ID_RE.match(trace_id):
        raise InvalidArgument(
            f"trace id must be {TRACE_ID_HEX_LEN} hex characters, got {text[:64]!r}"
        )
    return trace_id
