"""PrefixMirror: a local, always-current copy of every key under a prefix.

What a broker uses for subscription-group definitions (`/tidemq/groups/`): it lists the
prefix, reports every existing key to `on_put`, then follows a watch from the listing's
revision (a `Follower`), reporting each change once and in order. If the watch's start was
compacted (the process was away longer than the retained history), it re-lists and
reconciles — reporting what appeared, changed or vanished meanwhile — instead of failing.

>>> mirror = PrefixMirror(client, "/tidemq/groups/",
...                      on_put=lambda kv, prev: table.put(kv.json()),
...                      on_delete=lambda key, prev: table.remove(key))
>>> mirror.start()
>>> sorted(mirror.snapshot())
['/tidemq/groups/billing']
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from tidemq.common.kv import Event, KeyValue
from tidemq.common.logs import get_logger
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.follow import Follower

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
        self._follower = Follower(client, prefix, read=self.sync, on_event=self._apply_event,
                                  name=f"mirror{prefix}")
        self._synced = False

    def sync(self) -> int:
        """List the prefix and reconcile the local copy with it (callbacks for differences);
        the revision of the listing."""
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
        return listing.revision

    def start(self) -> PrefixMirror:
        """Sync (unless already synced) and follow changes on a background thread."""
        if not self._synced:
            self.sync()
        self._follower.start(self.revision)
        return self

    def close(self) -> None:
        self._follower.close()

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

    def _apply_event(self, event: Event) -> None:
        if event.type == "PUT":
            self._apply_put(event.kv, self.get(event.kv.key))
        elif (previous := self.get(event.kv.key)) is not None:
            self._apply_delete(event.kv.key, previous)
        self._advance(event.revision)

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
