"""Follower: read a state, then follow a prefix's watch from that read's revision.

The one loop every config-center follower runs — the broker's topic table, the prefix mirror
(subscription groups) and the live settings of every service. After any fault — a compacted
start, a refused watch, an unreachable config center — it reads again and watches from the
new read's revision: a read covers whatever the gap held, so nothing is lost or replayed.
A stream that merely broke is resumed by the Watch itself, from its last revision.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

from tidemq.common.errors import TideMQError
from tidemq.common.kv import Event
from tidemq.common.logs import get_logger
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.watch import Watch, WatchCompacted

log = get_logger(__name__)

RETRY_MIN_S, RETRY_MAX_S = 0.2, 2.0
T = TypeVar("T")


class Follower:
    """`read()` loads the state and returns the revision it was read at; `on_event(event)`
    applies one change after it. Both run on the follower's thread."""

    def __init__(self, client: ConfigClient, prefix: str, *, read: Callable[[], int],
                 on_event: Callable[[Event], None], name: str,
                 retry_max_s: float = RETRY_MAX_S) -> None:
        self.prefix = prefix
        self._client = client
        self._read = read
        self._on_event = on_event
        self._retry_max_s = max(retry_max_s, RETRY_MIN_S)
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._watch: Watch | None = None
        self._thread: threading.Thread | None = None
        self._name = name

    def start(self, revision: int | None = None) -> Follower:
        """Follow in the background: from `revision` + 1 when the caller has just read at
        `revision`, else read first (retried until the config center answers)."""
        self._thread = threading.Thread(target=self._run, args=(revision,), daemon=True,
                                        name=self._name)
        self._thread.start()
        return self

    def close(self) -> None:
        with self._lock:  # never between _run's closed-check and its new watch
            self._closed.set()
            watch = self._watch
        if watch is not None:
            watch.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)

    def _run(self, revision: int | None) -> None:
        backoff = RETRY_MIN_S
        while not self._closed.is_set():
            try:
                if revision is None:
                    revision = self._read()
                    backoff = RETRY_MIN_S
                with self._lock:
                    if self._closed.is_set():
                        return
                    self._watch = self._client.watch(self.prefix, start_revision=revision + 1)
                for event in self._watch:
                    self._on_event(event)
                return  # closed
            except WatchCompacted as exc:  # away longer than the retained history: re-read
                log.warning("config watch fell behind retained history; re-reading",
                            follower=self._name, prefix=self.prefix,
                            compact_revision=exc.compact_revision)
            except TideMQError as exc:
                if self._closed.is_set():
                    return
                log.warning("config center unavailable; re-reading", follower=self._name,
                            prefix=self.prefix, error=str(exc), retry_in_s=backoff)
                self._closed.wait(backoff)
                backoff = min(backoff * 2, self._retry_max_s)
            finally:
                with self._lock:
                    watch, self._watch = self._watch, None
                if watch is not None:
                    watch.close()
            revision = None


class TableFollower(Generic[T]):
    """Calls `on_table(table)` with the table a prefix's keys make, now and on every change.

    It re-reads the whole prefix on any change (a few hundred small keys) and hands over the
    table in one call, so its user always sees one consistent table and a change applies
    without a restart. `read_table(client)` returns (table, entries it skipped and why, the
    revision read at); `summary(table)` the counts the load is logged with."""

    def __init__(self, config_center: str | ConfigClient, prefix: str, *,
                 read_table: Callable[[ConfigClient], tuple[T, list[str], int]],
                 on_table: Callable[[T], None], what: str,
                 summary: Callable[[T], dict[str, int]]) -> None:
        self._client = (config_center if isinstance(config_center, ConfigClient)
                        else ConfigClient(config_center))
        self._read_table = read_table
        self._on_table = on_table
        self._what = what
        self._summary = summary
        self._follower = Follower(self._client, prefix, read=self._read,
                                  on_event=self._on_event, name=f"{what.lower()}-follower")

    def start(self) -> TableFollower[T]:
        self._follower.start()
        return self

    def close(self) -> None:
        self._follower.close()

    def _read(self) -> int:
        table, problems, revision = self._read_table(self._client)
        for problem in problems:
            log.warning(f"{self._what} entry skipped", problem=problem)
        self._on_table(table)
        # pid: a gateway's workers each follow (and log) on their own
        log.info(f"{self._what} loaded", **self._summary(table), revision=revision,
                 pid=os.getpid())
        return revision

    def _on_event(self, event: Event) -> None:
        try:
            self._read()
        except TideMQError as exc:  # the next change (or the follower's retry) re-reads
            log.warning(f"cannot re-read the {self._what}", error=str(exc),
                        revision=event.revision)
