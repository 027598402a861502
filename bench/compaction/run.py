"""Compaction benchmark: how fast a pass reads its input, and what it costs concurrent produce.

    uv run --frozen python -m bench.compaction [--quick] [--dir .data/bench-compaction]

A compacted queue is filled with keyed records (--records over --keys, 512 B each); then
one pass of the store's compactor (store/compaction.py) runs with no I/O budget: its input
throughput (MB/s of records read) is printed beside the same disk's raw sequential write and
read rates measured in the same run (a 256 MiB file written with one fsync, then read back
with the page cache dropped for it). The pass reads header and properties of each record from
the CommitLog, which is mostly in the page cache right after the fill, as on a broker
compacting recent data.

Then the cost to produce: one thread appends one-message batches (ASYNC flush) to another
topic at a fixed rate while (a) nothing else runs, (b) a pass with the default budget
(32 MiB/s) runs, (c) a pass with no budget runs; p50 / p99 / max append latency of each.

Then the disk reclaimed (store/relocation.py, copy-forward): the same records, a tenth of
the keys written once at the start and never again (cold keys), the rest updated throughout,
in 8 MiB segments with every finished segment past the global retention age: the CommitLog's
size after a compaction pass alone (the same-run peer: what compaction reclaimed before
copy-forward), then after the copy-forward and the retention run that follows it, with the
bytes copied and the time taken. `--reclaim-only` prints only this part.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make `tidemq` and the repo importable
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tidemq.broker.store import FlushMode, MessageStore, StoreConfig
from tidemq.broker.store.compaction import CompactionPolicy
from tidemq.broker.store.retention import QueueRetention
from tidemq.common import record

from bench.store.run import raw_write_bandwidth

HOST = record.pack_host("127.0.0.1", 10911)
TOPIC, OTHER = "bench-compacted", "bench-produce"
RECORD = 512
RAW_FILE = 256 << 20


def keyed_records(count: int, keys: int, first: int = 0) -> bytes:
    out = []
    for n in range(first, first + count):
        probe = record.encode_message(record.OutgoingMessage(TOPIC, b"x", keys=[f"k{n % keys}"]))
        body = os.urandom(max(1, RECORD - len(probe[0]) + 1))
        out.append(record.encode_message(record.OutgoingMessage(
            TOPIC, body, keys=[f"k{n % keys}"]))[0])
    return b"".join(out)


def raw_rates(directory: Path) -> tuple[float, float]:
    """(sequential write MB/s with one fsync, sequential read MB/s, cache dropped)."""
    write = raw_write_bandwidth(directory, RAW_FILE, keep=True) / 1e6
    path = directory / "raw-write"
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    began = time.perf_counter()
    position = 0
    while os.pread(fd, 1 << 20, position):
        position += 1 << 20
    read = RAW_FILE / (time.perf_counter() - began) / 1e6
    os.close(fd)
    path.unlink()
    return write, read


def open_store(directory: Path, budget: int) -> MessageStore:
    store = MessageStore(StoreConfig(
        data_dir=directory, segment_size=256 << 20, flush_mode=FlushMode.ASYNC,
        index_slots=500_000, index_entries=4_000_000, compaction_interval_ms=3_600_000,
        compaction_io_bytes_s=budget), HOST)
    store.start()
    policy = CompactionPolicy(min_lag_ms=0, delete_retention_ms=0)
    store.compactor.topic_policy = lambda topic: policy if topic == TOPIC else None
    return store


def fill(store: MessageStore, records: int, keys: int) -> int:
    written = 0
    for first in range(0, records, 1000):
        batch = keyed_records(min(1000, records - first), keys, first)
        store.append_batch(TOPIC, 0, batch, min(1000, records - first))
        written += len(batch)
    assert store.wait_dispatched(600)
    return written


def produce_latencies(store: MessageStore, rate: int, stop: threading.Event,
                      out: list[float]) -> None:
    raw = record.encode_message(record.OutgoingMessage(OTHER, b"p" * 400))[0]
    interval, next_at = 1 / rate, time.perf_counter()
    while not stop.is_set():
        began = time.perf_counter()
        store.append_batch(OTHER, 0, raw, 1)
        out.append(time.perf_counter() - began)
        next_at += interval
        time.sleep(max(0.0, next_at - time.perf_counter()))


def measure(directory: Path, records: int, keys: int, budget: int | None, rate: int,
            idle_s: float) -> dict:
    """Fill, then run produce at `rate` alongside a pass (budget None: no pass, `idle_s`)."""
    shutil.rmtree(directory, ignore_errors=True)
    store = open_store(directory, budget or 0)
    try:
        written = fill(store, records, keys)
        latencies: list[float] = []
        stop = threading.Event()
        producer = threading.Thread(target=produce_latencies,
                                    args=(store, rate, stop, latencies))
        producer.start()
        time.sleep(0.5)
        latencies.clear()
        began = time.perf_counter()
        removed = 0
        if budget is None:
            time.sleep(idle_s)
        else:
            store.compactor.bytes_read = 0
            removed = store.compactor.run_once()
        elapsed = time.perf_counter() - began
        stop.set()
        producer.join()
        read = store.compactor.bytes_read
        latencies.sort()
        return {"written": written, "seconds": elapsed, "read": read, "removed": removed,
                "p50": statistics.median(latencies) * 1e3,
                "p99": latencies[int(len(latencies) * 0.99)] * 1e3,
                "max": latencies[-1] * 1e3, "samples": len(latencies)}
    finally:
        store.shutdown()
        shutil.rmtree(directory, ignore_errors=True)


RECLAIM_SEGMENT = 8 << 20


def log_bytes(store: MessageStore) -> int:
    return sum(segment.path.stat().st_size for segment in store.commitlog.segments)


def reclaim(directory: Path, records: int, keys: int) -> dict:
    """Fill a compacted queue whose cold keys sit in the first segment, compact, then
    copy forward and run retention; the CommitLog's size at each step."""
    shutil.rmtree(directory, ignore_errors=True)
    store = MessageStore(StoreConfig(
        data_dir=directory, segment_size=RECLAIM_SEGMENT, flush_mode=FlushMode.ASYNC,
        index_slots=500_000, index_entries=4_000_000, compaction_interval_ms=3_600_000,
        compaction_io_bytes_s=0, retention_hours=0.0, delete_when_hour=None,
        retention_check_interval_ms=3_600_000, disk_max_used_ratio=1.0, disk_full_ratio=1.0,
    ), HOST)
    store.start()
    try:
        policy = CompactionPolicy(min_lag_ms=0, delete_retention_ms=0)
        store.compactor.topic_policy = lambda topic: policy if topic == TOPIC else None
        store.retention.topic_policy = lambda topic: (
            QueueRetention(holds=True, compact=True) if topic == TOPIC else QueueRetention())
        cold = keys // 10
        store.append_batch(TOPIC, 0, keyed_records(cold, keys), cold)
        hot = keys - cold
        for first in range(0, records - cold, 1000):
            count = min(1000, records - cold - first)
            batch = b"".join(record.encode_message(record.OutgoingMessage(
                TOPIC, bytes([n % 251]) * RECORD, keys=[f"k{cold + n % hot}"]))[0]
                for n in range(first, first + count))
            store.append_batch(TOPIC, 0, batch, count)
        assert store.wait_dispatched(600)
        written = log_bytes(store)
        store.compactor.run_once()
        store.retention.run_once()
        compacted = log_bytes(store)
        began = time.perf_counter()
        relocated = store.relocator.run_once()
        elapsed = time.perf_counter() - began
        store.retention.run_once()
        return {"written": written, "compacted": compacted, "after": log_bytes(store),
                "relocated": relocated, "relocated_bytes": store.relocator.bytes_relocated,
                "seconds": elapsed, "cold": cold}
    finally:
        store.shutdown()
        shutil.rmtree(directory, ignore_errors=True)


def print_reclaim(figures: dict, records: int, keys: int) -> None:
    mib = 1 << 20
    print(f"disk reclaimed, {records} records over {keys} keys ({figures['cold']} cold, "
          f"written once first), {RECLAIM_SEGMENT // mib} MiB segments, CommitLog on disk:")
    print(f"  after writing                          {figures['written'] / mib:8.1f} MiB")
    print(f"  after compaction alone (peer)          {figures['compacted'] / mib:8.1f} MiB")
    print(f"  after copy-forward + retention         {figures['after'] / mib:8.1f} MiB  "
          f"({(figures['compacted'] - figures['after']) / mib:.1f} MiB more reclaimed; "
          f"{figures['relocated']} records, {figures['relocated_bytes'] / mib:.2f} MiB "
          f"copied in {figures['seconds']:.2f} s)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="50 000 records instead of 400 000")
    parser.add_argument("--records", type=int, default=0)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rate", type=int, default=2000, help="concurrent produce, msgs/s")
    parser.add_argument("--dir", default="", help="data directory (default: a temporary one)")
    parser.add_argument("--reclaim-only", action="store_true",
                        help="only the disk reclaimed by copy-forward")
    args = parser.parse_args()
    records = args.records or (50_000 if args.quick else 400_000)
    base = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench-compaction-"))
    base.mkdir(parents=True, exist_ok=True)
    try:
        if args.reclaim_only:
            print_reclaim(reclaim(base / "store", records, args.keys), records, args.keys)
            return
        write_mb_s, read_mb_s = raw_rates(base)
        print(f"disk, same run: sequential write {write_mb_s:.0f} MB/s (one fsync), "
              f"sequential read {read_mb_s:.0f} MB/s (page cache dropped)")
        unlimited = measure(base / "store", records, args.keys, 0, args.rate, 0)
        input_mb = unlimited["read"] / 1e6
        print(f"compaction pass, no budget: {records} records of {RECORD} B over {args.keys} "
              f"keys, {input_mb:.1f} MB read in {unlimited['seconds']:.2f} s = "
              f"{input_mb / unlimited['seconds']:.1f} MB/s of input "
              f"({input_mb / unlimited['seconds'] / read_mb_s:.2f}x the raw read rate); "
              f"{unlimited['removed']} records removed")
        idle = measure(base / "store", records, args.keys, None, args.rate,
                       max(2.0, unlimited["seconds"]))
        budgeted = measure(base / "store", records, args.keys, 32 << 20, args.rate, 0)
        print(f"concurrent produce at {args.rate} msgs/s (one-message appends, ASYNC flush), "
              "append latency ms:")
        for name, figures in (("no compaction", idle), ("pass at the default 32 MiB/s budget",
                                                          budgeted),
                              ("pass with no budget", unlimited)):
            print(f"  {name:38s} p50 {figures['p50']:.3f}  p99 {figures['p99']:.3f}  "
                  f"max {figures['max']:.2f}  ({figures['samples']} appends, "
                  f"{figures['seconds']:.1f} s)")
        print_reclaim(reclaim(base / "store", records, args.keys), records, args.keys)
    finally:
        if not args.dir:
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
