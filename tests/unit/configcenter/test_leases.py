"""Leases: keys attached to a lease vanish (with DELETE events) when it is revoked or expires."""

from __future__ import annotations

import pytest
from tidemq.common.errors import NotFound
from tidemq.configcenter.model import EventType

from tests.support.processes import wait_until


def test_revoke_deletes_the_lease_keys_with_events(store):
    lease, _ = store.lease_grant(30)
    store.put("/live/b1", b"up", lease=lease)
    written = store.put("/live/b2", b"up", lease=lease)
    store.put("/live/other", b"no lease")
    assert store.lease_revoke(lease) == 2
    assert [kv.key for kv in store.range("/live/").kvs] == ["/live/other"]
    events = [e for b in store.watch("/live/b", written.revision + 1,
                                     until=store.revision()) for e in b.events]
    assert sorted((e.type, e.kv.key) for e in events) == [
        (EventType.DELETE, "/live/b1"), (EventType.DELETE, "/live/b2")]
    with pytest.raises(NotFound, match="does not exist"):
        store.lease_revoke(lease)


def test_a_key_rewritten_without_the_lease_is_detached_from_it(store):
    lease, _ = store.lease_grant(30)
    store.put("/k", b"1", lease=lease)
    store.put("/k", b"2")
    assert store.lease_revoke(lease) == 0
    assert store.get("/k")[0].value == b"2"


def test_put_with_an_unknown_lease_is_refused(store):
    before = store.revision()
    with pytest.raises(NotFound) as info:
        store.put("/k", b"1", lease=424242)
    assert info.value.code == "LEASE_NOT_FOUND"
    assert store.revision() == before


def test_an_expired_lease_takes_its_keys_and_keepalive_reports_it(store):
    lease, ttl = store.lease_grant(1)
    assert ttl >= 1  # etcd raises a TTL below its floor (about 2 s) to the floor
    store.put("/eph", b"1", lease=lease)
    assert store.lease_keepalive(lease) >= 1
    wait_until(lambda: store.get("/eph")[0] is None, timeout=15,
               message="the lease to expire and take its key")
    assert store.lease_keepalive(lease) == 0
