"""Pop-churn soak (`make soak`, docs/consumption.md "Pop state over time"): a real cluster (etcd,
config center, two name servers, one broker) under seeded pop / ack / change-invisible /
invisibility-timeout churn, sampling the broker's RSS, anonymous memory, open files, its pop
state (handles in flight and remembered expired, revive-log records past the last snapshot)
and its data directory at intervals; the broker is SIGKILLed and restarted at the end (and
every `--restart-every-s`) to time its start-up and count the revive records it replays.

The verdict is a slope check, not a timing assertion: a least-squares line through the RSS
samples after warm-up, whose growth per minute must stay under `--max-growth-mib-per-min`; it
fails when fewer than MIN_SAMPLES samples after warm-up went into the line, or when the broker's
pop-state metrics were not found (nothing was judged).

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
from pathlib import Path

TOPIC, GROUP = "SoakPop", "g-soak"
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


@dataclass
class SoakResult:
    samples: list[Sample] = field(default_factory=list)
    restarts: list[tuple[float, float, int]] = field(default_factory=list)  # at, start s, replayed
    slope_mib_per_min: float = 0.0
    handles_slope_per_min: float = 0.0
    judged: int = 0  # samples after warm-up that went into the slopes
    errors: list[str] = field(default_factory=list)


def _proc_status(pid: int) -> tuple[float, float]:
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, value = line.partition(":")
        if name in ("VmRSS", "RssAnon"):
            fields[name] = int(value.split()[0]) / 1024
    return fields.get("VmRSS", 0.0), fields.get("RssAnon", 0.0)


def _metrics(port: int) -> dict[str, float]:
    wanted = ("tidemq_broker_pop_handles", "tidemq_broker_pop_revive_tail_records")
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


def failures(result: SoakResult, max_growth_mib_per_min: float) -> list[str]:
    """Why the soak fails, if it does: too few samples judged, the pop-state metrics or a
    restart's replay line not found (read as -1), or memory growing faster than the bound."""
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
    return found


def run_soak(workdir: Path, *, duration_s: float, seed: int, interval_s: float = 10.0,
             warmup_s: float = 60.0, rate: int = 1000, restart_every_s: float = 0.0,
             snapshot_interval_ms: int = 5000, expired_kept_ms: int = 30_000,
             idempotence_window_ms: int = 30_000, retention_hours: float = 0.02,
             out=sys.stdout) -> SoakResult:
    from tidemq.client import Message, Producer, SimpleConsumer

    from tests.support.cluster import (
        create_topic_in_config_center,
        running_cluster,
        wait_for_route,
    )

    result = SoakResult()
    stop = threading.Event()
    counts = {"produced": 0, "popped": 0}
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
           "TIDEMQ_OFFSET_FLUSH_INTERVAL_S": "1"}
    with running_cluster(workdir, broker_names=("broker-a",), env=env) as cluster:
        broker = cluster.brokers["broker-a"]
        create_topic_in_config_center(cluster, TOPIC, 4)
        wait_for_route(cluster, TOPIC, 1)

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
        for thread in threads:
            thread.start()
        print(f"soak: seed {seed}, {duration_s:.0f}s, {rate} msgs/s target, pop 32 "
              f"(ack 85 %, nack 5 %, 10 % left to expire after 2 s), samples every "
              f"{interval_s:.0f}s, warm-up {warmup_s:.0f}s; expired handles kept "
              f"{expired_kept_ms / 1000:.0f}s, idempotence window "
              f"{idempotence_window_ms / 1000:.0f}s, retention {retention_hours * 3600:.0f}s, "
              f"snapshot every {snapshot_interval_ms / 1000:.0f}s, load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs", file=out, flush=True)
        print("    t_s  rss_mib  anon_mib  fds  in_flight  expired  revive_tail  data_mib"
              "  produced   popped", file=out, flush=True)
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
            sample = Sample(
                at, rss, anon, fds,
                seen.get('tidemq_broker_pop_handles{state="in_flight"}', -1),
                seen.get('tidemq_broker_pop_handles{state="expired"}', -1),
                seen.get("tidemq_broker_pop_revive_tail_records", -1),
                _dir_mib(broker.workdir / "data"), counts["produced"], counts["popped"],
                len(result.restarts))
            result.samples.append(sample)
            print(f"{at:7.0f}  {rss:7.1f}  {anon:8.1f}  {fds:3d}  {sample.in_flight:9.0f}  "
                  f"{sample.expired:7.0f}  {sample.revive_tail:11.0f}  {sample.data_mib:8.1f}"
                  f"  {counts['produced']:8d}  {counts['popped']:7d}", file=out, flush=True)
            stop.wait(max(0.0, interval_s - (time.monotonic() - now)))
        stop.set()
        for thread in threads:
            thread.join(30)
        restart(time.monotonic() - began)
    # after the warm-up, and not the first sample of a restarted process (its start-up)
    after = [s for i, s in enumerate(result.samples) if s.at_s >= warmup_s
             and (i == 0 or result.samples[i - 1].incarnation == s.incarnation)]
    groups = [s.incarnation for s in after]
    result.slope_mib_per_min, result.judged = slope_per_min(
        [(s.at_s, s.anon_mib) for s in after], groups)
    result.handles_slope_per_min, _ = slope_per_min(
        [(s.at_s, s.in_flight + s.expired) for s in after], groups)
    print(f"load average at the end {os.getloadavg()[0]:.1f}", file=out, flush=True)
    print(f"after warm-up ({len(after)} samples, {result.judged} judged, "
          f"{len(set(groups))} broker processes, one "
          f"line each, one slope): anonymous memory {result.slope_mib_per_min:+.2f}"
          f" MiB/min, pop handles {result.handles_slope_per_min:+.0f}/min; "
          f"{len(result.errors)} client errors (restarts)", file=out, flush=True)
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--duration-s", type=float, default=3600)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--interval-s", type=float, default=30)
    parser.add_argument("--warmup-s", type=float, default=900,
                        help="samples before this are left out of the slope (the 10 min "
                             "windows fill first)")
    parser.add_argument("--expired-kept-ms", type=int, default=600_000)
    parser.add_argument("--idempotence-window-ms", type=int, default=600_000)
    parser.add_argument("--rate", type=int, default=1000, help="messages produced per second")
    parser.add_argument("--restart-every-s", type=float, default=900)
    parser.add_argument("--max-growth-mib-per-min", type=float, default=2.0)
    args = parser.parse_args(argv)
    workdir = Path(tempfile.mkdtemp(prefix="tidemq-soak-"))
    try:
        result = run_soak(workdir, duration_s=args.duration_s, seed=args.seed,
                          interval_s=args.interval_s, warmup_s=args.warmup_s, rate=args.rate,
                          restart_every_s=args.restart_every_s,
                          expired_kept_ms=args.expired_kept_ms,
                          idempotence_window_ms=args.idempotence_window_ms)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    if found := failures(result, args.max_growth_mib_per_min):
        print("FAIL: " + "; ".join(found), file=sys.stderr)
        return 1
    print("OK: flat after warm-up")
    return 0


if __name__ == "__main__":
    sys.exit(main())
