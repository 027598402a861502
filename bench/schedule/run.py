"""The timer's broker CPU per delayed message, against the same run's ordinary send.

    uv run --frozen python bench/schedule/run.py --quick
    uv run --frozen python bench/schedule/run.py --messages 50000

Starts etcd, Redis, the config center, two name servers and one broker (temporary dirs, loopback),
then sends the same number of 256 B messages, in batches of 256, three ways: ordinary (the
baseline), with an exact delivery time 2 s ahead (timing wheel), and with delay level 1 (1 s,
level queue); each delayed run is timed until every message is on its real topic. The figure
is the broker process's CPU time (user + system, /proc) per message, less its idle CPU over
the same wall time: for a delayed message that is the scheduled send (one retarget into
SCHEDULE_TOPIC_XXXX), the timer reading it back and the second append (one retarget out).
Printed, not asserted: the gap is bounded by that second append and the two retargets.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: tests.support

from tidemq.client import Message, Producer  # noqa: E402
from tidemq.client.group import DirectClient  # noqa: E402
from tidemq.v1 import broker_pb2  # noqa: E402

from tests.support.cluster import (  # noqa: E402
    create_topic_in_config_center,
    running_cluster,
    wait_for_route,
)
from tests.support.processes import wait_until  # noqa: E402

QUEUES, BATCH = 4, 256
TICK_S = os.sysconf("SC_CLK_TCK")


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK_S


def stored(addr: str, topic: str) -> int:
    reply = DirectClient(addr).call("GetQueueOffsets",
                                    broker_pb2.GetQueueOffsetsRequest(topic=topic))
    return sum(q.max_offset for q in reply.queues)


def run(cluster, topic: str, count: int, idle_per_s: float, **delay) -> float:
    """Broker CPU µs per message to send `count` messages with `delay` and see them stored."""
    broker = cluster.brokers["broker-a"]
    create_topic_in_config_center(cluster, topic, QUEUES)
    wait_for_route(cluster, topic, 1)
    started, cpu_before = time.monotonic(), cpu_s(broker.pid)
    with Producer(cluster.namesrv_addrs) as producer:
        for start in range(0, count, BATCH):
            at = {"deliver_at_ms": int(time.time() * 1000) + 2000} if delay.get("exact") \
                else {"delay_level": delay.get("level", 0)}
            producer.send_many([Message(topic, b"x" * 256, **at)
                                for _ in range(min(BATCH, count - start))])
    wait_until(lambda: stored(broker.addr, topic) >= count, 120, interval=0.05,
               message=f"{count} messages on {topic}")
    wall = time.monotonic() - started
    used = cpu_s(broker.pid) - cpu_before - idle_per_s * wall
    return used / count * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=50_000)
    parser.add_argument("--quick", action="store_true", help="5000 messages each way")
    args = parser.parse_args()
    count = 5_000 if args.quick else args.messages
    with tempfile.TemporaryDirectory(prefix="bench-schedule-") as tmp, \
            running_cluster(Path(tmp), broker_names=("broker-a",)) as cluster:
        pid = cluster.brokers["broker-a"].pid
        before = cpu_s(pid)
        time.sleep(2.0)  # the idle broker: registration, timer ticks, flushes
        idle_per_s = (cpu_s(pid) - before) / 2.0
        plain = run(cluster, "BenchPlain", count, idle_per_s)
        exact = run(cluster, "BenchExact", count, idle_per_s, exact=True)
        level = run(cluster, "BenchLevel", count, idle_per_s, level=1)
    print(f"{'broker CPU per message (idle subtracted)':<48}{'µs':>8}")
    print(f"{'ordinary send (same run)':<48}{plain:>8.1f}")
    print(f"{'delayed, exact time (wheel) send + delivery':<48}{exact:>8.1f}  "
          f"(x{exact / plain:.1f} of ordinary)")
    print(f"{'delayed, level 1 (level queue) send + delivery':<48}{level:>8.1f}  "
          f"(x{level / plain:.1f} of ordinary)")
    print(f"({count} messages of 256 B each way, batches of {BATCH}; idle broker "
          f"{idle_per_s * 1000:.1f} ms CPU/s)")


if __name__ == "__main__":
    main()
