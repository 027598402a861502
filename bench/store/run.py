"""Store benchmark: append/read/recovery figures next to the same disk's raw bandwidth.

    uv run --frozen python -m bench.store [--quick] [--backlog-mib 1024] [--dir .data/bench-store]

Every figure is printed together with the baseline measured in the same run: appends against
a plain write+fsync loop of the same bytes, SYNC_FLUSH group commit against one fsync per
message, backlog reads against a plain read of the same segment files.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import sys
import tempfile
import threading
import time
from collections import deque
from pathlib import Path

import uvloop

if __package__ in (None, ""):  # run as a script: make `tidemq` and the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tidemq.broker.store import FlushMode, MessageStore, StoreConfig
from tidemq.broker.store.affinity import pin_threads, restore_threads
from tidemq.broker.store.loops import ACCELERATED
from tidemq.common import record

RECORD_TARGET = 1024
HOST = record.pack_host("127.0.0.1", 10911)


def one_kib_record(topic: str) -> bytes:
    probe = record.encode_message(record.OutgoingMessage(topic, b"", tags="bench"))[0]
    body = os.urandom(RECORD_TARGET - len(probe))
    raw = record.encode_message(record.OutgoingMessage(topic, body, tags="bench"))[0]
    assert len(raw) == RECORD_TARGET
    return raw


def rss_anon_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def open_store(directory: Path, segment_size: int, mode: FlushMode,
               cpu_affinity: frozenset[int] | None = None) -> MessageStore:
    store = MessageStore(StoreConfig(data_dir=directory, segment_size=segment_size,
                                     flush_mode=mode, index_slots=500_000,
                                     index_entries=2_000_000, cpu_affinity=cpu_affinity), HOST)
    store.start()
    if store.commitlog.allocator is not None:  # a broker warms up before it takes traffic
        store.commitlog.allocator.wait_idle(120)
    return store


def raw_write_bandwidth(directory: Path, total: int, keep: bool = False) -> float:
    """A plain write loop of `total` bytes in 1 MiB writes, then fsync: bytes/s. `keep`: the
    file stays, as `directory / "raw-write"`, for a read of it."""
    chunk = os.urandom(1 << 20)
    path = directory / "raw-write"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    began = time.perf_counter()
    for _ in range(total // len(chunk)):
        os.write(fd, chunk)
    os.fsync(fd)
    elapsed = time.perf_counter() - began
    os.close(fd)
    if not keep:
        path.unlink()
    return total / elapsed


def fsync_per_message(directory: Path, raw: bytes, seconds: float,
                      prewritten: bool = False) -> float:
    """The naive SYNC baseline: write one record, fdatasync, repeat. Messages/s. A plain log
    appends to a growing file (every fdatasync also commits the new size); `prewritten`
    writes into blocks already allocated and written, as the store's warmed segments are."""
    fd = os.open(directory / "fsync-each", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    if prewritten:
        os.write(fd, bytes(int(seconds * 20_000) * len(raw)))
        os.fsync(fd)
    count, began, position = 0, time.perf_counter(), 0
    while time.perf_counter() - began < seconds:
        os.pwrite(fd, raw, position)
        os.fdatasync(fd)
        count += 1
        position += len(raw)
    elapsed = time.perf_counter() - began
    os.close(fd)
    os.unlink(directory / "fsync-each")
    return count / elapsed


def append_rate(directory: Path, segment_size: int, mode: FlushMode, batch: int,
                total_bytes: int, seconds: float) -> dict[str, float]:
    """One appender thread, dispatcher and flusher running as in production."""
    store = open_store(directory, segment_size, mode)
    raw = one_kib_record("bench")
    payload = raw * batch
    count, began = 0, time.perf_counter()
    thread_cpu, process_cpu = time.thread_time(), time.process_time()
    kernel = resource.getrusage(resource.RUSAGE_THREAD).ru_stime
    while count * RECORD_TARGET < total_bytes and time.perf_counter() - began < seconds:
        store.append_batch("bench", 0, payload, batch)
        count += batch
    appended = time.perf_counter() - began
    thread_cpu = time.thread_time() - thread_cpu
    kernel = resource.getrusage(resource.RUSAGE_THREAD).ru_stime - kernel
    store.commitlog.flush()
    durable = time.perf_counter() - began
    store.wait_dispatched(600)
    process_cpu = time.process_time() - process_cpu
    store.shutdown()
    return {"rate": count / appended, "durable": count / durable,
            "append_cpu_us": thread_cpu / count * 1e6, "total_cpu_us": process_cpu / count * 1e6,
            "append_kernel_us": kernel / count * 1e6}


def group_commit_rate(directory: Path, segment_size: int, appenders: int, seconds: float,
                      cpu_affinity: frozenset[int] | None = None) -> tuple[float, int, float]:
    """SYNC_FLUSH, `appenders` threads appending one message per blocking call (each handed
    to the store's loop thread and its LoopAppender, the one acknowledgement point): (msgs/s,
    fsyncs, appends per acknowledging fsync)."""
    store = open_store(directory, segment_size, FlushMode.SYNC, cpu_affinity)
    raw = one_kib_record("bench")
    counts = [0] * appenders
    stop = threading.Event()

    def run(slot: int) -> None:
        while not stop.is_set():
            store.append_batch("bench", slot % 8, raw, 1)
            counts[slot] += 1

    threads = [threading.Thread(target=run, args=(n,)) for n in range(appenders)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    flusher = store.flusher
    per_round = flusher.round_requests / max(flusher.rounds, 1)
    store.shutdown()
    return sum(counts) / elapsed, flusher.fsyncs, per_round


def async_group_commit_rate(directory: Path, segment_size: int, appenders: int,
                            seconds: float) -> tuple[float, float, float]:
    """SYNC_FLUSH, `appenders` asyncio tasks on one uvloop event loop (the broker's) each
    awaiting one-message `append_batch_async` calls, as the broker's Send handlers do:
    (msgs/s, appends per fsync, CPU µs per message of the loop's thread)."""
    store = open_store(directory, segment_size, FlushMode.SYNC)
    raw = one_kib_record("bench")
    count = 0

    async def appender(slot: int, until: float) -> None:
        nonlocal count
        while time.perf_counter() < until:
            await store.append_batch_async("bench", slot % 8, raw, 1)
            count += 1

    async def run() -> tuple[float, float]:
        began, cpu = time.perf_counter(), time.thread_time()
        await asyncio.gather(*(appender(n, began + seconds) for n in range(appenders)))
        return time.perf_counter() - began, time.thread_time() - cpu

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        elapsed, loop_cpu = runner.run(run())
    flusher = store.flusher
    per_round = flusher.round_requests / max(flusher.rounds, 1)
    store.shutdown()
    return count / elapsed, per_round, loop_cpu / max(count, 1) * 1e6


def thread_wake_ceiling(directory: Path, raw: bytes, appenders: int, seconds: float) -> float:
    """What the interpreter allows for 1-message appends by `appenders` threads: each thread
    only queues a lock and sleeps on it; one thread writes the round's bytes, fdatasyncs and
    releases the round's locks. No store code at all. Messages/s."""
    fd = os.open(directory / "wake-ceiling", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    pending: deque[threading.Lock] = deque()
    counts = [0] * appenders
    stop = threading.Event()

    def appender(slot: int) -> None:
        while not stop.is_set():
            wakeup = threading.Lock()
            wakeup.acquire()
            pending.append(wakeup)
            wakeup.acquire()
            counts[slot] += 1

    def writer() -> None:
        while not stop.is_set() or pending:
            batch = [pending.popleft() for _ in range(len(pending))]
            os.write(fd, raw * max(1, len(batch)))
            os.fdatasync(fd)
            for wakeup in batch:
                wakeup.release()

    threads = [threading.Thread(target=appender, args=(n,)) for n in range(appenders)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    flusher = threading.Thread(target=writer)
    flusher.start()
    stop.wait(seconds)
    stop.set()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - began
    flusher.join()
    os.close(fd)
    return sum(counts) / elapsed


def backlog_figures(directory: Path, segment_size: int, backlog: int) -> None:
    store = open_store(directory, segment_size, FlushMode.ASYNC)
    raw = one_kib_record("bench")
    payload = raw * 256
    rss_before = rss_anon_mib()
    began = time.perf_counter()
    rss_half = None
    while store.commitlog_max_offset() < backlog:
        store.append_batch("bench", 0, payload, 256)
        if rss_half is None and store.commitlog_max_offset() >= backlog // 2:
            store.wait_dispatched(600)
            rss_half = rss_anon_mib()
    store.wait_dispatched(600)
    build = time.perf_counter() - began
    rss_after = rss_anon_mib()
    size = store.commitlog_max_offset()
    messages = store.max_offset("bench", 0)
    print(f"  backlog: {size / 2**20:.0f} MiB, {messages} msgs written+dispatched in {build:.1f} s "
          f"({messages / build:,.0f} msgs/s end to end)")
    print(f"  memory (RssAnon, the Python heap; mapped file pages are page cache): "
          f"{rss_before:.0f} MiB before, {rss_half:.0f} MiB at half, {rss_after:.0f} MiB after "
          f"the backlog")

    began, offset, read_bytes = time.perf_counter(), 0, 0
    while offset < messages:
        result = store.get_messages("bench", 0, offset, max_messages=1024, max_bytes=8 << 20)
        read_bytes += len(result.records)
        offset = result.next_begin_offset
    elapsed = time.perf_counter() - began
    store.shutdown()
    began, raw_bytes = time.perf_counter(), 0
    for segment in sorted((directory / "commitlog").iterdir()):
        with open(segment, "rb", buffering=0) as handle:
            while chunk := handle.read(8 << 20):
                raw_bytes += len(chunk)
                if raw_bytes >= size:
                    break
        if raw_bytes >= size:
            break
    raw_elapsed = time.perf_counter() - began
    print(f"  read via get_messages: {read_bytes / elapsed / 1e6:,.0f} MB/s "
          f"({messages / elapsed:,.0f} msgs/s); raw read of the same files: "
          f"{raw_bytes / raw_elapsed / 1e6:,.0f} MB/s -> {read_bytes / elapsed / (raw_bytes / raw_elapsed):.0%}")

    store = open_store(directory, segment_size, FlushMode.ASYNC)
    report = store.startup
    store.shutdown()
    print(f"  clean restart (normal recovery, CRC check of the last segments): "
          f"{report.elapsed_ms:.0f} ms for {report.commitlog.records_scanned} records")
    (directory / "checkpoint").unlink()
    shutil.rmtree(directory / "consumequeue")
    shutil.rmtree(directory / "index")
    (directory / "abort").write_bytes(b"crashed")
    store = open_store(directory, segment_size, FlushMode.ASYNC)
    report = store.startup
    store.shutdown()
    gib = size / 2**30
    print(f"  abnormal recovery with no checkpoint (CRC scan of the whole log + rebuild of "
          f"consume queue and index): {report.elapsed_ms / 1000:.1f} s = "
          f"{report.elapsed_ms / 1000 / gib:.1f} s/GiB")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small volumes, a few seconds each")
    parser.add_argument("--backlog-mib", type=int, default=None, help="read/recovery backlog")
    parser.add_argument("--segment-mib", type=int, default=1024, help="CommitLog segment size")
    parser.add_argument("--dir", type=Path, default=Path(".data/bench-store"))
    parser.add_argument("--appenders", type=int, default=64, help="SYNC_FLUSH group commit")
    args = parser.parse_args(argv)
    backlog = (args.backlog_mib or (128 if args.quick else 1024)) << 20
    volume = (64 if args.quick else 512) << 20
    seconds = 3.0 if args.quick else 10.0
    segment_size = args.segment_mib << 20
    args.dir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="run-", dir=args.dir))
    try:
        raw_bw = raw_write_bandwidth(root, volume)
        print(f"raw sequential write (1 MiB writes + fsync, {volume >> 20} MiB): "
              f"{raw_bw / 1e6:,.0f} MB/s = {raw_bw / RECORD_TARGET:,.0f} x 1 KiB/s")
        print("append, 1 KiB records, one appender (append calls / until flushed to disk):")
        for mode in (FlushMode.ASYNC, FlushMode.SYNC):
            for batch in (1, 16, 256):
                run_dir = root / f"append-{mode.name}-{batch}"
                fig = append_rate(run_dir, segment_size, mode, batch, volume, seconds)
                shutil.rmtree(run_dir)
                rate = fig["rate"]
                print(f"  {mode.value:<10} batch {batch:>3}: {rate:>9,.0f} msgs/s "
                      f"{rate * RECORD_TARGET / 1e6:>6,.0f} MB/s = {rate * RECORD_TARGET / raw_bw:>4.0%}"
                      f" of raw write; durable {fig['durable']:>9,.0f} msgs/s; CPU/msg: append "
                      f"{fig['append_cpu_us']:.2f} us (= {1e6 / fig['append_cpu_us']:,.0f}/s per "
                      f"core; of it kernel {fig['append_kernel_us']:.2f} us), +dispatch "
                      f"{fig['total_cpu_us']:.2f} us")
        raw = one_kib_record("bench")
        fsync_s = min(seconds, 3.0)
        before = fsync_per_message(root, raw, fsync_s)
        looped, loop_per_round, loop_cpu = async_group_commit_rate(root / "group", segment_size,
                                                                   args.appenders, seconds)
        shutil.rmtree(root / "group")
        naive = (before + fsync_per_message(root, raw, fsync_s)) / 2
        prewritten = fsync_per_message(root, raw, fsync_s, prewritten=True)
        print(f"SYNC_FLUSH, {args.appenders} concurrent appenders, 1 msg per append "
              f"(store loops in {'C' if ACCELERATED else 'Python'}):")
        print(f"  one fsync per message, a plain log append (write + fdatasync of a growing "
              f"file, mean of before and after): {naive:,.0f} msgs/s ({1e3 / naive:.3f} ms)")
        print(f"  one fsync per message into allocated, written blocks (as the store's warmed "
              f"segments): {prewritten:,.0f} msgs/s ({1e3 / prewritten:.3f} ms)")
        print(f"  {args.appenders} asyncio appenders (append_batch_async on the broker's uvloop "
              f"loop): {looped:,.0f} msgs/s -> {looped / naive:.1f}x one fsync per message "
              f"(target 20x), {looped / prewritten:.1f}x the allocated-blocks fsync; "
              f"{loop_per_round:.1f} appends per fsync; loop thread CPU {loop_cpu:.2f} us/msg "
              f"(= {1e6 / loop_cpu:,.0f}/s)")
        grouped, fsyncs, per_round = group_commit_rate(root / "group", segment_size,
                                                       args.appenders, seconds)
        shutil.rmtree(root / "group")
        print(f"  {args.appenders} appender threads (blocking append_batch, handed to the store's "
              f"loop thread): {grouped:,.0f} msgs/s ({fsyncs} fsyncs, {per_round:.1f} appends per "
              f"fsync) -> {grouped / naive:.1f}x")
        ceiling = thread_wake_ceiling(root, one_kib_record("bench"), args.appenders,
                                      min(seconds, 3.0))
        print(f"  interpreter ceiling of any thread-per-append design ({args.appenders} threads "
              f"that only queue, sleep and are woken after one write+fdatasync per round, no "
              f"store code): {ceiling:,.0f} msgs/s = {ceiling / naive:.1f}x")
        cpu = frozenset({min(os.sched_getaffinity(0))})
        pinned, _, per_round = group_commit_rate(root / "group", segment_size, args.appenders,
                                                 seconds, cpu)
        shutil.rmtree(root / "group")
        previous = pin_threads(cpu)
        try:
            pinned_ceiling = thread_wake_ceiling(root, one_kib_record("bench"), args.appenders,
                                                 min(seconds, 3.0))
        finally:
            restore_threads(previous)
        print(f"  the same with StoreConfig.cpu_affinity={set(cpu)} (opt-in; every thread of the "
              f"process on one CPU): {pinned:,.0f} msgs/s -> {pinned / naive:.1f}x "
              f"({per_round:.1f} appends per fsync); ceiling loop pinned alike: "
              f"{pinned_ceiling:,.0f} msgs/s = {pinned_ceiling / naive:.1f}x")
        print(f"backlog of {backlog >> 20} MiB (segment {args.segment_mib} MiB):")
        backlog_figures(root / "backlog", segment_size, backlog)
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
