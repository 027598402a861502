"""(c) The broker's CPU per consumed message with tracing off and on (issue 14).

Three broker groups serve one topic side by side in the same run, so the same consumer
process reads from each and the machine's load is the same for all three:

- `broker-off`: no `--otlp-endpoint` (spans are created, nothing is exported);
- `broker-on`: exports to a trace collector with the default quiet list (Pull is quiet:
  a consumer's untraced pull is not recorded; what a read costs with tracing on today);
- `broker-all`: exports with an empty quiet list, so every Pull's server span is recorded
  and exported (what each pull cost before the sampler).

Pulls of 32 messages (a push consumer's default batch), so the per-pull span cost shows in
a per-message figure; the broker's CPU is utime + stime from /proc around each read, divided
by the messages that broker served. The median of three reads of the backlog is kept.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

TOPIC = "BenchTracing"
PULL_MESSAGES = 32
VARIANTS = {  # broker name -> extra flags
    "broker-off": [],
    "broker-on": ["OTLP"],
    "broker-all": ["OTLP", "--trace-quiet-operations", ""],
}


def start_brokers(cluster, start: Callable, collector_addr: str, flags: list[str],
                  env: dict[str, str]) -> dict[str, int]:
    """The three broker groups of the comparison; their pids by name."""
    pids = {}
    for name, extra in VARIANTS.items():
        tracing = [arg for flag in extra for arg in (
            ["--otlp-endpoint", collector_addr] if flag == "OTLP" else [flag])]
        process = start("tidemq.broker", [
            "--cluster-name", "TestCluster", "--broker-name", name, "--broker-id", "0",
            "--namesrv-addrs", cluster.namesrv_addrs, "--config-center",
            cluster.config_center.addr, *flags, *tracing], env=env)
        pids[name] = process.pid
    return pids


def measure(run_consume: Callable[[], dict], cpu_seconds: Callable[[int], float],
            pids: dict[str, int], rounds: int) -> dict[str, float]:
    """Broker CPU µs per consumed message, by broker (median of `rounds` reads)."""
    per_message: dict[str, list[float]] = {name: [] for name in pids}
    for _ in range(rounds):
        before = {name: cpu_seconds(pid) for name, pid in pids.items()}
        run = run_consume()
        for name, pid in pids.items():
            served = run["by_broker"].get(name, 0)
            if served:
                per_message[name].append((cpu_seconds(pid) - before[name]) * 1e6 / served)
    return {name: statistics.median(values) for name, values in per_message.items() if values}


def report(figures: dict[str, float], messages_per_broker: int) -> list[str]:
    off = figures.get("broker-off")
    lines = [f"(c) broker CPU per consumed message, tracing off vs on ({messages_per_broker} "
             f"msgs per broker, pulls of {PULL_MESSAGES} over gRPC, same consumer process, "
             "median of 3):"]
    labels = {"broker-off": "tracing off (no exporter)",
              "broker-on": "tracing on (default quiet list: untraced pulls not recorded)",
              "broker-all": "tracing on, every Pull recorded (no quiet list: before the sampler)"}
    for name, label in labels.items():
        if name in figures:
            delta = "" if off is None or name == "broker-off" else \
                f"  ({figures[name] - off:+.2f} us vs off)"
            lines.append(f"    {label}: {figures[name]:.2f} us/msg{delta}")
    return lines
