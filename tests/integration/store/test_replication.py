"""The HA stream with two real stores in temporary directories and real TCP on 127.0.0.1, in
one process: the SYNC gate answers only after the slave has the bytes; a stopped slave makes
sends answer FLUSH_SLAVE_TIMEOUT, then NOT_ENOUGH_REPLICAS once the in-sync set shrank below
min_in_sync_replicas (never a silent PUT_OK); a returning old master with a divergent tail is
truncated on its handshake and then byte-identical to the new master."""

from __future__ import annotations

import asyncio
import contextlib

import pytest
from tidemq.broker.store import AppendStatus, FlushMode, MessageStore, NotEnoughReplicas
from tidemq.broker.store.ha import HAConfig, InSyncTracker, ReplicationGate
from tidemq.broker.store.ha.client import HAClient, HandshakeRefused
from tidemq.broker.store.ha.server import HAServer

from tests.support.processes import wait_until_async
from tests.unit.store.helpers import HOST, encode_batch, read_all, small_config
from tests.unit.store.test_rebuild import drop_oldest
from tests.unit.store.test_replicated_append import assert_same, log_bytes

FAST = HAConfig(sync_replication_timeout_ms=5000, replica_lag_max_ms=500,
                heartbeat_interval_ms=100, report_interval_ms=100,
                housekeeping_timeout_ms=2000, reconnect_interval_ms=50,
                transfer_batch_bytes=4096, min_in_sync_replicas=2)


def open_store(path) -> MessageStore:
    store = MessageStore(small_config(path, flush_mode=FlushMode.SYNC), HOST)
    store.start()
    return store


def batch(n: int, size: int = 700) -> tuple[bytes, int]:
    return encode_batch("t", [bytes([65 + n % 26]) * size] * (1 + n % 3))[0], 1 + n % 3


async def start_master(store, config: HAConfig, epoch: int, in_sync=(0, 1)):
    store.become_master(epoch)
    tracker = InSyncTracker(0, set(in_sync), config.replica_lag_max_ms,
                            config.min_in_sync_replicas)
    gate = ReplicationGate(tracker, store.commitlog_max_offset, sync=config.sync,
                           timeout_ms=config.sync_replication_timeout_ms)
    store.set_replication_gate(gate)
    server = HAServer(store, gate, config)
    await server.start("127.0.0.1", 0)
    return server, gate


@contextlib.asynccontextmanager
async def replicating(master, slave, config: HAConfig = FAST,
                      slave_config: HAConfig | None = None):
    """`master` (epoch 1) serving `slave` for the body of the block; yields the slave's
    HAClient. `slave_config`: the slave's own, when it differs (its TLS). A block that ends
    normally with the slave connected ends once it knows the master's confirmed offset (its read fence), so
    what follows reads the same through both."""
    server, _ = await start_master(master, config, epoch=1)
    client = HAClient(slave, 1, f"127.0.0.1:{server.port}", slave_config or config)
    client.start()
    try:
        yield client
        if client.connected:   # (a slave the master refused learns nothing)
            await wait_until_async(
                lambda: slave.confirmed_offset() == master.confirmed_offset(), 10,
                message="the slave to learn the master's confirmed offset")
    finally:
        await client.stop()
        await server.stop()


async def append(store, n: int):
    raw, count = batch(n)
    return await store.append_batch_async("t", n % 3, raw, count)


def test_sync_master_acknowledges_only_what_the_slave_has(stores):
    master, slave = stores

    async def scenario():
        async with replicating(master, slave):
            for n in range(60):   # segments of 64 KiB: several rolls
                result = await append(master, n)
                assert result.status is AppendStatus.PUT_OK
                assert slave.commitlog_max_offset() >= result.end_offset, \
                    "acknowledged before the slave had the bytes"
            results = await asyncio.gather(*(append(master, n) for n in range(60, 120)))
            assert {r.status for r in results} == {AppendStatus.PUT_OK}
            assert slave.commitlog_max_offset() >= max(r.end_offset for r in results)

    asyncio.run(scenario())
    assert len(master.commitlog.segments) > 2
    assert_same(master, slave)


def test_a_stopped_slave_never_lets_a_send_through_silently(stores):
    master, slave = stores
    config = HAConfig(**{**FAST.__dict__, "sync_replication_timeout_ms": 200})

    async def scenario():
        server, gate = await start_master(master, config, epoch=1)
        client = HAClient(slave, 1, f"127.0.0.1:{server.port}", config)
        client.start()
        try:
            # connected before the first send: at load the slave may not connect within 200 ms
            await wait_until_async(lambda: 1 in gate.tracker.connected, 10,
                                   message="the slave to connect")
            assert (await append(master, 0)).status is AppendStatus.PUT_OK
            await client.stop()                         # the slave stops fetching
            late = await append(master, 1)
            assert late.status is AppendStatus.FLUSH_SLAVE_TIMEOUT
            assert slave.commitlog_max_offset() < late.end_offset
            await wait_until_async(lambda: gate.tracker.in_sync == {0}, 10,
                                   message="the in-sync set to shrink to the master")
            with pytest.raises(NotEnoughReplicas):
                await append(master, 2)
            end = master.commitlog_max_offset()
            client = HAClient(slave, 1, f"127.0.0.1:{server.port}", config)
            client.start()                              # it returns and catches up
            await wait_until_async(lambda: gate.tracker.in_sync == {0, 1}, 10,
                                   message="the slave to rejoin the in-sync set")
            assert slave.commitlog_max_offset() >= end
            again = await append(master, 3)
            assert again.status is AppendStatus.PUT_OK
            assert slave.commitlog_max_offset() >= again.end_offset
        finally:
            await client.stop()
            await server.stop()

    asyncio.run(scenario())
    assert_same(master, slave)


def test_a_returning_old_master_is_truncated_to_the_new_epoch_and_then_identical(stores):
    old, new = stores
    config = HAConfig(**{**FAST.__dict__, "min_in_sync_replicas": 1})

    async def scenario():
        server, _ = await start_master(old, config, epoch=1)
        client = HAClient(new, 1, f"127.0.0.1:{server.port}", config)
        client.start()
        for n in range(20):
            assert (await append(old, n)).status is AppendStatus.PUT_OK
        await client.stop()
        await server.stop()
        old.set_replication_gate(None)
        for n in range(20, 30):   # the old master's tail nobody replicated (epoch 1)
            await append(old, n)
        replicated = new.commitlog_max_offset()
        assert old.commitlog_max_offset() > replicated

        server, _ = await start_master(new, config, epoch=2, in_sync=(0,))   # elected
        for n in range(100, 110):   # epoch 2 writes over the same offsets
            assert (await append(new, n)).status is AppendStatus.PUT_OK
        stale = HAClient(new, 0, f"127.0.0.1:{server.port}", config)
        refused = HAServer(old, ReplicationGate(InSyncTracker(0, {0}, 500, 1), old.commitlog_max_offset), config)
        await refused.start("127.0.0.1", 0)   # the old master, still serving epoch 1
        stale.master_address = f"127.0.0.1:{refused.port}"
        stale_task = asyncio.ensure_future(stale._replicate_once())
        with pytest.raises(Exception, match="older than the slave's 2"):
            await asyncio.wait_for(stale_task, 10)
        await refused.stop()

        back = HAClient(old, 0, f"127.0.0.1:{server.port}", config)   # old returns as slave
        back.start()
        await wait_until_async(lambda: old.commitlog_max_offset() == new.commitlog_max_offset(),
                               10, message="the old master to catch up")
        assert [tuple(e) for e in old.epochs.entries] == [(1, 0), (2, replicated)]
        await back.stop()
        await server.stop()

    asyncio.run(scenario())
    assert_same(new, old)
    assert log_bytes(old) == log_bytes(new)


def test_a_topic_deletion_replicates_and_a_promoted_slave_goes_on_from_the_floor(stores):
    """The deletion marker reaches the slave in the byte stream: its dispatcher empties the
    topic's queues at the same log position, so after a failover the old messages stay gone
    and the queue offsets go on from where the master's were."""
    master, slave = stores

    async def scenario():
        async with replicating(master, slave):
            for n in range(30):
                assert (await append(master, n)).status is AppendStatus.PUT_OK
            master.delete_topic("t")
            for n in range(3):   # queues 0, 1, 2 again: 1, 2 and 3 records
                await append(master, n)
            await wait_until_async(
                lambda: slave.commitlog_max_offset() == master.commitlog_max_offset(), 10,
                message="the slave has the master's log")

    asyncio.run(scenario())
    assert_same(master, slave)
    floors = [10, 20, 30]  # queue q took ten batches of q + 1 records
    assert [slave.min_offset("t", q) for q in range(3)] == floors
    assert [len(read_all(slave, "t", q)) for q in range(3)] == [1, 2, 3]
    slave.become_master(2)
    raw, count = batch(0)
    assert slave.append_batch("t", 0, raw, count).first_queue_offset == floors[0] + 1


def test_a_slave_below_the_masters_oldest_segment_rebuilds_over_the_stream(stores):
    """Retention removed what the slave would resume from: a client told of a newer epoch
    than the master's keeps its data, so does an in-sync member (refused until it left the
    set); then it rebuilds from the master's oldest offset, is identical from there and back
    in the in-sync set."""
    master, slave = stores
    config = HAConfig(**{**FAST.__dict__, "min_in_sync_replicas": 1})

    async def scenario():
        server, gate = await start_master(master, config, epoch=1)
        address = f"127.0.0.1:{server.port}"
        client = HAClient(slave, 1, address, config, follow_epoch=1)
        client.start()
        for n in range(10):
            assert (await append(master, n)).status is AppendStatus.PUT_OK
        await client.stop()
        for n in range(10, 200):   # several 64 KiB segments the slave never gets
            await append(master, n)
        drop_oldest(master, len(master.commitlog.segments) - 1)
        held = slave.commitlog_max_offset()
        assert master.commitlog_min_offset() > held

        deposed = HAClient(slave, 1, address, config, follow_epoch=2)
        with pytest.raises(HandshakeRefused, match="not discarding"):
            await asyncio.wait_for(deposed._replicate_once(), 30)   # streaming: it failed
        assert slave.commitlog_max_offset() == held

        # still a member: it could be elected. Until its refusal, the controller keeps it
        # there (the housekeeping would drop it at once, a member that has not caught up
        # since time 0, and a loaded machine ran that before the handshake: the member was
        # then told to rebuild and streamed for good)
        server.propose = lambda proposed: 1 in proposed
        gate.tracker.apply({0, 1}, 0)
        member = HAClient(slave, 1, address, config, follow_epoch=1)
        with pytest.raises(HandshakeRefused, match="in the in-sync set"):
            await asyncio.wait_for(member._replicate_once(), 30)
        assert slave.commitlog_max_offset() == held
        server.propose = None   # now its removal goes through

        client = HAClient(slave, 1, address, config, follow_epoch=1)   # once out, it rebuilds
        client.start()
        await wait_until_async(
            lambda: slave.commitlog_max_offset() == master.commitlog_max_offset()
            and 1 in gate.tracker.in_sync
            and slave.confirmed_offset() == master.commitlog_max_offset(), 10,
            message="the slave rebuilt, in sync, and told that all it holds is confirmed")
        assert client.rebuilds == 1 and not client.rebuilding and not server.rebuilding
        assert slave.commitlog_min_offset() == master.commitlog_min_offset()
        await client.stop()
        await server.stop()

    asyncio.run(scenario())
    assert_same(master, slave)
