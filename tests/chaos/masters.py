"""The chaos group's replication keys as they change: who is master, which replicas are live.

`ReplicationWatch` watches the group key and the group's live keys from the store's first
revision, stamping each change with the monotonic time it was handed over: the clock of
`verify.masterless_spans` (how long the group had no master, per fault kind). The elections'
verdict reads the same keys again from the store after the run (`history`), so a change the
watch was handed late (it resumes after a config center dies) only blurs the clock, never the
verdict.
"""

from __future__ import annotations

import json
import threading
import time

from tests.chaos.config_load import replay
from tests.chaos.verify import ReplicationEvent

ROOT = "/tidemq/replication/"


def group_key(group: str) -> str:
    return f"{ROOT}groups/{group}"


def live_prefix(group: str) -> str:
    return f"{ROOT}live/{group}/"


def _event(change, at: float = 0.0) -> ReplicationEvent:
    value = json.loads(change.kv.value) if change.type == "PUT" else None
    return ReplicationEvent(change.revision, change.kv.key, value, at)


def _ours(key: str, group: str) -> bool:
    return key == group_key(group) or key.startswith(live_prefix(group))


def history(client, group: str, upto: int) -> list[ReplicationEvent]:
    """Every change of the group's key and live keys up to `upto`, read from the store."""
    return [_event(change) for change in replay(client, ROOT, 1, upto)
            if _ours(change.kv.key, group)]


class ReplicationWatch:
    def __init__(self, config_addrs: str, group: str) -> None:
        from tidemq.configclient.client import ConfigClient

        self.group = group
        self.client = ConfigClient(config_addrs, timeout=2.0)
        self.events: list[ReplicationEvent] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="chaos-replication-watch")

    def start(self) -> ReplicationWatch:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)
        self.client.close()

    def _run(self) -> None:
        from tidemq.common.errors import TideMQError

        try:
            with self.client.watch(ROOT, start_revision=1) as watch:
                while not self._stop.is_set():
                    change = watch.poll(0.2)
                    if change is not None and _ours(change.kv.key, self.group):
                        self.events.append(_event(change, time.monotonic()))
        except TideMQError as exc:   # the masterless figures then fail: nothing judged
            self.errors.append(f"replication watch: {exc}")
