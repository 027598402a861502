"""Two config centers on a replicated Redis under Sentinel, through real failovers.

A writer does compare-and-set increments of one key through both instances while the Redis
master is SIGKILLed or SIGSTOPped (longer than a lease's TTL); a watcher follows the key. No
acknowledged write is lost, acknowledged revisions only grow, the watcher sees every
acknowledged value in order and nothing that a failover took back, a kept-alive lease
survives, and the old master comes back as a replica — also when it is restarted at once,
before the Sentinels noticed its crash (deploy/redis/tidemq-redis makes it wait for them). Write outages are printed, not asserted.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field

import pytest
from tidemq.common import errors
from tidemq.common.kv import EventType
from tidemq.configclient.client import ConfigClient

from tests.support.processes import wait_until

pytestmark = pytest.mark.slow

KEY = "/tidemq/test/counter"
LEASE_TTL_S = 4   # the pause below is held longer than this


@pytest.fixture
def centers(redis_tier, services):
    """Two config-center instances on the tier's Sentinel URL."""
    return [services("tidemq.configcenter", ["--redis-url", redis_tier.url(),
                                             "--shutdown-grace-s", "1"])
            for _ in range(2)]


@dataclass
class CasWriter:
    """Increments KEY with compare-and-set until stopped; remembers every acknowledged write
    (value, revision) in order and the longest gap between two acknowledgements."""

    client: ConfigClient
    acked: list[tuple[int, int]] = field(default_factory=list)
    failures: int = 0
    longest_gap_s: float = 0.0
    _stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        last_ack = time.monotonic()
        while not self._stop.is_set():
            try:
                current = self.client.get(KEY)
                value = int(current.value) + 1 if current else 1
                result = self.client.put(KEY, str(value).encode(),
                                         expected_revision=current.mod_revision if current else 0)
            except errors.TideMQError:
                self.failures += 1
                self._stop.wait(0.05)
                continue
            if result.succeeded:
                now = time.monotonic()
                self.longest_gap_s = max(self.longest_gap_s, now - last_ack)
                last_ack = now
                self.acked.append((value, result.revision))

    def __enter__(self) -> CasWriter:
        self._thread = threading.Thread(target=self.run, name="cas-writer", daemon=True)
        self._thread.start()
        wait_until(lambda: len(self.acked) >= 20, 30, message="the first acknowledged writes")
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def wait_for_more(self, count: int = 20, timeout: float = 60.0) -> None:
        target = len(self.acked) + count
        wait_until(lambda: len(self.acked) >= target, timeout,
                   message=f"{count} more acknowledged writes")


class Watcher:
    """Every value of KEY a watch delivers, in delivery order."""

    def __init__(self, client: ConfigClient, start_revision: int) -> None:
        self.values: list[int] = []
        self._watch = client.watch(KEY, start_revision=start_revision)
        self._thread = threading.Thread(target=self._run, name="watcher", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for event in self._watch:
            if event.type is EventType.PUT and event.kv.key == KEY:
                self.values.append(int(event.kv.value))

    def close(self) -> None:
        self._watch.close()
        self._thread.join(10)


def _check(writer: CasWriter, watcher: Watcher, client: ConfigClient) -> None:
    values = [value for value, _ in writer.acked]
    revisions = [revision for _, revision in writer.acked]
    assert revisions == sorted(set(revisions)), "acknowledged revisions went back or repeated"
    final = int(client.get(KEY).value)
    assert final >= values[-1], f"the key holds {final}, below acknowledged {values[-1]}"
    wait_until(lambda: watcher.values and watcher.values[-1] >= values[-1], 30,
               message="the watcher to reach the last acknowledged value")
    seen = watcher.values
    assert seen == sorted(set(seen)), f"the watch went back or repeated: {seen[-30:]}"
    missing = set(values) - set(seen)
    assert not missing, f"the watch never delivered acknowledged values {sorted(missing)[:10]}"
    # Every value is one more than the last (CAS increments): a value the watch delivered
    # and a failover then took back would reappear as a second, different write of it.
    assert seen == list(range(seen[0], seen[0] + len(seen))), "a delivered value was taken back"


@pytest.mark.parametrize("fault", ["kill", "pause", "crash-restart"])
def test_no_acknowledged_config_write_is_lost_when_the_redis_master_fails(
        redis_tier, centers, fault, capsys):
    tier = redis_tier
    addrs = ",".join(center.addr for center in centers)
    with ConfigClient(addrs, timeout=3.0) as client:
        client.put(KEY, b"0")
        watcher = Watcher(client, client.get(KEY).mod_revision)
        lease = client.lease(LEASE_TTL_S)
        client.put("/tidemq/test/ephemeral", b"alive", lease=lease.id)
        try:
            with CasWriter(client) as writer:
                old = tier.master()
                if fault == "kill":
                    tier.kill(old)
                    new = tier.wait_for_new_master(old, timeout=30)
                    writer.wait_for_more()
                    tier.restart(old)
                elif fault == "crash-restart":
                    # back before the Sentinels noticed (a supervisor restarts it at once):
                    # the launcher waits for their failover and starts it as a replica, so
                    # it never takes writes that the failover would then discard
                    tier.kill(old)
                    tier.restart(old)
                    new = tier.wait_for_new_master(old, timeout=30)
                else:
                    tier.pause(old)
                    new = tier.wait_for_new_master(old, timeout=30)
                    writer.wait_for_more()
                    time.sleep(LEASE_TTL_S + 1)   # the fault held past the lease's TTL
                    tier.resume(old)
                writer.wait_for_more()
                assert tier.wait_healthy(timeout=60) is new, "the old master took over again"
                assert tier.role(old).get("role") == "slave", "the old master is not a replica"
                writer.wait_for_more()
            _check(writer, watcher, client)
            assert not lease.expired.is_set(), "a kept-alive lease expired across the failover"
            assert client.get("/tidemq/test/ephemeral") is not None
            with capsys.disabled():
                print(f"\nredis master {fault}: longest config write outage "
                      f"{writer.longest_gap_s:.2f} s, {len(writer.acked)} acknowledged writes, "
                      f"{writer.failures} failed attempts")
        finally:
            watcher.close()
            lease.revoke()


def test_a_killed_config_center_leaves_clients_on_the_other(redis_tier, centers):
    addrs = ",".join(center.addr for center in centers)
    with ConfigClient(addrs, timeout=3.0) as client:
        client.put(KEY, b"0")
        watcher = Watcher(client, client.get(KEY).mod_revision)
        try:
            with CasWriter(client) as writer:
                centers[0].kill()
                writer.wait_for_more()
                centers[0].restart()
                centers[1].kill()
                writer.wait_for_more()
            _check(writer, watcher, client)
        finally:
            watcher.close()


def test_a_master_without_replicas_refuses_writes_with_a_sentence(redis_tier, centers):
    tier = redis_tier
    with ConfigClient(centers[0].addr, timeout=3.0) as client:
        client.put(KEY, b"1")
        for node in tier.nodes:
            if node is not tier.master():
                tier.kill(node)

        def refused() -> str:
            try:
                client.put(KEY, b"2")
            except errors.ServiceUnavailable as exc:
                return exc.message
            return ""

        message = wait_until(refused, 30, interval=0.2, message="writes to be refused")
        assert "replica" in message, message


def test_a_sentinel_that_names_no_master_is_reported(redis_tier, services):
    url = redis_tier.url().replace("/tidemq/", "/no-such-master/")
    center = services("tidemq.configcenter", ["--redis-url", url, "--shutdown-grace-s", "1"])
    with ConfigClient(center.addr, timeout=3.0) as client, \
            pytest.raises(errors.ServiceUnavailable) as refused:
        client.get(KEY)
    assert "no Sentinel names a master for 'no-such-master'" in refused.value.message
