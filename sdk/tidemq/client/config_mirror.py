"""PrefixMirror: a local, always-current copy of every key under a prefix.

What a broker uses for topic and subscription-group definitions (`/tidemq/topics/`,
`/tidemq/groups/`): it lists the prefix, reports every existing key to `on_put`, then follows
a watch from the listing's revision, reporting each change once and in order. If the watch's
start was compacted (the process was away longer than the retained history), it re-lists and
reconciles — reporting what appeared, changed or vanished meanwhile — instead of failing.

>>> mirror = PrefixMirror(client, "/tidemq/topics/",
...                      on_put=lambda kv, prev: broker.ensure_topic(kv.json()),
...                      on_delete=lambda key, prev: broker.drop_topic(prev.json()["name"]))
>>> mirror.start()
>>> sorted(mirror.snapshot())
['/tidemq/topics/orders']
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tidemq.client.config import ConfigClient
from tidemq.client.config_watch import KeyValue, Watch, WatchCompacted
from tidemq.common.errors import TideMQError
from tidemq.common.logs import get_logger

log = get_logger(__name__)

OnPut = Callable[[KeyValue, KeyValue | None], None]  # (new, previous or None)
OnDelete = Callable[[str, KeyValue], None]  # (key, previous)


class PrefixMirror:
    def __init__(self, client: ConfigClient, prefix: str, *, on_put: OnPut | None = None,
                 on_delete: OnDelete | None = None) -> None:
        self.prefix = prefix
        self.revision = 0  # every change up to this revision has been applied
        self._client = client
        self._on_put = on_put
        self._on_delete = on_delete
        self._kvs: dict[str, KeyValue] = {}
        self._lock = threading.Condition()
        self._closed = threading.Event()
        self._watch: Watch | None = None
        self._thread: threading.Thread | None = None
        self._synced = False

    def sync(self) -> None:
        """List the prefix and reconcile the local copy with it (callbacks for differences)."""
        listing = self._client.range(self.prefix)
        fresh = {kv.key: kv for kv in listing.kvs}
        for key, kv in fresh.items():
            previous = self._kvs.get(key)
            if previous is None or previous.mod_revision != kv.mod_revision:
                self._apply_put(kv, previous)
        for key in [key for key in self._kvs if key not in fresh]:
            self._apply_delete(key, self._kvs[key])
        self._advance(listing.revision)
        self._synced = True

    def start(self) -> PrefixMirror:
        """Sync (unless already synced) and follow changes on a background thread."""
        if not self._synced:
            self.sync()
        self._thread = threading.Thread(target=self._follow, daemon=True,
                                        name=f"mirror{self.prefix}")
        self._thread.start()
        return self

    def close(self) -> None:
        with self._lock:  # never between _follow's closed-check and its new watch
            self._closed.set()
            watch = self._watch
        if watch is not None:
            watch.close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> PrefixMirror:
        return self.start()

    def __exit__(self, *_: object) -> None:
        self.close()

    def get(self, key: str) -> KeyValue | None:
        with self._lock:
            return self._kvs.get(key)

    def snapshot(self) -> dict[str, KeyValue]:
        with self._lock:
            return dict(self._kvs)

    def wait_for_revision(self, revision: int, timeout: float) -> bool:
        """True once every change up to `revision` has been applied (e.g. after a put)."""
        with self._lock:
            return self._lock.wait_for(lambda: self.revision >= revision, timeout)

    def _follow(self) -> None:
        while True:
            with self._lock:
                if self._closed.is_set():
                    return
                self._watch = self._client.watch(self.prefix, start_revision=self.revision + 1)
            try:
                for event in self._watch:
                    if event.type == "PUT":
                        self._apply_put(event.kv, self.get(event.kv.key))
                    elif (previous := self.get(event.kv.key)) is not None:
                        self._apply_delete(event.kv.key, previous)
                    self._advance(event.revision)
                return  # closed
            except WatchCompacted as exc:
                log.warning("mirror fell behind retained history; re-listing",
                            prefix=self.prefix, compact_revision=exc.compact_revision)
            except TideMQError as exc:
                log.error("mirror watch failed; re-listing", prefix=self.prefix, error=str(exc))
            finally:
                self._watch.close()
            if self._closed.is_set():
                return
            try:
                self.sync()
            except TideMQError as exc:
                log.error("mirror re-list failed; retrying", prefix=self.prefix, error=str(exc))
                self._closed.wait(1.0)

    def _advance(self, revision: int) -> None:
        with self._lock:
            self.revision = max(self.revision, revision)
            self._lock.notify_all()

    def _apply_put(self, kv: KeyValue, previous: KeyValue | None) -> None:
        with self._lock:
            self._kvs[kv.key] = kv
        self._callback(self._on_put, kv, previous)

    def _apply_delete(self, key: str, previous: KeyValue) -> None:
        with self._lock:
            self._kvs.pop(key, None)
        self._callback(self._on_delete, key, previous)

    def _callback(self, callback: Callable | None, *args: object) -> None:
        if callback is None:
            return
        try:
            callback(*args)
        except Exception:  # one bad definition must not stop the mirror
            log.exception("mirror callback failed", prefix=self.prefix)
