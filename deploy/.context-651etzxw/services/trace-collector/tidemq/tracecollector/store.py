"""SQLite span store: spans plus a per-trace summary table kept in step with them.

Why this shape:
- WAL mode so the dashboard's readers never block the writer (and the reverse).
- `spans.seq` is an insertion-ordered rowid, so retention by count and by age is a single
  "delete everything up to seq N" walk from the oldest row, cheap however large the table.
- `traces` is recomputed (by SQL, from `spans`) for exactly the traces a batch or a retention
  pass touched, so duplicates re-sent by a retrying exporter (ignored by the unique index) and
  partially expired traces never leave a stale span count behind.
"""

from __future__ import annotations

import contextlib
import json
import queue
import sqlite3
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from tidemq.tracecollector import search
from tidemq.tracecollector.index import span_links, span_tags
from tidemq.tracecollector.model import SpanRecord, TraceSummary

DB_FILENAME = "spans.sqlite3"
READER_POOL_SIZE = 4
_NS_PER_HOUR = 3600 * 1_000_000_000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS spans (
    seq INTEGER PRIMARY KEY,
    trace_id TEXT NOT NULL,
    span_id TEXT NOT NULL,
    parent_span_id TEXT,
    name TEXT NOT NULL,
    service_name TEXT NOT NULL,
    kind TEXT NOT NULL,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    status_code TEXT NOT NULL,
    status_message TEXT NOT NULL,
    attributes TEXT NOT NULL,
    events TEXT NOT NULL,
    links TEXT NOT NULL,
    received_ns INTEGER NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS spans_by_trace ON spans(trace_id, span_id);
CREATE TABLE IF NOT EXISTS traces (
    trace_id TEXT PRIMARY KEY,
    start_ns INTEGER NOT NULL,
    end_ns INTEGER NOT NULL,
    span_count INTEGER NOT NULL,
    error_count INTEGER NOT NULL,
    root_name TEXT,
    root_service TEXT
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS traces_by_start ON traces(start_ns);
CREATE TABLE IF NOT EXISTS trace_services (
    trace_id TEXT NOT NULL,
    service_name TEXT NOT NULL,
    PRIMARY KEY (trace_id, service_name)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS trace_services_by_service ON trace_services(service_name);
CREATE TABLE IF NOT EXISTS span_tags (
    tag TEXT NOT NULL,
    value TEXT NOT NULL,
    seq INTEGER NOT NULL,
    trace_id TEXT NOT NULL,
    PRIMARY KEY (tag, value, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS span_tags_by_seq ON span_tags(seq);
CREATE TABLE IF NOT EXISTS span_links (
    linked_trace_id TEXT NOT NULL,
    linked_span_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    trace_id TEXT NOT NULL,
    PRIMARY KEY (linked_trace_id, linked_span_id, seq)
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS span_links_by_seq ON span_links(seq);
"""

# A batch's spans get their seq from the writer, so index rows name their span by it; the
# rowid check (one integer-key lookup) skips a duplicate span the insert above ignored.
_INSERT_TAG = """
INSERT OR IGNORE INTO span_tags (tag, value, seq, trace_id)
SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM spans WHERE seq = ? AND span_id = ?)
"""
# The usual batch has no duplicate: its index rows go in without the check.
_INSERT_TAG_UNCHECKED = """
INSERT OR IGNORE INTO span_tags (tag, value, seq, trace_id) VALUES (?, ?, ?, ?)
"""
_INSERT_LINK_UNCHECKED = """
INSERT OR IGNORE INTO span_links (linked_trace_id, linked_span_id, seq, trace_id)
VALUES (?, ?, ?, ?)
"""
_INSERT_LINK = """
INSERT OR IGNORE INTO span_links (linked_trace_id, linked_span_id, seq, trace_id)
SELECT ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM spans WHERE seq = ? AND span_id = ?)
"""

_INSERT_SPAN = """
INSERT OR IGNORE INTO spans (trace_id, span_id, parent_span_id, name, service_name, kind,
    start_ns, end_ns, status_code, status_message, attributes, events, links, received_ns, seq)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""

# Recompute the summary of every trace listed in temp.touched from its surviving spans.
_REFRESH_TRACES = """
INSERT OR REPLACE INTO traces (trace_id, start_ns, end_ns, span_count, error_count,
    root_name, root_service)
SELECT s.trace_id, min(s.start_ns), max(s.end_ns), count(*),
    sum(s.status_code = 'ERROR'),
    (SELECT r.name FROM spans r WHERE r.trace_id = s.trace_id AND r.parent_span_id IS NULL
        ORDER BY r.start_ns LIMIT 1),
    (SELECT r.service_name FROM spans r WHERE r.trace_id = s.trace_id
        AND r.parent_span_id IS NULL ORDER BY r.start_ns LIMIT 1)
FROM spans s WHERE s.trace_id IN (SELECT trace_id FROM temp.touched)
GROUP BY s.trace_id
"""

SPAN_COLUMNS = (
    "trace_id, span_id, parent_span_id, name, service_name, kind, start_ns, end_ns, "
    "status_code, status_message, attributes, events, links"
)


@dataclass(frozen=True, slots=True)
class RetentionPolicy:
    """Upper bounds on what the store keeps; 0 disables a bound."""

    max_spans: int = 1_000_000
    max_age_hours: float = 0.0
    max_bytes: int = 0


@dataclass(frozen=True, slots=True)
class StoreStats:
    span_count: int
    trace_count: int
    size_bytes: int = 0  # pages in use (a deleted span's pages are reused, the file stays)
    file_bytes: int = 0  # the database file plus its write-ahead log on disk


def _used_bytes(db: sqlite3.Connection) -> int:
    """Bytes of the pages holding data (both PRAGMAs read the file header: cheap)."""
    pages = db.execute("PRAGMA page_count").fetchone()[0]
    free = db.execute("PRAGMA freelist_count").fetchone()[0]
    size = db.execute("PRAGMA page_size").fetchone()[0]
    return (pages - free) * size


def _wal_path(path: Path) -> Path:
    return path.with_name(path.name + "-wal")


def _span_row(span: SpanRecord, received_ns: int, seq: int) -> tuple:
    return (
        span.trace_id, span.span_id, span.parent_span_id, span.name, span.service_name,
        span.kind, span.start_ns, span.end_ns, span.status_code, span.status_message,
        json.dumps(span.attributes, default=str), json.dumps(span.events, default=str),
        json.dumps(span.links, default=str), received_ns, seq,
    )


def span_from_row(row: tuple) -> SpanRecord:
    return SpanRecord(
        trace_id=row[0], span_id=row[1], parent_span_id=row[2], name=row[3],
        service_name=row[4], kind=row[5], start_ns=row[6], end_ns=row[7],
        status_code=row[8], status_message=row[9], attributes=json.loads(row[10]),
        events=json.loads(row[11]), links=json.loads(row[12]),
    )


class SpanStore:
    """Thread-safe: one writer connection behind a lock, a small pool of reader connections."""

    def __init__(self, data_dir: Path | str, retention: RetentionPolicy | None = None) -> None:
        directory = Path(data_dir)
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / DB_FILENAME
        self.retention = retention or RetentionPolicy()
        self._write_lock = threading.Lock()
        self._writer = self._connect()
        self._writer.executescript(_SCHEMA)
        self._writer.execute("CREATE TEMP TABLE touched (trace_id TEXT PRIMARY KEY)")
        self._readers: queue.LifoQueue[sqlite3.Connection] = queue.LifoQueue()
        self._all_readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        connection = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
        connection.execute("PRAGMA journal_mode=WAL")
        # NORMAL in WAL mode: a power cut may lose the last commits, never corrupt the file;
        # traces are diagnostics, so one fsync per checkpoint rather than per batch.
        connection.execute("PRAGMA synchronous=NORMAL")
        connection.execute("PRAGMA busy_timeout=5000")
        connection.create_function(search.INTERNAL_ROOT_SQL, 1, search.internal_root,
                                   deterministic=True)
        return connection

    @contextlib.contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        try:
            connection = self._readers.get_nowait()
        except queue.Empty:
            connection = self._connect()
            with self._readers_lock:
                self._all_readers.append(connection)
        try:
            yield connection
        finally:
            if self._readers.qsize() < READER_POOL_SIZE:
                self._readers.put(connection)
            else:
                with self._readers_lock:
                    self._all_readers.remove(connection)
                connection.close()

    # -- writing ---------------------------------------------------------------------------

    def insert(self, spans: Iterable[SpanRecord], now_ns: int | None = None) -> int:
        """Insert a batch in one transaction, apply retention, return spans newly stored."""
        received_ns = now_ns if now_ns is not None else time.time_ns()
        batch = list(spans)
        if not batch:
            return 0
        with self._write_lock:
            db = self._writer
            db.execute("BEGIN IMMEDIATE")
            try:
                first = (db.execute("SELECT max(seq) FROM spans").fetchone()[0] or 0) + 1
                rows = [_span_row(span, received_ns, first + n) for n, span in enumerate(batch)]
                before = db.total_changes
                db.executemany(_INSERT_SPAN, rows)
                stored = db.total_changes - before
                if stored:
                    self._index(db, batch, first, checked=stored != len(batch))
                db.executemany(
                    "INSERT OR IGNORE INTO temp.touched VALUES (?)", {(r[0],) for r in rows}
                )
                self._refresh_touched(db)
                self._apply_retention(db, received_ns)
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return stored

    @staticmethod
    def _index(db: sqlite3.Connection, batch: list[SpanRecord], first: int, *,
               checked: bool) -> None:
        """Index rows of the batch's spans; `checked`: some were duplicates, index only the
        spans this batch stored."""
        tags = [(tag, value, seq, span.trace_id, seq, span.span_id)
                for seq, span in enumerate(batch, first) for tag, value in span_tags(span)]
        links = [(trace_id, span_id, seq, span.trace_id, seq, span.span_id)
                 for seq, span in enumerate(batch, first) if span.links
                 for trace_id, span_id in span_links(span)]
        if not checked:
            tags = [row[:4] for row in tags]
            links = [row[:4] for row in links]
        if tags:
            db.executemany(_INSERT_TAG if checked else _INSERT_TAG_UNCHECKED, tags)
        if links:
            db.executemany(_INSERT_LINK if checked else _INSERT_LINK_UNCHECKED, links)

    def _refresh_touched(self, db: sqlite3.Connection) -> None:
        db.execute(
            "DELETE FROM traces WHERE trace_id IN (SELECT trace_id FROM temp.touched)"
        )
        db.execute(
            "DELETE FROM trace_services WHERE trace_id IN (SELECT trace_id FROM temp.touched)"
        )
        db.execute(_REFRESH_TRACES)
        db.execute(
            "INSERT OR IGNORE INTO trace_services SELECT DISTINCT trace_id, service_name "
            "FROM spans WHERE trace_id IN (SELECT trace_id FROM temp.touched)"
        )
        db.execute("DELETE FROM temp.touched")

    def _retention_cutoff(self, db: sqlite3.Connection, now_ns: int) -> int | None:
        """Highest seq that must go, or None when everything is within bounds."""
        oldest, newest = db.execute("SELECT min(seq), max(seq) FROM spans").fetchone()
        if oldest is None:
            return None
        cutoff = oldest - 1
        if self.retention.max_spans > 0:
            cutoff = max(cutoff, newest - self.retention.max_spans)
        if self.retention.max_age_hours > 0:
            horizon = now_ns - int(self.retention.max_age_hours * _NS_PER_HOUR)
            # Walks from the oldest row and stops at the first young one.
            first_young = db.execute(
                "SELECT seq FROM spans WHERE received_ns >= ? ORDER BY seq LIMIT 1", (horizon,)
            ).fetchone()
            cutoff = max(cutoff, newest if first_young is None else first_young[0] - 1)
        if self.retention.max_bytes > 0:
            cutoff = max(cutoff, self._size_cutoff(db, oldest, newest))
        return cutoff if cutoff >= oldest else None

    def _size_cutoff(self, db: sqlite3.Connection, oldest: int, newest: int) -> int:
        """Seq up to which the oldest spans must go for the pages in use to fit max_bytes:
        the excess divided by the average span's share of the pages, plus a tenth of the
        bound as slack so the next batches do not each delete a few rows."""
        used = _used_bytes(db)
        if used <= self.retention.max_bytes:
            return oldest - 1
        count = db.execute("SELECT count(*) FROM spans").fetchone()[0]
        per_span = used / max(1, count)
        excess = used - self.retention.max_bytes * 0.9
        return min(newest, oldest - 1 + max(1, int(excess / per_span)))

    def _apply_retention(self, db: sqlite3.Connection, now_ns: int) -> None:
        cutoff = self._retention_cutoff(db, now_ns)
        if cutoff is None:
            return
        db.execute(
            "INSERT OR IGNORE INTO temp.touched SELECT DISTINCT trace_id FROM spans "
            "WHERE seq <= ?",
            (cutoff,),
        )
        db.execute("DELETE FROM spans WHERE seq <= ?", (cutoff,))
        db.execute("DELETE FROM span_tags WHERE seq <= ?", (cutoff,))
        db.execute("DELETE FROM span_links WHERE seq <= ?", (cutoff,))
        self._refresh_touched(db)

    def enforce_retention(self, now_ns: int | None = None) -> None:
        """Apply retention without inserting (e.g. on a timer when no spans arrive)."""
        with self._write_lock:
            db = self._writer
            db.execute("BEGIN IMMEDIATE")
            try:
                self._apply_retention(db, now_ns if now_ns is not None else time.time_ns())
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    # -- reading ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A pooled read-only connection for the query modules (search, journey, map)."""
        with self._reader() as db:
            yield db

    def recent_traces(
        self, *, service: str | None = None, limit: int = 20, since_ns: int = 0
    ) -> list[TraceSummary]:
        """Traces newest first (by start), optionally only those a service took part in."""
        return self.search(search.TraceQuery(service=service, limit=limit, since_ns=since_ns))

    def search(self, trace_query: search.TraceQuery) -> list[TraceSummary]:
        with self._reader() as db:
            return search.find_traces(db, trace_query)

    def trace(self, trace_id: str) -> list[SpanRecord]:
        """All stored spans of one trace, in start order (empty if unknown or expired)."""
        with self._reader() as db:
            rows = db.execute(
                f"SELECT {SPAN_COLUMNS} FROM spans WHERE trace_id = ? ORDER BY start_ns, seq",
                (trace_id,),
            ).fetchall()
        return [span_from_row(row) for row in rows]

    def services(self) -> list[str]:
        with self._reader() as db:
            rows = db.execute(
                "SELECT DISTINCT service_name FROM trace_services ORDER BY service_name"
            ).fetchall()
        return [row[0] for row in rows]

    def stats(self) -> StoreStats:
        with self._reader() as db:
            spans = db.execute("SELECT count(*) FROM spans").fetchone()[0]
            traces = db.execute("SELECT count(*) FROM traces").fetchone()[0]
            used = _used_bytes(db)
        on_disk = sum(path.stat().st_size for path in (self.path, _wal_path(self.path))
                      if path.exists())
        return StoreStats(span_count=spans, trace_count=traces, size_bytes=used,
                          file_bytes=on_disk)

    def close(self) -> None:
        with self._write_lock:
            self._writer.close()
        with self._readers_lock:
            for connection in self._all_readers:
                connection.close()
            self._all_readers.clear()
