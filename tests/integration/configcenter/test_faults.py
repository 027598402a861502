"""Faults: lease expiry, config-center restart, etcd restart and etcd outage (the cluster-level
faults of a three-member etcd are in test_etcd_failover.py)."""

from __future__ import annotations

import signal
import time

import pytest
from tidemq.common import errors
from tidemq.configclient.client import ConfigClient

from tests.support.processes import dead_endpoint, wait_until


def test_a_lease_not_kept_alive_removes_its_keys_within_ttl_plus_one_second(client):
    ttl = 1
    with client.watch("/tidemq/brokers/") as watch:
        assert watch.wait_established(10)
        lease = client.lease(ttl, keepalive=False)
        granted = time.monotonic()  # etcd set the deadline before this moment
        put = client.put("/tidemq/brokers/b1", "alive", lease=lease.id)
        assert watch.poll(10).revision == put.revision
        # etcd raises a 1 s TTL to its floor (2 s with its default election timeout) and
        # checks deadlines every 0.5 s: the key goes within the granted TTL + 1 s.
        granted_ttl = lease.ttl_seconds
        deletion = watch.poll(max(0.0, granted + granted_ttl + 1.0 - time.monotonic()))
        assert deletion is not None, f"no DELETE within the granted TTL ({granted_ttl} s) + 1 s"
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


def test_an_etcd_restart_keeps_keys_and_revisions_and_watchers_resume(etcd_server, client):
    for i in range(20):
        client.put(f"/r/{i}", str(i))
    before = client.range("/r/")
    watch = client.watch("/r/", start_revision=before.revision + 1)
    assert watch.wait_established(10)
    member = etcd_server.members[0]
    member.stop()  # etcd fsyncs its log before it answers a write: nothing acknowledged is lost
    etcd_server.restart_member(member)
    after = wait_until(lambda: _try(lambda: client.range("/r/")), timeout=30,
                       message="the config center to reach the restarted etcd")
    assert after.kvs == before.kvs and after.revision == before.revision
    written = [client.put("/r/new", str(i)).revision for i in range(5)]
    assert written == list(range(before.revision + 1, before.revision + 6))
    assert [watch.poll(10).revision for _ in written] == written
    watch.close()


def test_an_etcd_outage_answers_unavailable_within_the_deadline(etcd_server, config_center):
    with ConfigClient(config_center.addr, timeout=3.0) as client:
        client.put("/k", "v")
        member = etcd_server.members[0]
        member.signal(signal.SIGSTOP)  # a hung member: accepts, never answers
        try:
            started = time.monotonic()
            with pytest.raises(errors.ServiceUnavailable) as refused:
                client.get("/k")
            assert time.monotonic() - started < 3.0 + 0.5
        finally:
            member.signal(signal.SIGCONT)
        assert member.addr in refused.value.message  # names the member it tried
        member.kill()  # a dead member: refused connections
        started = time.monotonic()
        with pytest.raises(errors.ServiceUnavailable, match="no etcd member served"):
            client.put("/k", "v2")
        assert time.monotonic() - started < 3.0 + 0.5  # within the call deadline, never a hang


def test_no_reachable_config_center_is_one_sentence_naming_every_address_tried():
    addrs = [dead_endpoint(), dead_endpoint()]
    with ConfigClient(",".join(addrs), timeout=2.0) as client, \
            pytest.raises(errors.ServiceUnavailable) as refused:
        client.get("/tidemq/topics/orders")
    assert refused.value.message.startswith(
        f"no config center answered Get (tried {addrs[0]}, {addrs[1]})"), refused.value.message


def _try(call):
    try:
        return call()
    except errors.ServiceUnavailable:
        return None
