"""Faults: lease expiry, config-center restart, Redis restart (AOF) and Redis outage."""

from __future__ import annotations

import os
import signal
import time

import pytest
import redis
from tidemq.common import errors
from tidemq.configclient.client import ConfigClient

from tests.support.processes import dead_endpoint, free_port, wait_until


def test_a_lease_not_kept_alive_removes_its_keys_within_ttl_plus_one_second(client):
    ttl = 1
    with client.watch("/tidemq/brokers/") as watch:
        assert watch.wait_established(10)
        lease = client.lease(ttl, keepalive=False)
        granted = time.monotonic()  # the deadline was set on Redis before this moment
        put = client.put("/tidemq/brokers/b1", "alive", lease=lease.id)
        assert watch.poll(10).revision == put.revision
        # Acceptance bound, with the default reaper interval (0.2 s): TTL + 1 s after the grant.
        deletion = watch.poll(max(0.0, granted + ttl + 1.0 - time.monotonic()))
        assert deletion is not None, "no DELETE within TTL + 1 s"
        assert time.monotonic() - granted <= ttl + 1.0
    assert (deletion.type, deletion.kv.key) == ("DELETE", "/tidemq/brokers/b1")
    assert client.get("/tidemq/brokers/b1") is None
    assert client.lease_keepalive(lease.id) == 0


@pytest.mark.slow
def test_a_kept_alive_lease_survives_a_config_center_restart(config_center, client):
    ttl = 10  # a restart must fit in the TTL; on a loaded 2-core machine it can take 6 s
    lease = client.lease(ttl)
    client.put("/tidemq/brokers/b1", "alive", lease=lease.id)
    written_at = time.monotonic()
    config_center.stop()
    config_center.restart()
    renewals = lease.renewals
    wait_until(lambda: lease.renewals > renewals, timeout=ttl,
               message="a keep-alive through the restarted config center")
    with client.watch("/tidemq/brokers/") as watch:
        assert watch.wait_established(10)
        # Past the first deadline: only keep-alives through the restarted instance kept it.
        assert watch.poll(max(0.0, written_at + ttl + 1 - time.monotonic())) is None
    assert not lease.expired.is_set()
    assert client.get("/tidemq/brokers/b1").text == "alive"
    lease.revoke()
    assert client.get("/tidemq/brokers/b1") is None


def test_redis_restart_keeps_keys_and_revisions_and_watchers_resume(redis_server, client):
    for i in range(20):
        client.put(f"/r/{i}", str(i))
    before = client.range("/r/")
    watch = client.watch("/r/", start_revision=before.revision + 1)
    assert watch.wait_established(10)
    redis_server.stop()  # graceful: the append-only file is fsynced on shutdown
    redis_server.start()
    after = wait_until(lambda: _try(lambda: client.range("/r/")), timeout=20,
                       message="the config center to reach the restarted redis")
    assert after.kvs == before.kvs and after.revision == before.revision
    written = [client.put("/r/new", str(i)).revision for i in range(5)]
    assert written == list(range(before.revision + 1, before.revision + 6))
    assert [watch.poll(10).revision for _ in written] == written
    watch.close()


def test_redis_outage_answers_unavailable_within_the_deadline(redis_server, config_center):
    with ConfigClient(config_center.addr, timeout=3.0) as client:
        client.put("/k", "v")
        os.kill(redis_server.proc.pid, signal.SIGSTOP)  # a hung Redis: accepts, never answers
        try:
            started = time.monotonic()
            with pytest.raises(errors.ServiceUnavailable):
                client.get("/k")
            assert time.monotonic() - started < 3.0 + 0.5
        finally:
            os.kill(redis_server.proc.pid, signal.SIGCONT)
        redis_server.kill()  # a dead Redis: refused connections
        started = time.monotonic()
        with pytest.raises(errors.ServiceUnavailable):
            client.put("/k", "v2")
        assert time.monotonic() - started < 3.0 + 0.5  # within the call deadline, never a hang


def test_a_kept_alive_lease_survives_a_redis_hung_past_its_ttl(redis_server, config_center,
                                                                client):
    ttl = 2
    lease = client.lease(ttl)
    client.put("/hung/k", "v", lease=lease.id)
    os.kill(redis_server.proc.pid, signal.SIGSTOP)
    try:
        time.sleep(2 * ttl)   # the fault: hung twice the TTL, no keep-alive gets through
    finally:
        os.kill(redis_server.proc.pid, signal.SIGCONT)
    renewals = lease.renewals
    wait_until(lambda: lease.renewals > renewals or lease.expired.is_set(), timeout=20,
               message="a keep-alive once Redis answers again")
    assert not lease.expired.is_set(), "the hang counted against a kept-alive lease"
    assert client.get("/hung/k").text == "v"


def test_redis_answering_errors_stops_neither_watches_nor_lease_expiry(redis_server,
                                                                        config_center, client):
    """Redis answering an error to every command (NOPERM here: an ACL mistake; READONLY or MISCONF are the same
    kind of reply): calls answer UNAVAILABLE with Redis's words, and once Redis serves again the
    shared watch reader and the lease reaper are still at work."""
    admin = redis.Redis.from_url(redis_server.url)
    with client.watch("/e/") as watch:
        assert watch.wait_established(10)
        offset = config_center.log.stat().st_size
        admin.execute_command("ACL", "SETUSER", "default", "-@all", "+acl", "+ping")
        try:
            with pytest.raises(errors.ServiceUnavailable, match="no permissions"):
                client.get("/e/k")
            wait_until(lambda: _logged_since(config_center, offset, ("event tail", "event-tail"))
                       and _logged_since(config_center, offset, ("lease reaper", "lease-reaper")),
                       timeout=20, message="the watch reader and the reaper to meet the errors")
        finally:
            admin.execute_command("ACL", "SETUSER", "default", "+@all")
            admin.close()
        lease = client.lease(1, keepalive=False)
        put = client.put("/e/k", "v", lease=lease.id)
        event = watch.poll(10)
        assert event is not None and event.revision == put.revision, "watchers stalled"
        deletion = watch.poll(10)
        assert deletion is not None, "the lease never expired: the reaper stopped"
        assert (deletion.type, deletion.kv.key) == ("DELETE", "/e/k")


def test_a_read_only_redis_answers_unavailable_and_leases_expire_once_writable(
        redis_server, config_center, client):
    """A primary demoted to a replica answers READONLY to writes (the reaper's too)."""
    admin = redis.Redis.from_url(redis_server.url)
    lease = client.lease(1, keepalive=False)
    client.put("/ro/k", "v", lease=lease.id)
    offset = config_center.log.stat().st_size
    admin.execute_command("REPLICAOF", "127.0.0.1", str(free_port()))  # a primary never there
    try:
        with pytest.raises(errors.ServiceUnavailable, match="read only replica"):
            client.put("/ro/other", "v")
        assert client.get("/ro/k").text == "v"  # reads still served
        wait_until(lambda: _logged_since(config_center, offset, ("lease reaper", "lease-reaper")),
                   timeout=20, message="the reaper to meet READONLY")
    finally:
        admin.execute_command("REPLICAOF", "NO", "ONE")
        admin.close()
    wait_until(lambda: client.get("/ro/k") is None, timeout=10,
               message="the expired lease's key to be deleted once Redis is writable")


def _logged_since(service, offset: int, needles: tuple[str, ...]) -> bool:
    with open(service.log, "rb") as log:
        log.seek(offset)
        text = log.read().decode(errors="replace")
    return any(needle in text for needle in needles)


def _try(call):
    try:
        return call()
    except errors.ServiceUnavailable:
        return None


def test_no_reachable_config_center_is_one_sentence_naming_every_address_tried():
    addrs = [dead_endpoint(), dead_endpoint()]
    with ConfigClient(",".join(addrs), timeout=2.0) as client, \
            pytest.raises(errors.ServiceUnavailable) as refused:
        client.get("/tidemq/topics/orders")
    assert refused.value.message.startswith(
        f"no config center answered Get (tried {addrs[0]}, {addrs[1]})"), refused.value.message
