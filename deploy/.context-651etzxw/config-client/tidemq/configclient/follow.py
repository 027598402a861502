"""Follower: read a state, then follow a prefix's watch from that read's revision.

The one loop every config-center follower runs — the broker's topic table, the prefix mirror
(subscription groups) and the live settings of every service. After any fault — a compacted
start, a refused watch, an unreachable config center — it reads again and watches from the
new read's revision: a read covers whatever the gap held, so nothing is lost or replayed.
A stream that merely broke is resumed by the Watch itself, from its last revision.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tidemq.common.errors import TideMQError
from tidemq.common.kv import Event
from tidemq.common.logs import get_logger
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.watch import Watch, WatchCompacted

log = get_logger(__name__)

RETRY_MIN_S, RETRY_MAX_S = 0.2, 2.0


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
