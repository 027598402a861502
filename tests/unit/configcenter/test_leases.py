"""Leases: keys attached to a lease vanish (with DELETE events) when it is revoked or expires."""

from __future__ import annotations

import time

import pytest
from tidemq.common.errors import NotFound
from tidemq.configcenter.model import EventType

from tests.support.processes import wait_until


def test_revoke_deletes_the_lease_keys_with_events(store):
    lease = store.lease_grant(30)
    store.put("/live/b1", b"up", lease=lease)
    store.put("/live/b2", b"up", lease=lease)
    store.put("/live/other", b"no lease")
    assert store.lease_revoke(lease) == 2
    assert [kv.key for kv in store.range("/live/").kvs] == ["/live/other"]
    events = store.read_events(3, block_ms=0)
    assert [(e.type, e.kv.key, e.revision) for e in events] == [
        (EventType.DELETE, "/live/b1", 4), (EventType.DELETE, "/live/b2", 5)]
    with pytest.raises(NotFound, match="does not exist"):
        store.lease_revoke(lease)


def test_a_key_rewritten_without_the_lease_is_detached_from_it(store):
    lease = store.lease_grant(30)
    store.put("/k", b"1", lease=lease)
    store.put("/k", b"2")
    assert store.lease_revoke(lease) == 0
    assert store.get("/k")[0].value == b"2"


def test_put_with_an_unknown_lease_is_refused(store):
    with pytest.raises(NotFound) as info:
        store.put("/k", b"1", lease=424242)
    assert info.value.code == "LEASE_NOT_FOUND"
    assert store.revision() == 0


def test_expired_lease_is_reaped_and_keepalive_reports_it(store):
    lease = store.lease_grant(1)
    store.put("/eph", b"1", lease=lease)
    assert store.lease_keepalive(lease) == 1
    wait_until(lambda: store.reap_expired_leases() == (1, 1), timeout=5,
               message="the lease to expire and be reaped")
    assert store.get("/eph")[0] is None
    assert store.lease_keepalive(lease) == 0
    assert store.reap_expired_leases() == (0, 0)  # idempotent
    events = store.read_events(1, block_ms=0)
    assert [(e.type, e.revision) for e in events] == [(EventType.DELETE, 2)]


def test_a_lease_does_not_age_while_no_lease_script_runs(store):
    """Seen from Redis, no lease script for longer than 2 s is an outage of every config
    center (their reapers run one every 0.2 s): nobody could keep a lease alive, so the gap
    does not count against it (etcd resets deadlines on a leader change the same way)."""
    lease = store.lease_grant(1)
    store.put("/eph", b"1", lease=lease)
    time.sleep(3)   # the outage itself, three times the TTL
    assert store.lease_keepalive(lease) == 1
    assert store.get("/eph")[0] is not None
    wait_until(lambda: store.reap_expired_leases() == (1, 1), timeout=5,
               message="the lease, no longer kept alive, to expire as usual")
