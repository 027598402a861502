"""The service map: who calls whom, how often, and how often it fails, over a time window.

An edge A → B counts the spans of service B whose parent span belongs to service A (a
request crossing a process boundary: the gateway's Send call into the broker, kind `call`),
and its errors are those child spans marked ERROR. Messages add two kinds: a consumer's
`process` span under a producer's publish span (kind `consume`: B processed A's messages)
and a `receive` span linked to a publish span (kind `receive`: B read A's messages).
Computed when asked, from the traces that started in the window (an index range on
`traces.start_ns`, then index lookups by trace id), so the write path pays nothing for it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

MAX_WINDOW_TRACES = 20_000  # the newest traces of a long window, so a page stays quick

_CALL_EDGES = """
SELECT p.service_name, c.service_name,
    CASE WHEN c.kind = 'CONSUMER' THEN 'consume' ELSE 'call' END,
    count(*), sum(c.status_code = 'ERROR')
FROM (SELECT trace_id FROM traces WHERE start_ns >= ? AND start_ns < ?
      ORDER BY start_ns DESC LIMIT ?) w
JOIN spans c ON c.trace_id = w.trace_id
JOIN spans p ON p.trace_id = c.trace_id AND p.span_id = c.parent_span_id
WHERE p.service_name != c.service_name
GROUP BY 1, 2, 3
"""
_LINK_EDGES = """
SELECT p.service_name, c.service_name, 'receive', count(*), sum(c.status_code = 'ERROR')
FROM (SELECT trace_id FROM traces WHERE start_ns >= ? AND start_ns < ?
      ORDER BY start_ns DESC LIMIT ?) w
JOIN span_links l ON l.trace_id = w.trace_id
JOIN spans c ON c.seq = l.seq
JOIN spans p ON p.trace_id = l.linked_trace_id AND p.span_id = l.linked_span_id
GROUP BY 1, 2
"""


@dataclass(frozen=True, slots=True)
class Edge:
    caller: str
    callee: str
    kind: str  # "call", "consume" (process span under a publish span), "receive" (link)
    requests: int
    errors: int
    window_s: float

    @property
    def rate_per_s(self) -> float:
        return self.requests / self.window_s if self.window_s > 0 else 0.0

    @property
    def error_ratio(self) -> float:
        return self.errors / self.requests if self.requests else 0.0

    def to_json(self) -> dict:
        return {"caller": self.caller, "callee": self.callee, "kind": self.kind,
                "requests": self.requests, "errors": self.errors,
                "rate_per_s": round(self.rate_per_s, 4),
                "error_ratio": round(self.error_ratio, 4)}


def service_edges(db: sqlite3.Connection, since_ns: int, until_ns: int) -> list[Edge]:
    """Edges of the traces that started in [since_ns, until_ns), busiest first."""
    window_s = max(1e-9, (until_ns - since_ns) / 1e9)
    params = (since_ns, until_ns, MAX_WINDOW_TRACES)
    edges = [Edge(a, b, kind, n, int(errors or 0), window_s)
             for sql in (_CALL_EDGES, _LINK_EDGES)
             for a, b, kind, n, errors in db.execute(sql, params)]
    return sorted(edges, key=lambda e: (-e.requests, e.caller, e.callee, e.kind))
