"""bench/replication — the HA stream on loopback, beside the same run's single-store figures.

1. catch-up: a master holds VOLUME of 1 KiB records; a fresh slave fetches it over the TCP
   stream (HAServer -> HAClient, both on one uvloop loop in this process) — MB/s and msgs/s —
   printed beside the rate at which the master itself appended the same volume (ASYNC_FLUSH,
   batches of 256), and the raw loopback TCP rate of the same bytes (asyncio streams, no store).
2. SYNC_MASTER produce: 64 asyncio appenders of one-message SYNC_FLUSH appends on a master with
   one in-sync slave (min_in_sync_replicas 2, the gate waits for its ack), beside the same
   appenders on a single store with no replication, same run.
3. Both again with the stream over mutually authenticated TLS (what brokers with
   tls_cert_file use), as a share of the plaintext figures of the same run.

Master, slave and appenders share one process, one event loop and one GIL, so figure 2 is a
lower bound of two brokers on two machines (each broker's loop does only its own half).

    uv run --frozen python -m bench.replication [--quick] [--volume-mib 256] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from pathlib import Path

import uvloop
from tidemq.broker.store.ha.config import HATls

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tidemq.broker.store import AppendStatus, FlushMode, MessageStore, StoreConfig
from tidemq.broker.store.ha import HAConfig, InSyncTracker, ReplicationGate
from tidemq.broker.store.ha.client import HAClient
from tidemq.broker.store.ha.server import HAServer

from bench.store.run import HOST, one_kib_record
from deploy import certs

SEGMENT = 256 << 20


def open_store(directory: Path, mode: FlushMode) -> MessageStore:
    store = MessageStore(StoreConfig(data_dir=directory, segment_size=SEGMENT, flush_mode=mode,
                                     index_slots=500_000, index_entries=2_000_000), HOST)
    store.start()
    if store.commitlog.allocator is not None:
        store.commitlog.allocator.wait_idle(120)
    return store


async def start_master(store: MessageStore, config: HAConfig, in_sync: set[int]):
    store.become_master(1)
    tracker = InSyncTracker(0, in_sync, config.replica_lag_max_ms, config.min_in_sync_replicas)
    gate = ReplicationGate(tracker, store.commitlog_max_offset, sync=config.sync,
                           timeout_ms=config.sync_replication_timeout_ms)
    store.set_replication_gate(gate)
    server = HAServer(store, gate, config)
    await server.start("127.0.0.1", 0)
    return server


async def tcp_rate(total: int, frame: int) -> float:
    """Bytes/s of `total` bytes in `frame`-sized writes through asyncio streams on loopback."""
    done = asyncio.get_running_loop().create_future()
    payload = b"\x5a" * frame

    async def sink(reader, writer):
        received = 0
        while received < total:
            received += len(await reader.read(1 << 20))
        done.set_result(None)
        writer.close()

    server = await asyncio.start_server(sink, "127.0.0.1", 0)
    _, writer = await asyncio.open_connection("127.0.0.1", server.sockets[0].getsockname()[1])
    began = time.perf_counter()
    for _ in range(total // frame):
        writer.write(payload)
        await writer.drain()
    await done
    elapsed = time.perf_counter() - began
    writer.close()
    server.close()
    return total / elapsed


def stream_tls(root: Path) -> HATls:
    """The HA stream's TLS with a fresh CA and broker certificate (EC P-256, as `make certs`)."""
    folder = root / "certs"
    folder.mkdir(parents=True, exist_ok=True)
    certs.issue(folder, "tidemq", certs.create_ca(folder))
    return HATls.of(str(folder / "tidemq.pem"), str(folder / "tidemq-key.pem"),
                    str(folder / "ca.pem"))


def catch_up(root: Path, volume: int, batch_bytes: int,
             tls: HATls | None = None) -> tuple[float, float]:
    """(master append msgs/s, slave catch-up msgs/s) for `volume` bytes of 1 KiB records."""
    name = "tls-" if tls else ""
    master = open_store(root / f"{name}master", FlushMode.ASYNC)
    slave = open_store(root / f"{name}slave", FlushMode.ASYNC)
    raw = one_kib_record("bench") * 256
    began = time.perf_counter()
    for n in range(volume // len(raw)):
        master.append_batch("bench", n % 8, raw, 256)
    appended = volume / (time.perf_counter() - began)
    config = HAConfig(sync=False, transfer_batch_bytes=batch_bytes, tls=tls)

    async def run() -> float:
        server = await start_master(master, config, {0})
        client = HAClient(slave, 1, f"127.0.0.1:{server.port}", config)
        began = time.perf_counter()
        client.start()
        end = master.commitlog_max_offset()
        while slave.commitlog_max_offset() < end:
            await asyncio.sleep(0.005)   # polling the measured end, not synchronisation
        elapsed = time.perf_counter() - began
        await client.stop()
        await server.stop()
        return end / elapsed

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        fetched = runner.run(run())
    assert master.wait_dispatched(600) and slave.wait_dispatched(600)
    master.shutdown()
    slave.shutdown()
    shutil.rmtree(root / f"{name}master")
    shutil.rmtree(root / f"{name}slave")
    return appended / 1024, fetched / 1024


def produce(root: Path, appenders: int, seconds: float, replicated: bool,
            tls: HATls | None = None) -> float:
    shutil.rmtree(root / "p-master", ignore_errors=True)
    shutil.rmtree(root / "p-slave", ignore_errors=True)
    master = open_store(root / "p-master", FlushMode.SYNC)
    slave = open_store(root / "p-slave", FlushMode.SYNC) if replicated else None
    raw = one_kib_record("bench")
    config = HAConfig(min_in_sync_replicas=2, tls=tls)
    count = 0

    async def appender(slot: int, until: float) -> None:
        nonlocal count
        while time.perf_counter() < until:
            result = await master.append_batch_async("bench", slot % 8, raw, 1)
            assert result.status is AppendStatus.PUT_OK, result.status
            count += 1

    async def run() -> float:
        server = client = None
        if replicated:
            server = await start_master(master, config, {0, 1})
            client = HAClient(slave, 1, f"127.0.0.1:{server.port}", config)
            client.start()
            while not server.connected:
                await asyncio.sleep(0.005)   # polling the connection, not synchronisation
        began = time.perf_counter()
        await asyncio.gather(*(appender(n, began + seconds) for n in range(appenders)))
        elapsed = time.perf_counter() - began
        if replicated:
            await client.stop()
            await server.stop()
        return count / elapsed

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        rate = runner.run(run())
    master.shutdown()
    if slave is not None:
        slave.shutdown()
    return rate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="32 MiB, 2 s per produce figure")
    parser.add_argument("--volume-mib", type=int, default=256)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--appenders", type=int, default=64)
    parser.add_argument("--batch-kib", type=int, default=256, help="ha transfer batch (KiB)")
    parser.add_argument("--dir", type=Path, default=Path(".data/bench-replication"))
    args = parser.parse_args()
    if args.quick:
        args.volume_mib, args.seconds = 32, 2.0
    args.dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(dir=args.dir))
    volume = args.volume_mib << 20
    try:
        wire = asyncio.run(tcp_rate(volume, args.batch_kib << 10))
        appended, fetched = catch_up(root, volume, args.batch_kib << 10)
        print(f"catch-up of {args.volume_mib} MiB of 1 KiB records over the HA stream "
              f"({args.batch_kib} KiB frames, loopback): {fetched:,.0f} msgs/s = "
              f"{fetched * 1024 / 1e6:,.0f} MB/s; the master appended them at {appended:,.0f} "
              f"msgs/s (ASYNC_FLUSH, batches of 256) -> {fetched / appended:.0%}; raw asyncio "
              f"TCP on loopback, same frames: {wire / 1e6:,.0f} MB/s")
        single = produce(root, args.appenders, args.seconds, replicated=False)
        synced = produce(root, args.appenders, args.seconds, replicated=True)
        print(f"SYNC_FLUSH, {args.appenders} asyncio appenders, 1 msg per append: single store "
              f"{single:,.0f} msgs/s; SYNC_MASTER with one in-sync slave over the stream "
              f"(min_in_sync_replicas 2; master, slave and appenders on one loop and one GIL) "
              f"{synced:,.0f} msgs/s = {synced / single:.0%} of the single store")
        tls = stream_tls(root)
        _, fetched_tls = catch_up(root, volume, args.batch_kib << 10, tls)
        synced_tls = produce(root, args.appenders, args.seconds, replicated=True, tls=tls)
        print(f"over mutually authenticated TLS (same run): catch-up {fetched_tls:,.0f} msgs/s "
              f"= {fetched_tls * 1024 / 1e6:,.0f} MB/s ({fetched_tls / fetched:.0%} of "
              f"plaintext); SYNC_MASTER produce {synced_tls:,.0f} msgs/s "
              f"({synced_tls / synced:.0%} of plaintext)")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
