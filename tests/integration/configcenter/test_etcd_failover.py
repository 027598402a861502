"""The config center on a three-member etcd cluster, under the faults #35 names: the leader
SIGKILLed, the leader frozen (SIGSTOP) past the election timeout and past a broker lease, a
follower killed, a config center killed, the leader partitioned from the other members
(each member in a network namespace of its own; nftables drops its peer traffic). Several writers write distinct keys through two
config centers and a compare-and-set register throughout; afterwards every acknowledged
write is present, the register's acknowledged history is one unbroken chain, and writes
resumed after each fault (the longest outage is printed, never asserted).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable

import pytest
from tidemq.common import errors
from tidemq.configclient.client import ConfigClient

from tests.support.etcd import EtcdCluster, start_etcd
from tests.support.netns import PeerNetwork
from tests.support.processes import wait_until

WRITERS = 4


class Writers:
    """Writer threads putting distinct keys; each records what was acknowledged, and one more
    thread increments a register by compare-and-set, recording every acknowledged step."""

    def __init__(self, addrs: str) -> None:
        self.addrs = addrs
        self.acknowledged: dict[str, str] = {}
        self.register: list[tuple[int, int]] = []  # (value written, revision) acknowledged
        self.failures = 0
        self.last_ack = time.monotonic()
        self.longest_gap = 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._write, args=(n,), daemon=True)
                         for n in range(WRITERS)]
        self._threads.append(threading.Thread(target=self._increment, daemon=True))

    def __enter__(self) -> Writers:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(30)

    def _acked(self) -> None:
        now = time.monotonic()
        with self._lock:
            self.longest_gap = max(self.longest_gap, now - self.last_ack)
            self.last_ack = now

    def _write(self, writer: int) -> None:
        with ConfigClient(self.addrs, timeout=3.0) as client:
            for i in range(1_000_000):
                if self._stop.is_set():
                    return
                key, value = f"/w/{writer}/{i}", f"{writer}-{i}"
                try:
                    client.put(key, value)
                except (errors.ServiceUnavailable, errors.DeadlineExceeded):
                    self.failures += 1  # not acknowledged: it may or may not be stored
                    self._stop.wait(0.05)  # as a client backs off
                    continue
                with self._lock:
                    self.acknowledged[key] = value
                self._acked()

    def _increment(self) -> None:
        with ConfigClient(self.addrs, timeout=3.0) as client:
            while not self._stop.is_set():
                try:
                    current = client.get("/register")
                    value = int(current.text) if current else 0
                    result = client.put("/register", str(value + 1),
                                        expected_revision=current.mod_revision if current else 0)
                except (errors.ServiceUnavailable, errors.DeadlineExceeded):
                    self._stop.wait(0.05)
                    continue
                if result.succeeded:
                    self.register.append((value + 1, result.revision))

    def acknowledged_since(self, mark: float) -> bool:
        return self.last_ack > mark


def _fault(cluster: EtcdCluster, writers: Writers, name: str,
           apply: Callable[[], None], undo: Callable[[], None]) -> None:
    before = len(writers.acknowledged)
    wait_until(lambda: len(writers.acknowledged) > before + 20, timeout=30,
               message=f"writes before {name}")
    apply()
    try:
        mark = time.monotonic()
        wait_until(lambda: writers.acknowledged_since(mark + 0.5), timeout=30,
                   message=f"writes acknowledged during {name}")
    finally:
        undo()
    cluster.wait_leader(30)


def _judge(writers: Writers, addr: str) -> None:
    """Every acknowledged write present with its value, and the register's history one
    unbroken chain holding every acknowledged step."""
    with ConfigClient(addr, timeout=5) as client:
        assert writers.acknowledged, "no write was acknowledged: nothing to judge"
        # The writers' last failures may have left this address's breaker open a moment.
        listing = wait_until(lambda: _answered(lambda: client.range("/w/")), timeout=30,
                             message=f"a listing from {addr}")
        stored = {kv.key: kv.text for kv in listing.kvs}
        lost = {k for k, v in writers.acknowledged.items() if stored.get(k) != v}
        assert not lost, f"{len(lost)} acknowledged writes lost, e.g. {sorted(lost)[:5]}"
        assert writers.register, "the register was never incremented"
        # The register's whole history (acknowledged steps and those whose answer was lost)
        # counts 1, 2, 3... with no value skipped or written twice, and holds every
        # acknowledged step at the revision it was acknowledged at.
        history = [(int(e.kv.text), e.revision) for e in client.history("/register")]
        values = [value for value, _ in history]
        assert values == list(range(1, len(values) + 1)), \
            "the register's history is not one unbroken chain"
        missing = set(writers.register) - set(history)
        assert not missing, f"acknowledged register steps missing: {sorted(missing)[:5]}"


@pytest.fixture
def etcd3(tmp_path):
    cluster = start_etcd(tmp_path, size=3)
    yield cluster
    for member in cluster.members:
        member.signal(signal.SIGCONT)
    cluster.kill()


def test_no_acknowledged_config_write_is_lost_to_etcd_faults(etcd3, services):
    centers = [services("tidemq.configcenter", ["--etcd-endpoints", etcd3.endpoints])
               for _ in range(2)]
    addrs = ",".join(c.addr for c in centers)
    gaps: dict[str, float] = {}

    def kill_leader():
        leader = etcd3.wait_leader()
        leader.kill()
        return leader

    with Writers(addrs) as writers:
        def measured(name, apply, undo):
            writers.longest_gap = 0.0
            _fault(etcd3, writers, name, apply, undo)
            gaps[name] = writers.longest_gap

        killed = {}
        measured("leader SIGKILL", lambda: killed.update(m=kill_leader()),
                 lambda: etcd3.restart_member(killed["m"]))
        frozen = {}

        def freeze_leader():
            frozen["m"] = etcd3.wait_leader()
            frozen["m"].signal(signal.SIGSTOP)

        measured("leader SIGSTOP", freeze_leader,
                 lambda: frozen["m"].signal(signal.SIGCONT))
        follower = {}

        def kill_follower():
            follower["m"] = etcd3.followers()[0]
            follower["m"].kill()

        measured("follower SIGKILL", kill_follower,
                 lambda: etcd3.restart_member(follower["m"]))
        measured("config center SIGKILL", centers[0].kill, lambda: None)
        before = len(writers.acknowledged)
        wait_until(lambda: len(writers.acknowledged) > before + 20, timeout=30,
                   message="writes after the last fault")
    print(f"acknowledged writes {len(writers.acknowledged)}, refused or timed out "
          f"{writers.failures}, register steps {len(writers.register)}; longest write outage "
          + ", ".join(f"{name}: {gap:.2f} s" for name, gap in gaps.items()))

    _judge(writers, centers[1].addr)


def test_no_quorum_answers_unavailable_naming_the_members(etcd3, services):
    center = services("tidemq.configcenter", ["--etcd-endpoints", etcd3.endpoints])
    with ConfigClient(center.addr, timeout=3.0) as client:
        client.put("/q", "before")
        for member in etcd3.followers():
            member.kill()
        with pytest.raises(errors.ServiceUnavailable) as refused:
            client.put("/q", "without a quorum")
        message = refused.value.message
        assert "no etcd member served the call" in message
        assert all(m.addr in message for m in etcd3.members), message


def test_a_lease_is_kept_alive_past_a_frozen_member(etcd3):
    """A keep-alive moves on from a member that accepts the stream and never answers (SIGSTOP)
    within the call's deadline; it used to wait on it for a minute and lose the lease (the
    chaos suite's stop_etcd_leader cost every broker its lease)."""
    from tidemq.configcenter.etcd import EtcdTarget
    from tidemq.configcenter.store import ConfigStore

    store = ConfigStore(EtcdTarget.parse(etcd3.endpoints))
    try:
        lease, ttl = store.lease_grant(5)
        assert store.lease_keepalive(lease) > 0
        frozen = next(m for m in etcd3.members if m.addr == store.etcd.order()[0].endpoint)
        frozen.signal(signal.SIGSTOP)
        renewed = wait_until(lambda: _renewed(store, lease), timeout=ttl,
                             message="a keep-alive answered past the frozen member")
        assert renewed > 0   # still alive: it never expired while the member was frozen
    finally:
        store.close()


def _renewed(store, lease: int) -> int:
    started = time.monotonic()
    try:
        ttl = store.lease_keepalive(lease)
    except errors.ServiceUnavailable:   # no leader yet (the frozen member led): try again
        ttl = 0
    assert time.monotonic() - started < store.etcd.timeout + 1, "a keep-alive hung"
    return ttl


def test_no_acknowledged_config_write_is_lost_when_the_leader_is_partitioned(services, tmp_path):
    """The leader cut from both other members, not stopped: it lives, its clients still reach
    it, and it may take proposals it can never commit. Config center A is given the leader
    first, so A's calls go to it when the partition falls. The two others elect; the old
    leader steps down (etcd's check-quorum) and A's calls move to them: writes through A alone
    resume. Healed, the old leader follows the new one. Nothing acknowledged is lost; the
    register's history is one chain."""
    reason = PeerNetwork.unavailable()
    if reason:
        pytest.skip(reason)
    cluster = start_etcd(tmp_path, size=3, network=True)
    try:
        old = cluster.wait_leader()
        first = [old.addr] + [m.addr for m in cluster.members if m is not old]
        a = services("tidemq.configcenter", ["--etcd-endpoints", ",".join(first)])
        b = services("tidemq.configcenter", ["--etcd-endpoints", cluster.endpoints])
        with Writers(f"{a.addr},{b.addr}") as writers, \
                ConfigClient(a.addr, timeout=3.0) as through_a:
            before = len(writers.acknowledged)
            wait_until(lambda: len(writers.acknowledged) > before + 20, timeout=30,
                       message="writes before the partition")
            term = old.status(2).raftTerm
            writers.longest_gap = 0.0
            cluster.partition(old)
            try:
                mark = time.monotonic()
                new = wait_until(lambda: _new_leader(cluster, old, term), timeout=30,
                                 message="a leader elected among the other two")
                wait_until(lambda: _not_leading(old), timeout=30,
                           message=f"the partitioned {old.name} stepping down")
                _refuses_without_a_leader(old)
                wait_until(lambda: writers.acknowledged_since(mark + 0.5), timeout=30,
                           message="writes acknowledged during the partition")
                wait_until(lambda: _put(through_a, "/partition/through-a"), timeout=30,
                           message=f"a write through {a.addr} (given {old.name} first)")
                gap = writers.longest_gap
            finally:
                cluster.heal(old)
            wait_until(lambda: _following(old, new), timeout=30,
                       message=f"{old.name} following {new.name} after the heal")
            before = len(writers.acknowledged)
            wait_until(lambda: len(writers.acknowledged) > before + 20, timeout=30,
                       message="writes after the heal")
        print(f"acknowledged writes {len(writers.acknowledged)}, refused or timed out "
              f"{writers.failures}, register steps {len(writers.register)}; longest write "
              f"outage, leader {old.name} partitioned: {gap:.2f} s; new leader {new.name}")
        _judge(writers, b.addr)
    finally:
        cluster.kill()


def _refuses_without_a_leader(member) -> None:
    """The cut-off member, asked to require a leader, says it has none (it would otherwise
    hold a call to its deadline: "Deadline Exceeded")."""
    from tidemq.configcenter.etcd import EtcdTarget
    from tidemq.configcenter.store import ConfigStore

    store = ConfigStore(EtcdTarget.parse(member.addr), timeout=1.0)

    def says_no_leader() -> bool:
        # Until the member's election timeout passes it still believes in its leader and
        # forwards the write, which then times out: refused either way, never stored; once it
        # notices (later under load), it answers at once that it has no leader.
        with pytest.raises(errors.ServiceUnavailable) as refused:
            store.put("/partition/on-the-cut-off-member", b"never")
        return "etcdserver: no leader" in refused.value.message

    try:
        wait_until(says_no_leader, 30, interval=0.2,
                   message=f"the cut-off member {member.name} to say it has no leader")
    finally:
        store.close()


def _new_leader(cluster: EtcdCluster, old, term: int):
    for member in cluster.members:
        status = member.status(1) if member is not old else None
        if status is not None and status.raftTerm > term and \
                status.leader == status.header.member_id:
            return member
    return None


def _not_leading(member) -> bool:
    status = member.status(1)
    return status is not None and status.leader != status.header.member_id


def _following(member, leader) -> bool:
    status, theirs = member.status(1), leader.status(1)
    return (status is not None and theirs is not None
            and status.leader == theirs.header.member_id
            and status.raftAppliedIndex >= theirs.raftAppliedIndex - 5)


def _put(client: ConfigClient, key: str) -> bool:
    return _answered(lambda: client.put(key, "moved")) is not None


def _answered(call: Callable[[], object]):
    """`call()`'s answer, or None while the store is unavailable (BreakerOpen included)."""
    try:
        return call()
    except (errors.ServiceUnavailable, errors.DeadlineExceeded):
        return None
