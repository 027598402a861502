"""The chaos run's config-center load, through both config centers while the store is faulted:

- `KeyWriters`: several threads, each creating distinct keys (`/chaos/keys/w<i>/<seq>`) with
  a create-only put; every create the config center acknowledged is recorded
  (verify.KeyAck) and must be present afterwards.
- `Register`: threads contending on one key by compare-and-set, each value naming the
  revision it compared against (verify.register_value): the store's history of the key must
  be one unbroken chain holding every acknowledged write.
- `Watchers`: watches of the whole `/chaos/` prefix (one starting on each config center),
  recording every event; checked against a fresh read of the store's history afterwards.

The prefix is outside /tidemq/: no service watches it. What the verdicts make of the records
is tests.chaos.verify's.
"""

from __future__ import annotations

import threading
import time

from tests.chaos.verify import CasAck, KeyAck, register_value

PREFIX = "/chaos/"
KEYS_PREFIX = PREFIX + "keys/"
REGISTER_KEY = PREFIX + "register"
KEY_WRITERS = 3
REGISTER_WRITERS = 2
WATCHERS = 2
PACE_S = 0.05   # between one writer's calls: ~20 calls/s each, a load leases share the store with


def _client(addrs: str, rotate: int = 0, timeout: float = 2.0):
    from tidemq.configclient.client import ConfigClient

    order = addrs.split(",")
    order = order[rotate % len(order):] + order[:rotate % len(order)]
    return ConfigClient(",".join(order), timeout=timeout)


class _Threads:
    def __init__(self, name: str, count: int) -> None:
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._run, args=(i,), name=f"chaos-{name}-{i}")
                         for i in range(count)]

    def start(self):
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _run(self, index: int) -> None:
        raise NotImplementedError


class KeyWriters(_Threads):
    """Each thread creates `/chaos/keys/w<i>/<seq>` = "<i>:<seq>" (expected revision 0: a
    create, so the client may repeat it on the other config center after an error). A create
    answered succeeded=false was applied by an earlier attempt whose reply was lost: neither
    counted as acknowledged nor retried. Every thread moves on to the next key either way."""

    def __init__(self, config_addrs: str, count: int = KEY_WRITERS) -> None:
        super().__init__("key-writer", count)
        self.clients = [_client(config_addrs, i) for i in range(count)]
        self.acks: list[KeyAck] = []
        self.ack_times: list[float] = []
        self.failed_calls = 0
        self.applied_unacknowledged = 0
        self.written = [0] * count   # keys each writer tried
        self._lock = threading.Lock()

    def _run(self, index: int) -> None:
        from tidemq.common.errors import TideMQError

        client, sequence = self.clients[index], 0
        while not self._stop.is_set():
            key, value = f"{KEYS_PREFIX}w{index}/{sequence:09d}", f"{index}:{sequence}".encode()
            self.written[index] = sequence = sequence + 1
            try:
                result = client.put(key, value, expected_revision=0)
            except TideMQError:
                with self._lock:
                    self.failed_calls += 1
                self._stop.wait(PACE_S)
                continue
            with self._lock:
                if result.succeeded:
                    self.acks.append(KeyAck(index, key, value, result.revision))
                    self.ack_times.append(time.monotonic())
                else:
                    self.applied_unacknowledged += 1
            self._stop.wait(PACE_S)

    def final(self, client) -> dict[str, tuple[bytes, int]]:
        """Every key under the writers' prefix now: key -> (value, mod revision). Read in
        ranges of at most CHUNK keys (a long run's keys are more than one reply may carry)."""
        found = {}
        for index, written in enumerate(self.written):
            for chunk in range(written // self.CHUNK + 1):
                prefix = f"{KEYS_PREFIX}w{index}/{chunk:0{9 - self.CHUNK_DIGITS}d}"
                found.update((kv.key, (bytes(kv.value), kv.mod_revision))
                             for kv in client.range(prefix).kvs)
        return found

    CHUNK_DIGITS = 4   # a range per 10 000 keys of one writer (the last 4 digits of 9)
    CHUNK = 10 ** CHUNK_DIGITS


class Register(_Threads):
    """Threads contending on REGISTER_KEY: read it, put register_value(i, n, mod revision
    read) with that revision expected. On a lost compare or an error: read again. A read
    showing a mod revision below one already acknowledged is a stale read (counted)."""

    def __init__(self, config_addrs: str, count: int = REGISTER_WRITERS) -> None:
        super().__init__("register", count)
        self.clients = [_client(config_addrs, i) for i in range(count)]
        self.acks: list[CasAck] = []
        self.acked_revision = 0   # the highest acknowledged so far
        self.stale_reads = 0
        self.failed_calls = 0
        self._lock = threading.Lock()

    def _run(self, index: int) -> None:
        from tidemq.common.errors import TideMQError

        client, sequence = self.clients[index], 0
        while not self._stop.is_set():
            floor = self.acked_revision   # acknowledged before this read began
            try:
                kv = client.get(REGISTER_KEY)
                base = kv.mod_revision if kv else 0
                if base < floor:
                    with self._lock:
                        self.stale_reads += 1
                value = register_value(index, sequence, base)
                sequence += 1
                result = client.put(REGISTER_KEY, value, expected_revision=base)
            except TideMQError:
                with self._lock:
                    self.failed_calls += 1
                self._stop.wait(PACE_S)
                continue
            if result.succeeded:
                with self._lock:
                    self.acks.append(CasAck(index, base, result.revision, value))
                    self.acked_revision = max(self.acked_revision, result.revision)
            self._stop.wait(PACE_S)

    @staticmethod
    def history(client, upto: int) -> list[tuple[int, str]]:
        """Every PUT of the register as (revision, value), oldest first."""
        return [(event.revision, bytes(event.kv.value).decode())
                for event in replay(client, REGISTER_KEY, 1, upto) if event.type == "PUT"]


class Watchers(_Threads):
    """Each thread watches PREFIX from `start_revision` through its own client (the first on
    the first config center, the next on the other) and records (revision, key) of every
    event, in the order handed over."""

    def __init__(self, config_addrs: str, start_revision: int, count: int = WATCHERS) -> None:
        super().__init__("watcher", count)
        self.start_revision = start_revision
        self.clients = [_client(config_addrs, i) for i in range(count)]
        self.seen: list[list[tuple[int, str]]] = [[] for _ in range(count)]
        self.errors: list[str] = []

    def _run(self, index: int) -> None:
        from tidemq.common.errors import TideMQError

        try:
            with self.clients[index].watch(PREFIX, start_revision=self.start_revision) as watch:
                while not self._stop.is_set():
                    event = watch.poll(0.2)
                    if event is not None:
                        self.seen[index].append((event.revision, event.kv.key))
        except TideMQError as exc:   # compacted or refused: the verdict fails on the gap
            self.errors.append(f"watcher {index}: {exc}")


def replay(client, prefix: str, start_revision: int, upto: int, timeout_s: float = 120) -> list:
    """Every change (config client Event) under `prefix` in [start_revision, upto], read from
    the store by a fresh watch: a stream, so a long run's history is no single reply. Ends at
    the first change past `upto` (a prefix still written to, such as the live keys' renewals,
    never goes quiet) or once the watch has covered `upto`."""
    changes = []
    deadline = time.monotonic() + timeout_s
    with client.watch(prefix, start_revision=start_revision) as watch:
        while time.monotonic() < deadline:
            event = watch.poll(0.5)
            if event is not None:
                if event.revision > upto:   # handed in revision order: all before it are in
                    return changes
                changes.append(event)
            elif watch.revision is not None and watch.revision >= upto:
                # Events are queued before the revision they cover is: drain them.
                while (event := watch.poll(0.05)) is not None:
                    if event.revision <= upto:
                        changes.append(event)
                return changes
    raise TimeoutError(f"re-reading {prefix} up to revision {upto} took over {timeout_s} s")
