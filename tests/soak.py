"""Pop-churn soak (`make soak`, docs/consumption.md "Pop state over time"): a real cluster (etcd,
config center, two name servers, one broker) under seeded pop / ack / change-invisible /
invisibility-timeout churn plus retention (72 s) and a compacted topic (a steady stream of
updates over a bounded key set, some of them tombstones: compaction and copy-forward run all
along), sampling the broker's RSS, anonymous memory, open files, its pop state (handles in
flight and remembered expired, revive-log records past the last snapshot), its data directory
and CommitLog segments, and the compacted topic (its live records, as a pull reads them; the
compaction metrics) at intervals; the broker is SIGKILLed and restarted at the end (and every
`--restart-every-s`) to time its start-up and count the revive records it replays.

The verdict is a slope check, not a timing assertion: least-squares lines through the
anonymous-memory and the data-directory samples after warm-up, whose growth per minute must
stay under `--max-growth-mib-per-min` and `--max-data-growth-mib-per-min`; the compacted
topic's live records must stay under their bound (its keys plus what its lag and a pass leave
unswept: `compacted_live_bound`), and compaction must have removed records after warm-up. It
fails when fewer than MIN_SAMPLES samples after warm-up went into the line, or when the broker's
pop-state or compaction metrics or the compacted topic's records were not found (nothing was
judged).

    uv run --frozen python -m tests.soak --duration-s 3600 --seed 7
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import re
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

TOPIC, GROUP = "SoakPop", "g-soak"
BROKER = "broker-a"
COMPACTED, COMPACTED_QUEUES = "SoakCompacted", 2
COMPACTION_LAG_MS, TOMBSTONE_KEPT_MS = 5_000, 10_000   # min.compaction.lag.ms, delete.retention.ms
COMPACTION_INTERVAL_MS = 2_000
TOMBSTONE_SHARE = 0.05
SEGMENT_MIB = 4.0   # small segments: retention and copy-forward free one every few seconds
MIB = 1 << 20
MIN_SAMPLES = 6  # samples after warm-up a slope is judged from, at least


@dataclass
class Sample:
    at_s: float
    rss_mib: float
    anon_mib: float
    open_files: int
    in_flight: float
    expired: float
    revive_tail: float
    data_mib: float
    produced: int
    popped: int
    incarnation: int = 0  # restarts before this sample
    segments: int = 0          # CommitLog segment files
    c_live: int = -1           # records a pull of the compacted topic reads (-1: not read)
    c_written: int = 0         # its queues' offsets: updates stored
    c_removed: float = -1      # the broker's compaction metrics (-1: not found)
    c_passes: float = -1
    relocated_segments: float = -1


@dataclass
class SoakResult:
    samples: list[Sample] = field(default_factory=list)
    restarts: list[tuple[float, float, int]] = field(default_factory=list)  # at, start s, replayed
    slope_mib_per_min: float = 0.0
    handles_slope_per_min: float = 0.0
    judged: int = 0  # samples after warm-up that went into the slopes
    warmup_s: float = 60.0
    data_slope_mib_per_min: float = 0.0
    compacted_live_bound: int = 0   # 0: no compacted topic in this run
    errors: list[str] = field(default_factory=list)


def _proc_status(pid: int) -> tuple[float, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon"):
            fields[name] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("RssAnon", 0.0)


def _metrics(port: int) -> dict[str, float]:
    wanted = ("tidemq_broker_pop_handles", "tidemq_broker_pop_revive_tail_records",
              "tidemq_broker_compaction_removed_records_total",
              "tidemq_broker_compaction_queue_passes_total",
              "tidemq_broker_compaction_relocated_segments_total")
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith(wanted):
            name, value = line.rsplit(" ", 1)
            found[name] = float(value)
    return found


def _dir_mib(path: Path) -> float:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(root, name)).st_size
    return total / MIB


def slope_per_min(points: list[tuple[float, float]],
                  groups: list[int] | None = None) -> tuple[float, int]:
    """Least-squares slope of (seconds, value) points, per minute, and how many points it was
    fitted to; with `groups`, one line per group sharing the slope (each its own intercept: a
    restarted process starts lower), a group of one point judging nothing."""
    if groups is None:
        groups = [0] * len(points)
    cov = var = 0.0
    judged = 0
    for group in set(groups):
        mine = [p for p, g in zip(points, groups, strict=True) if g == group]
        if len(mine) < 2:
            continue
        judged += len(mine)
        mean_t = sum(t for t, _ in mine) / len(mine)
        mean_v = sum(v for _, v in mine) / len(mine)
        var += sum((t - mean_t) ** 2 for t, _ in mine)
        cov += sum((t - mean_t) * (v - mean_v) for t, v in mine)
    return (cov / var * 60 if var else 0.0), judged


def _grew(samples: list[Sample], value) -> float:
    """How much a counter of the broker grew over `samples` (a restart starts it at 0 again:
    only growth between samples of one broker process counts)."""
    return sum(max(0.0, value(b) - value(a)) for a, b in pairwise(samples)
               if a.incarnation == b.incarnation and value(a) >= 0 and value(b) >= 0)


def compacted_failures(result: SoakResult, after: list[Sample]) -> list[str]:
    """The compacted topic's part of the verdict: its live records read after warm-up and
    under their bound, and compaction removing records after warm-up."""
    if not result.compacted_live_bound:
        return []
    found: list[str] = []
    read = [s for s in after if s.c_live >= 0]
    if not read:
        found.append("the compacted topic's records were not read after warm-up")
    elif (most := max(s.c_live for s in read)) > result.compacted_live_bound:
        found.append(f"the compacted topic holds {most} live records after warm-up (bound "
                     f"{result.compacted_live_bound}: its keys plus what its lag leaves)")
    if any(s.c_removed < 0 or s.c_passes < 0 or s.relocated_segments < 0 for s in after):
        found.append("the broker's compaction metrics were not found in some samples")
    elif not _grew(after, lambda s: s.c_removed):
        found.append("compaction removed no record after warm-up")
    return found


def failures(result: SoakResult, max_growth_mib_per_min: float,
             max_data_growth_mib_per_min: float = 2.0) -> list[str]:
    """Why the soak fails, if it does: too few samples judged, the pop-state metrics or a
    restart's replay line not found (read as -1), memory or the data directory growing faster
    than their bounds, or the compacted topic not kept compacted (`compacted_failures`)."""
    found: list[str] = []
    if result.judged < MIN_SAMPLES:
        found.append(f"{result.judged} samples after warm-up went into the slope (at least "
                     f"{MIN_SAMPLES}): nothing to judge")
    if any(s.in_flight < 0 or s.expired < 0 for s in result.samples):
        found.append("the broker's pop-handle metrics were not found in some samples")
    if not result.restarts or any(replayed < 0 for _, _, replayed in result.restarts):
        found.append("a restart's 'pop state replayed' log line was not found (or no restart)")
    if result.slope_mib_per_min > max_growth_mib_per_min:
        found.append(f"anonymous memory grows {result.slope_mib_per_min:.2f} MiB/min after "
                     f"warm-up (bound {max_growth_mib_per_min} MiB/min)")
    if result.data_slope_mib_per_min > max_data_growth_mib_per_min:
        found.append(f"the data directory grows {result.data_slope_mib_per_min:.2f} MiB/min "
                     f"after warm-up (bound {max_data_growth_mib_per_min} MiB/min)")
    return found + compacted_failures(result, after_warmup(result))


def after_warmup(result: SoakResult, warmup_s: float | None = None) -> list[Sample]:
    """The samples taken at least the warm-up after their broker process started: the run's
    start for the first process, its restart for the others. A restarted process refills its
    time-bounded state (the revive moves' idempotence keys, allocator pools) as the first did,
    so judging it from its restart measures that refill, not growth (the hour run of
    docs/consumption.md: each process rose for about 10 minutes, then stayed level)."""
    warmup_s = result.warmup_s if warmup_s is None else warmup_s
    started = [0.0, *(at for at, _, _ in result.restarts)]
    return [s for s in result.samples
            if s.incarnation < len(started) and s.at_s - started[s.incarnation] >= warmup_s]


def compacted_live_bound(keys: int, rate: int) -> int:
    """Live records a compacted topic of `keys` keys written at `rate` updates/s may hold:
    one per key, plus the updates younger than min.compaction.lag.ms and those a pass has not
    swept yet (two intervals, 20 s of slack for a loaded machine)."""
    return keys + rate * (COMPACTION_LAG_MS + 2 * COMPACTION_INTERVAL_MS + 20_000) // 1000


def _count_live(consumer, queues: int) -> tuple[int, int]:
    """(records a pull reads, offsets written) over the compacted topic's queues."""
    from tidemq.client.message import MessageQueue

    live = written = 0
    for queue_id in range(queues):
        mq, offset = MessageQueue(COMPACTED, BROKER, queue_id), 0
        while True:
            pulled = consumer.pull(mq, offset, 256)
            live += len(pulled.messages)
            if pulled.next_offset >= pulled.max_offset or pulled.next_offset <= offset:
                written += pulled.max_offset
                break
            offset = pulled.next_offset
    return live, written


@contextlib.contextmanager
def _cluster(workdir: Path, env: dict[str, str], segment_mib: float):
    """`running_cluster` with one broker on `segment_mib` CommitLog segments (its flag comes
    after the test flags' 16 MiB, so it wins)."""
    from tests.support.cluster import process_group, start_cluster
    from tests.support.etcd import start_etcd
    from tests.support.processes import start_redis

    etcd, redis = start_etcd(workdir, 1), start_redis(workdir)
    try:
        with process_group(workdir) as start:
            def start_with(module, args=None, **kwargs):
                if module == "tidemq.broker":
                    args = [*(args or []), "--segment-size-mib", f"{segment_mib:g}"]
                return start(module, args, env=env, **kwargs)

            yield start_cluster(start_with, etcd, redis, broker_names=(BROKER,))
    finally:
        redis.kill()
        etcd.kill()


def run_soak(workdir: Path, *, duration_s: float, seed: int, interval_s: float = 10.0,
             warmup_s: float = 60.0, rate: int = 1000, restart_every_s: float = 0.0,
             snapshot_interval_ms: int = 5000, expired_kept_ms: int = 30_000,
             idempotence_window_ms: int = 30_000, retention_hours: float = 0.02,
             compacted_rate: int = 100, compacted_keys: int = 1000,
             segment_mib: float = SEGMENT_MIB, out=sys.stdout) -> SoakResult:
    from tidemq.client import Message, Producer, PullConsumer, SimpleConsumer
    from tidemq.client.message import MessageQueue
    from tidemq.configclient.client import ConfigClient
    from tidemq.configclient.topics import TopicDefinitions

    from tests.support.cluster import create_topic_in_config_center, wait_for_route

    result = SoakResult(warmup_s=warmup_s)
    if compacted_rate:
        result.compacted_live_bound = compacted_live_bound(compacted_keys, compacted_rate)
    stop = threading.Event()
    counts = {"produced": 0, "popped": 0, "updates": 0}
    # What is bounded by time must reach its steady state inside the warm-up, so that what grows
    # after it is a leak: expired handles (pop_expired_kept_ms), the revive moves' idempotence
    # keys (idempotence_window_ms; both 10 min by default, 30 s in CI's short run) and the
    # CommitLog (retention: 72 s here instead of 72 h).
    env = {"TIDEMQ_POP_SNAPSHOT_INTERVAL_MS": str(snapshot_interval_ms),
           "TIDEMQ_POP_EXPIRED_KEPT_MS": str(expired_kept_ms),
           "TIDEMQ_IDEMPOTENCE_WINDOW_MS": str(idempotence_window_ms),
           "TIDEMQ_RETENTION_HOURS": str(retention_hours),
           "TIDEMQ_RETENTION_CHECK_INTERVAL_MS": "2000", "TIDEMQ_DELETE_WHEN_HOUR": "-1",
           # a shared machine's disk may be fuller than the production thresholds: the soak
           # measures churn, not the full-disk state (sends refused) or forced clean-up
           "TIDEMQ_DISK_WARN_RATIO": "0.97", "TIDEMQ_DISK_FULL_RATIO": "0.98",
           "TIDEMQ_DISK_MAX_USED_RATIO": "0.97",
           "TIDEMQ_OFFSET_FLUSH_INTERVAL_S": "1",
           "TIDEMQ_COMPACTION_INTERVAL_MS": str(COMPACTION_INTERVAL_MS)}
    with _cluster(workdir, env, segment_mib) as cluster:
        broker = cluster.brokers[BROKER]
        create_topic_in_config_center(cluster, TOPIC, 4)
        wait_for_route(cluster, TOPIC, 1)
        if compacted_rate:
            with ConfigClient(cluster.config_center.addr) as config:
                TopicDefinitions(config).create(COMPACTED, COMPACTED_QUEUES, config={
                    "cleanup.policy": "compact", "min.compaction.lag.ms": COMPACTION_LAG_MS,
                    "delete.retention.ms": TOMBSTONE_KEPT_MS})
            wait_for_route(cluster, COMPACTED, 1)

        def produce() -> None:
            prng = random.Random(seed + 1)
            with Producer(cluster.namesrv_addrs) as producer:
                batch = 50
                next_at = time.monotonic()
                while not stop.is_set():
                    messages = [Message(TOPIC, prng.randbytes(prng.randint(64, 512)))
                                for _ in range(batch)]
                    try:
                        producer.send_many(messages)
                        counts["produced"] += batch
                    except Exception as exc:  # noqa: BLE001 - a restart: keep going
                        result.errors.append(f"send: {exc}")
                        stop.wait(0.5)
                    next_at += batch / rate
                    stop.wait(max(0.0, next_at - time.monotonic()))

        def update() -> None:
            """The compacted topic: batches of 10 updates to one queue's keys (key k lives in
            queue k % COMPACTED_QUEUES), TOMBSTONE_SHARE of them tombstones."""
            urng = random.Random(seed + 3)
            with Producer(cluster.namesrv_addrs) as producer:
                batch, sent = 10, 0
                next_at = time.monotonic()
                while not stop.is_set():
                    queue_id = sent % COMPACTED_QUEUES
                    messages = []
                    for _ in range(batch):
                        key = urng.randrange(compacted_keys // COMPACTED_QUEUES) \
                            * COMPACTED_QUEUES + queue_id
                        if urng.random() < TOMBSTONE_SHARE:
                            messages.append(Message(COMPACTED, b"\0", keys=[f"key-{key}"],
                                                    properties={"KAFKA_VALUE": "null"}))
                        else:
                            messages.append(Message(COMPACTED, f"key-{key}:{sent}|".encode()
                                                    * urng.randint(4, 16), keys=[f"key-{key}"]))
                    sent += 1
                    try:
                        producer.send_batch(messages,
                                            queue=MessageQueue(COMPACTED, BROKER, queue_id))
                        counts["updates"] += batch
                    except Exception as exc:  # noqa: BLE001 - a restart: keep going
                        result.errors.append(f"update: {exc}")
                        stop.wait(0.5)
                    next_at += batch / compacted_rate
                    stop.wait(max(0.0, next_at - time.monotonic()))

        def consume() -> None:
            crng = random.Random(seed + 2)
            consumer = SimpleConsumer(cluster.namesrv_addrs, GROUP, TOPIC, timeout=10)
            try:
                while not stop.is_set():
                    try:
                        got = consumer.receive(32, invisible_duration_s=2, wait_s=1)
                        counts["popped"] += len(got)
                        acks = []
                        for received in got:
                            roll = crng.random()
                            if roll < 0.85:
                                acks.append(received)
                            elif roll < 0.90:  # nack: seen again in 1 s
                                consumer.change_invisible_duration(received, 1)
                            # else: left to its invisible time (revived to the retry topic)
                        if acks:
                            consumer.ack_many(acks)
                    except Exception as exc:  # noqa: BLE001 - a restart: keep going
                        result.errors.append(f"consume: {exc}")
                        stop.wait(0.5)
            finally:
                consumer.close()

        def restart(at: float) -> None:
            broker.kill()  # SIGKILL: start-up replays the revive log from its snapshot
            began = time.monotonic()
            broker.restart(timeout=180)
            took = time.monotonic() - began
            replays = re.findall(r"pop state replayed.*?records=(\d+)", broker.log.read_text())
            replayed = int(replays[-1]) if replays else -1
            result.restarts.append((at, took, replayed))
            print(f"restart at {at:7.0f}s: start-up {took:5.1f}s, revive records replayed "
                  f"{replayed}", file=out, flush=True)

        threads = [threading.Thread(target=produce, daemon=True),
                   threading.Thread(target=consume, daemon=True)]
        if compacted_rate:
            threads.append(threading.Thread(target=update, daemon=True))
        for thread in threads:
            thread.start()
        print(f"soak: seed {seed}, {duration_s:.0f}s, {rate} msgs/s target, pop 32 "
              f"(ack 85 %, nack 5 %, 10 % left to expire after 2 s), samples every "
              f"{interval_s:.0f}s, warm-up {warmup_s:.0f}s; expired handles kept "
              f"{expired_kept_ms / 1000:.0f}s, idempotence window "
              f"{idempotence_window_ms / 1000:.0f}s, retention {retention_hours * 3600:.0f}s, "
              f"snapshot every {snapshot_interval_ms / 1000:.0f}s, {segment_mib:g} MiB "
              f"segments, load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs",
              file=out, flush=True)
        if compacted_rate:
            print(f"compacted topic {COMPACTED}: {compacted_rate} updates/s over "
                  f"{compacted_keys} keys in {COMPACTED_QUEUES} queues, "
                  f"{TOMBSTONE_SHARE:.0%} tombstones, min.compaction.lag.ms "
                  f"{COMPACTION_LAG_MS}, delete.retention.ms {TOMBSTONE_KEPT_MS}, a pass every "
                  f"{COMPACTION_INTERVAL_MS / 1000:g}s; live records bound "
                  f"{result.compacted_live_bound}", file=out, flush=True)
        print("    t_s  rss_mib  anon_mib  fds  in_flight  expired  revive_tail  data_mib"
              "  segs  produced   popped  c_live  c_written  c_removed  c_passes  relocated",
              file=out, flush=True)
        reader = PullConsumer(cluster.namesrv_addrs, consumer_group="soak-compacted-reader") \
            if compacted_rate else None
        began = time.monotonic()
        next_restart = began + restart_every_s if restart_every_s else float("inf")
        while (now := time.monotonic()) - began < duration_s:
            at = now - began
            if now >= next_restart:
                restart(at)
                next_restart = time.monotonic() + restart_every_s
            try:
                rss, anon = _proc_status(broker.pid)
                fds = len(os.listdir(f"/proc/{broker.pid}/fd"))
                seen = _metrics(broker.metrics_port)
            except (OSError, ValueError) as exc:
                result.errors.append(f"sample: {exc}")
                stop.wait(interval_s)
                continue
            live = written = -1
            if reader is not None:
                try:
                    live, written = _count_live(reader, COMPACTED_QUEUES)
                except Exception as exc:  # noqa: BLE001 - a restart: read as not read
                    result.errors.append(f"compacted read: {exc}")
            commitlog = broker.workdir / "data" / "store" / "commitlog"
            sample = Sample(
                at, rss, anon, fds,
                seen.get('tidemq_broker_pop_handles{state="in_flight"}', -1),
                seen.get('tidemq_broker_pop_handles{state="expired"}', -1),
                seen.get("tidemq_broker_pop_revive_tail_records", -1),
                _dir_mib(broker.workdir / "data"), counts["produced"], counts["popped"],
                len(result.restarts),
                sum(1 for p in commitlog.iterdir() if p.name.isdigit()), live, written,
                seen.get("tidemq_broker_compaction_removed_records_total", -1),
                seen.get("tidemq_broker_compaction_queue_passes_total", -1),
                seen.get("tidemq_broker_compaction_relocated_segments_total", -1))
            result.samples.append(sample)
            print(f"{at:7.0f}  {rss:7.1f}  {anon:8.1f}  {fds:3d}  {sample.in_flight:9.0f}  "
                  f"{sample.expired:7.0f}  {sample.revive_tail:11.0f}  {sample.data_mib:8.1f}"
                  f"  {sample.segments:4d}  {counts['produced']:8d}  {counts['popped']:7d}"
                  f"  {live:6d}  {written:9d}  {sample.c_removed:9.0f}  {sample.c_passes:8.0f}"
                  f"  {sample.relocated_segments:9.0f}", file=out, flush=True)
            stop.wait(max(0.0, interval_s - (time.monotonic() - now)))
        stop.set()
        for thread in threads:
            thread.join(30)
        if reader is not None:
            reader.close()
        restart(time.monotonic() - began)
    after = after_warmup(result)
    groups = [s.incarnation for s in after]
    result.slope_mib_per_min, result.judged = slope_per_min(
        [(s.at_s, s.anon_mib) for s in after], groups)
    result.handles_slope_per_min, _ = slope_per_min(
        [(s.at_s, s.in_flight + s.expired) for s in after], groups)
    # the disk is one directory across restarts: one line
    result.data_slope_mib_per_min, _ = slope_per_min([(s.at_s, s.data_mib) for s in after])
    print(f"load average at the end {os.getloadavg()[0]:.1f}", file=out, flush=True)
    print(f"after warm-up ({len(after)} samples, {result.judged} judged, "
          f"{len(set(groups))} broker processes, one "
          f"line each, one slope): anonymous memory {result.slope_mib_per_min:+.2f}"
          f" MiB/min, pop handles {result.handles_slope_per_min:+.0f}/min, data directory "
          f"{result.data_slope_mib_per_min:+.2f} MiB/min; {len(result.errors)} client errors "
          f"(restarts)", file=out, flush=True)
    if result.compacted_live_bound:
        read = [s for s in after if s.c_live >= 0]
        print(f"compacted topic after warm-up: live records {min(s.c_live for s in read)}-"
              f"{max(s.c_live for s in read)} (bound {result.compacted_live_bound}) of "
              f"{max(s.c_written for s in read)} updates stored; compaction passes "
              f"+{_grew(after, lambda s: s.c_passes):.0f}, records removed "
              f"+{_grew(after, lambda s: s.c_removed):.0f}, segments emptied by copy-forward "
              f"+{_grew(after, lambda s: s.relocated_segments):.0f}"
              if read else "compacted topic after warm-up: never read", file=out, flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration-s", type=float, default=3600)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--interval-s", type=float, default=30)
    parser.add_argument("--warmup-s", type=float, default=900,
                        help="samples taken sooner than this after their broker process "
                             "started are left out of the slope (the 10 min windows fill "
                             "first)")
    parser.add_argument("--expired-kept-ms", type=int, default=600_000)
    parser.add_argument("--idempotence-window-ms", type=int, default=600_000)
    parser.add_argument("--rate", type=int, default=1000, help="messages produced per second")
    parser.add_argument("--restart-every-s", type=float, default=1800,
                        help="SIGKILL and restart the broker this often (and at the end); "
                             "each process is judged from its own warm-up on")
    parser.add_argument("--max-growth-mib-per-min", type=float, default=2.0)
    parser.add_argument("--max-data-growth-mib-per-min", type=float, default=2.0)
    parser.add_argument("--compacted-rate", type=int, default=100,
                        help="updates per second to the compacted topic (0: none)")
    parser.add_argument("--compacted-keys", type=int, default=1000)
    parser.add_argument("--segment-size-mib", type=float, default=SEGMENT_MIB)
    args = parser.parse_args(argv)
    from tidemq.common.logs import configure_logging

    # the clients' per-attempt info lines while the broker restarts would bury the table
    configure_logging("soak", "warning")
    workdir = Path(tempfile.mkdtemp(prefix="tidemq-soak-"))
    try:
        result = run_soak(workdir, duration_s=args.duration_s, seed=args.seed,
                          interval_s=args.interval_s, warmup_s=args.warmup_s, rate=args.rate,
                          restart_every_s=args.restart_every_s,
                          expired_kept_ms=args.expired_kept_ms,
                          idempotence_window_ms=args.idempotence_window_ms,
                          compacted_rate=args.compacted_rate,
                          compacted_keys=args.compacted_keys,
                          segment_mib=args.segment_size_mib)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if found := failures(result, args.max_growth_mib_per_min,
                         args.max_data_growth_mib_per_min):
        print("FAIL: " + "; ".join(found), file=sys.stderr)
        return 1
    print("OK: flat after warm-up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
