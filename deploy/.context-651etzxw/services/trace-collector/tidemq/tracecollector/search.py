"""Trace search: which traces match a message id, key, topic, group, service, status and
time range. Pure SQL over a reader connection (the store owns connections and writing).

The control plane's own calls (config reads and puts, leases, registrations, replication
housekeeping: tidemq.common.sampling.QUIET_BY_DEFAULT) are not recorded by default; a service
told to record them (its `trace_quiet_operations` emptied) still does not bury users' work:
traces whose root span is one of those operations are left out unless `internal` is asked
for (the dashboard's "Internal calls" switch).

Every filter narrows the `traces` table (one row per trace, indexed by start time); a tag
filter is an `IN` over the `span_tags` primary key (tag, value), so finding a message by key
among a million spans is an index lookup, not a scan of span JSON.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from tidemq.common.sampling import QUIET_BY_DEFAULT, is_quiet
from tidemq.tracecollector.index import GROUP, KEY, MSG, TOPIC
from tidemq.tracecollector.model import TraceSummary

_NO_END = 2**63 - 1
INTERNAL_OPERATIONS = frozenset(QUIET_BY_DEFAULT)
INTERNAL_ROOT_SQL = "tidemq_internal_root"  # registered on every connection (store.py)


def internal_root(root_name: str | None) -> bool:
    """Whether a trace whose root span is `root_name` is the system's own routine work."""
    return bool(root_name) and is_quiet(root_name, INTERNAL_OPERATIONS)


@dataclass(frozen=True, slots=True)
class TraceQuery:
    """What to look for; empty fields do not filter. `msg_id` and `unique_id` both match
    either id of a message (see index.py)."""

    msg_id: str | None = None
    unique_id: str | None = None
    key: str | None = None
    topic: str | None = None
    group: str | None = None
    service: str | None = None
    errors_only: bool = False
    internal: bool = False  # also the traces of the control plane's own calls
    since_ns: int = 0
    until_ns: int = 0
    limit: int = 20

    def tag_filters(self) -> list[tuple[str, str]]:
        wanted = ((MSG, self.msg_id), (MSG, self.unique_id), (KEY, self.key),
                  (TOPIC, self.topic), (GROUP, self.group))
        return [(tag, value.strip()) for tag, value in wanted if value and value.strip()]

    @property
    def is_filtered(self) -> bool:
        return bool(self.tag_filters() or self.service or self.errors_only or self.internal
                    or self.since_ns or self.until_ns)


def find_traces(db: sqlite3.Connection, query: TraceQuery) -> list[TraceSummary]:
    """Matching traces newest first (by start)."""
    sql = ("SELECT trace_id, root_name, root_service, span_count, error_count, start_ns, "
           "end_ns FROM traces t WHERE start_ns >= ? AND start_ns < ?")
    params: list = [query.since_ns, query.until_ns or _NO_END]
    if query.errors_only:
        sql += " AND error_count > 0"
    if not query.internal:
        sql += f" AND NOT {INTERNAL_ROOT_SQL}(root_name)"
    if query.service:
        sql += (" AND EXISTS (SELECT 1 FROM trace_services ts WHERE ts.trace_id = t.trace_id"
                " AND ts.service_name = ?)")
        params.append(query.service)
    for tag, value in query.tag_filters():
        sql += " AND trace_id IN (SELECT trace_id FROM span_tags WHERE tag = ? AND value = ?)"
        params += [tag, value]
    sql += " ORDER BY start_ns DESC LIMIT ?"
    params.append(query.limit)
    rows = db.execute(sql, params).fetchall()
    services = services_of(db, [row[0] for row in rows])
    return [
        TraceSummary(
            trace_id=row[0], root_name=row[1], root_service=row[2],
            services=services.get(row[0], ()), span_count=row[3], error_count=row[4],
            start_ns=row[5], end_ns=row[6],
        )
        for row in rows
    ]


def services_of(db: sqlite3.Connection, trace_ids: list[str]) -> dict[str, tuple[str, ...]]:
    if not trace_ids:
        return {}
    marks = ",".join("?" * len(trace_ids))
    found: dict[str, list[str]] = {}
    for trace_id, service_name in db.execute(
        f"SELECT trace_id, service_name FROM trace_services WHERE trace_id IN ({marks}) "
        "ORDER BY service_name",
        trace_ids,
    ):
        found.setdefault(trace_id, []).append(service_name)
    return {trace_id: tuple(names) for trace_id, names in found.items()}
