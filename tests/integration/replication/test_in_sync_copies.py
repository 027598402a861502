"""In sync means this copy of the data (issue #36), with real processes: what a SYNC send, a
slave that lost its unflushed tail and an operator's unclean election look like from outside.

The master's HA stream runs through a FaultProxy where a test needs a replica to stay
*catching up* long enough to look at it: on loopback a copy takes milliseconds, over the
throttled link it takes many seconds, so what is checked during the catch-up really happens
during it (the replica is connected and copying; nothing here waits on a timer)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import urllib.request

import pytest
from tidemq.client import Message, Producer
from tidemq.client.message import SendStatus
from tidemq.common import errors
from tidemq.configclient.client import ConfigClient
from tidemq.configclient.replication import live_key

from tests.integration.replication.replica_group import (
    GROUP,
    TOPIC,
    GroupObserver,
    group_state,
    lost,
    produce,
    read_all,
    start_group,
    wait_in_sync,
)
from tests.support.cli import TIDEMQ
from tests.support.damage import lose_tail
from tests.support.faultproxy import FaultProxy
from tests.support.processes import free_port, wait_until

LAG = ["--replica-lag-max-ms", "1500"]
BIG = 300           # bodies of 11 x 300 bytes: 600 messages are ~2 MB of log
SLOW = 16 * 1024    # bytes a second over the throttled HA link: that log takes ~2 minutes
FRAMES = ["--ha-transfer-batch-bytes", "16384"]   # a frame a second over that link
LOST = 1536 * 1024  # the tail a slave loses: over that link, more than a minute to copy again


def store_id_of(incarnation: str) -> str:
    return incarnation.partition(":")[0]    # "<store id>:<start>"


def live_value(cluster, replica: int) -> dict | None:
    with ConfigClient(cluster.config_center.addr) as client:
        kv = client.get(live_key(GROUP, replica))
    return json.loads(kv.value) if kv else None


def progress(group, master: int, replica: int):
    """The master's view of one slave (ReplicaProgress), or None if it is not connected."""
    info = group.broker_info(master)
    if info is None:
        return None
    return next((p for p in info.replicas if p.replica_id == replica), None)


@contextlib.contextmanager
def ha_proxies(replicas: int = 3):
    """One FaultProxy in front of each replica's HA port (whichever becomes master, its slaves
    dial its proxy), and the flags that set it up: (proxies, per_replica flags)."""
    with contextlib.ExitStack() as stack:
        ports = [free_port() for _ in range(replicas)]
        proxies = [stack.enter_context(FaultProxy(f"127.0.0.1:{port}", f"HA of replica {r}"))
                   for r, port in enumerate(ports)]
        yield proxies, {r: ["--ha-port", str(ports[r]), "--ha-advertised-addr", proxies[r].addr]
                        for r in range(replicas)}


def recorded_master(cluster) -> int:
    return group_state(cluster)["master"]


def new_incarnation(cluster, replica: int, old: dict) -> str:
    """Wait for the live key of `replica`'s new process (`old`: its previous live value);
    its incarnation ("" from a replica that publishes none)."""
    found: list[dict] = []

    def changed() -> bool:
        value = live_value(cluster, replica)
        if value and value.get("renewal", 0) < old.get("renewal", 0) or (
                value and value.get("incarnation", "") not in ("", old.get("incarnation"))):
            found.append(value)
        return bool(found)

    wait_until(changed, 30, interval=0.05, message=f"replica {replica}'s new live key")
    return found[-1].get("incarnation", "")


def test_a_sync_send_is_never_acknowledged_for_a_wiped_slave_catching_up(cluster):
    """Min in-sync 2 of 3, one slave stopped: while the other (its disk replaced) copies the
    master's log, it does not count — sends are refused NOT_ENOUGH_REPLICAS — and once it has
    caught up under its new incarnation they are acknowledged again, and it holds them."""
    with ha_proxies() as (proxies, flags):
        group = start_group(cluster, extra=[*LAG, *FRAMES], per_replica=flags)
        wait_in_sync(cluster, {0, 1, 2})
        master = recorded_master(cluster)
        stopped, wiped = (r for r in range(3) if r != master)
        acked = produce(cluster, 0, 600, repeat=BIG)

        group.replicas[stopped].stop()
        wait_in_sync(cluster, {master, wiped})
        old = live_value(cluster, wiped)
        proxies[master].throttle(SLOW)            # the replaced replica's link is slow
        group.replicas[wiped].kill()
        shutil.rmtree(group.replicas[wiped].workdir / "data" / "store")
        group.replicas[wiped].restart()
        incarnation = new_incarnation(cluster, wiped, old)

        # Catching up: connected and copying, not there yet; counted out at its handshake.
        wait_until(lambda: (p := progress(group, master, wiped)) is not None
                   and p.log_end > 0, 30, interval=0.05,
                   message="the wiped replica copying the master's log")
        wait_in_sync(cluster, {master})
        with Producer(cluster.namesrv_addrs, send_timeout=2, retries=0) as producer:
            for n in range(3):
                with pytest.raises(errors.TideMQError) as refused:
                    producer.send(Message(TOPIC, f"during-{n}".encode()))
                assert refused.value.code == "NOT_ENOUGH_REPLICAS", refused.value
        during = progress(group, master, wiped)
        assert during is not None and during.lag_bytes > 0 and not during.in_sync, during
        assert wiped not in group_state(cluster)["in_sync"]

        # Caught up under its new incarnation: counted again, sends acknowledged.
        proxies[master].unthrottle()
        wait_in_sync(cluster, {master, wiped}, timeout=60)
        assert store_id_of(incarnation) != store_id_of(old.get("incarnation", ""))
        assert group_state(cluster).get("incarnations", {}).get(str(wiped)) == incarnation
        with Producer(cluster.namesrv_addrs, send_timeout=10) as producer:
            result = producer.send(Message(TOPIC, b"after"))
        assert result.status == SendStatus.SEND_OK
        acked[(result.queue_id, result.queue_offset)] = b"after"
        wait_until(lambda: not lost(acked, read_all(group.replicas[wiped].addr)), 30,
                   interval=0.2, message="every acknowledged message on the replaced replica")


def test_a_slave_that_lost_its_unflushed_tail_is_out_until_caught_up(cluster):
    """A slave killed and its CommitLog's tail lost (a power loss under ASYNC_FLUSH) comes
    back under the same store id but behind the group's confirmed offset: its recovery report
    says by how much, it is out of the in-sync set (never counted, never electable) while it
    copies the rest, and back in under its new incarnation once caught up."""
    with ha_proxies() as (proxies, flags):
        # The lag bound is far away: only the lost tail may take the slave out of the set.
        group = start_group(cluster, extra=["--replica-lag-max-ms", "60000", *FRAMES],
                            per_replica=flags)
        wait_in_sync(cluster, {0, 1, 2})
        master = recorded_master(cluster)
        damaged = (master + 1) % 3
        acked = produce(cluster, 0, 600, repeat=BIG)
        end = group.broker_info(master).commitlog_max_offset
        wait_until(lambda: group_state(cluster).get("confirmed_offset", end) >= end, 30,
                   message="the controller recording the confirmed offset")
        wait_until(lambda: live_value(cluster, damaged)["log_end"] >= end, 30,
                   message="the slave holding every acknowledged byte")
        old = live_value(cluster, damaged)

        group.replicas[damaged].kill()
        lose_tail(group.commitlog_dir(damaged), end, LOST)
        proxies[master].throttle(SLOW)
        with GroupObserver(cluster, group) as observer:
            observer.never_master(damaged)
            group.replicas[damaged].restart()
            incarnation = new_incarnation(cluster, damaged, old)

            # Out of the in-sync set at once (the lag bound is a minute away).
            wait_until(lambda: observer.check()
                       and damaged not in group_state(cluster)["in_sync"], 20, interval=0.05,
                       message="the slave that lost its tail taken out of the in-sync set")
            assert store_id_of(incarnation) == store_id_of(old.get("incarnation", "-"))

            # Its recovery report: how far behind the group's confirmed offset it came back.
            report: list[re.Match] = []
            wait_until(lambda: report.extend(re.finditer(
                r"replica came back behind the group's confirmed offset.*",
                group.replicas[damaged].log.read_text(errors="replace"))) or report, 30,
                message="the slave's recovery report")
            fields = dict(re.findall(r"(\w+)=(\S+)", report[-1].group(0)))
            behind, confirmed, log_end = (int(fields[k]) for k in
                                          ("behind_bytes", "confirmed_offset", "log_end"))
            assert confirmed >= end and log_end <= end - LOST, fields
            assert behind == confirmed - log_end > 0, fields

            # It copies what it lost; the group writes on with master + the other slave.
            wait_until(lambda: (p := progress(group, master, damaged)) is not None
                       and p.log_end > 0, 30, interval=0.05,
                       message="the slave copying what it lost")
            acked |= produce(cluster, 600, 20)
            during = progress(group, master, damaged)
            assert during is not None and during.lag_bytes > 0 and not during.in_sync, during
            assert damaged not in group_state(cluster)["in_sync"]

            proxies[master].unthrottle()
            wait_in_sync(cluster, {0, 1, 2}, timeout=60)
            assert group_state(cluster).get("incarnations", {}).get(str(damaged)) == incarnation
            observer.check()
        wait_until(lambda: not lost(acked, read_all(group.replicas[damaged].addr)), 30,
                   interval=0.2, message="every acknowledged message on the slave")


def elections(cluster, kind: str) -> float:
    """tidemq_nameserver_elections_total{election=kind}, summed over the name servers (only
    the active controller counts)."""
    total = 0.0
    for namesrv in cluster.namesrvs:
        text = urllib.request.urlopen(
            f"http://127.0.0.1:{namesrv.metrics_port}/metrics", timeout=5).read().decode()
        match = re.search(rf'^tidemq_nameserver_elections_total{{election="{kind}"}} (\S+)$',
                          text, re.M)
        total += float(match.group(1)) if match else 0.0
    return total


def test_an_operator_ends_a_wait_with_cluster_elect_unclean(cluster):
    """A group waiting for its lost master (only a replica with a replaced disk is up):
    `tidemq cluster elect --unclean GROUP` warns how many acknowledged bytes may be lost,
    the group gets that replica as master, the elections metric counts an unclean election,
    and once another replica follows it the group takes writes again."""
    group = start_group(cluster, extra=LAG)
    wait_in_sync(cluster, {0, 1, 2})
    master = recorded_master(cluster)
    stopped, wiped = (r for r in range(3) if r != master)
    produce(cluster, 0, 200)
    group.replicas[stopped].stop()
    wait_in_sync(cluster, {master, wiped})
    produce(cluster, 200, 200)

    os.kill(group.replicas[master].pid, signal.SIGSTOP)   # nothing more is copied from it
    old = live_value(cluster, wiped)
    group.replicas[wiped].kill()
    shutil.rmtree(group.replicas[wiped].workdir / "data" / "store")
    group.replicas[wiped].restart()
    new_incarnation(cluster, wiped, old)
    group.replicas[master].kill()
    wait_until(lambda: master in (group_state(cluster) or {}).get("waiting_for", ()), 30,
               interval=0.1, message="the group waiting for its lost master")
    before = group_state(cluster)
    wiped_end = live_value(cluster, wiped)["log_end"]
    unclean_before = elections(cluster, "unclean")

    run = subprocess.run([TIDEMQ, "--namesrv", cluster.namesrv_addrs, "cluster", "elect",
                          "--unclean", GROUP], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run
    lost_bytes = before["confirmed_offset"] - wiped_end
    assert lost_bytes > 0
    output = " ".join(run.stdout.split())     # the console may wrap the warning
    assert (f"WARNING: unclean election of {GROUP}: up to {lost_bytes} bytes of "
            "acknowledged records") in output, run.stdout
    assert f"master is now replica {wiped}" in output, run.stdout

    assert group.wait_master(alive=(wiped,)) == wiped
    after = group_state(cluster)
    assert after["master"] == wiped and after["epoch"] > before["epoch"], after
    assert after["in_sync"] == [wiped] and not after["waiting_for"], after
    assert elections(cluster, "unclean") == unclean_before + 1

    # The stopped slave returns, follows the new master (truncating what it lost): writable.
    group.replicas[stopped].restart()
    wait_in_sync(cluster, {wiped, stopped}, timeout=60)
    with Producer(cluster.namesrv_addrs, send_timeout=10) as producer:
        result = producer.send(Message(TOPIC, b"after the unclean election"))
    assert result.status == SendStatus.SEND_OK
