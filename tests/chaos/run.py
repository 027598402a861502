"""One chaos run: a producer, two consumer groups (pop and offset: tests.chaos.consumers) and a
config writer against a 3-replica group and its replicated control plane while a seeded
schedule of faults hits them; then every fault is undone, the replicas converge, the consumers
drain and the verdicts run (tests.chaos.verify).

Holding a fault for its scheduled time is the fault itself, not a synchronisation: every
wait for the system to react polls a condition with a deadline.
"""

from __future__ import annotations

import json
import random
import threading
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from tests.chaos.consumers import OffsetReader, PopReader, drained
from tests.chaos.group import GROUP, ChaosGroup, start_group
from tests.chaos.schedule import BROKER_KINDS, Fault, schedule
from tests.chaos.verify import (
    Ack,
    ConfigAck,
    ConfigVerdict,
    ConsumerVerdict,
    Verdict,
    check_acks,
    check_config,
    check_consumption,
    check_replicas,
    consumption_summary,
    epoch_conflicts,
    outages_by_kind,
    summary,
)
from tests.support.processes import wait_until

TOPIC = "chaos"
QUEUES = 2
RECOVERY_TIMEOUT_S = 90
DRAIN_TIMEOUT_S = 60   # after the faults: every consumer group catches up (else: losses)
COUNTER_KEY = "/chaos/counter"   # outside /tidemq/: no service watches it
# The broker lease in chaos runs. A Redis master failover leaves the config store without a
# writable master for ~2.7-3.3 s here (Sentinel: 1 s down-after, ~1 s until it sees the
# promotion, ~0.7 s reconfiguring the other replica; only then does it name the new master),
# so with the 2 s test lease every broker lost its lease and the group re-elected in 5 of 9
# Redis master faults. 5 s rides a failover out (0 lease losses in 9); the controller keeps
# its 3 s lease, so controller hand-overs during a Redis failover stay in the runs.
CHAOS_LEASE_TTL_S = 5


class Workload:
    """A producer sending one message at a time with SYNC acknowledgements (each body unique,
    "<seed>:<sequence>"); it rides out faults and keeps going."""

    def __init__(self, group: ChaosGroup, seed: int) -> None:
        from tidemq.client import Producer

        self.seed = seed
        self.producer = Producer(group.namesrv_addrs, send_timeout=5.0, route_refresh_s=1.0)
        self.acks: list[Ack] = []
        self.ack_times: list[float] = []   # monotonic, one per ack
        self.unacknowledged = 0
        self.longest_outage_s = 0.0
        self._last_ack = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._produce, name="chaos-producer")

    def start(self) -> Workload:
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(30)
        self.producer.close()

    def _produce(self) -> None:
        from tidemq.client import Message, SendStatus
        from tidemq.common.errors import TideMQError

        sequence = 0
        while not self._stop.is_set():
            body = f"{self.seed}:{sequence}".encode()
            sequence += 1
            try:
                result = self.producer.send(Message(TOPIC, body))
            except TideMQError:
                self.unacknowledged += 1
                continue
            if result.status is not SendStatus.SEND_OK:
                self.unacknowledged += 1
                continue
            now = time.monotonic()
            self.longest_outage_s = max(self.longest_outage_s, now - self._last_ack)
            self._last_ack = now
            self.acks.append(Ack(result.queue_id, result.queue_offset, body))
            self.ack_times.append(now)


HISTORY_READ = 5000   # newest changes of the counter the verdict compares one by one


class ConfigWriter:
    """One thread incrementing COUNTER_KEY by compare-and-set through every config center:
    put(value + 1, expected_revision=the revision it read); on a conflict or an error it
    re-reads. Every put the config center acknowledged is recorded (value, revision), in
    acknowledgement order. A put that failed may or may not have been applied: the re-read
    tells, and it is never counted as acknowledged. A re-read showing less than the highest
    acknowledged value is a stale read (counted, reported)."""

    PACE_S = 0.02   # between puts: ~50 writes/s, a load the brokers' leases share the store with

    def __init__(self, config_addrs: str) -> None:
        from tidemq.configclient.client import ConfigClient

        self.client = ConfigClient(config_addrs, timeout=2.0)
        self.acks: list[ConfigAck] = []
        self.ack_times: list[float] = []
        self.failed_calls = 0
        self.stale_reads = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._write, name="chaos-config-writer")

    def start(self) -> ConfigWriter:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(30)

    def _read(self) -> tuple[int, int]:
        kv = self.client.get(COUNTER_KEY)
        value, revision = (int(kv.value), kv.mod_revision) if kv else (0, 0)
        if self.acks and value < self.acks[-1].value:
            self.stale_reads += 1
        return value, revision

    def _write(self) -> None:
        from tidemq.common.errors import TideMQError

        current: tuple[int, int] | None = None
        while not self._stop.is_set():
            try:
                current = current or self._read()
                value, revision = current
                result = self.client.put(COUNTER_KEY, str(value + 1), expected_revision=revision)
            except TideMQError:
                self.failed_calls += 1
                current = None
                self._stop.wait(self.PACE_S)
                continue
            current = None
            if result.succeeded:
                self.acks.append(ConfigAck(value + 1, result.revision))
                self.ack_times.append(time.monotonic())
                current = (value + 1, result.revision)
            self._stop.wait(self.PACE_S)

    def final(self) -> tuple[int, list[tuple[int, int]]]:
        """The key's value now and its newest HISTORY_READ PUT events as (revision, value):
        a long run's whole history is too large for one call, and a lost put older than that
        shows as a value acknowledged twice (verify.check_config_writes)."""
        kv = self.client.get(COUNTER_KEY)
        history = [(event.revision, int(event.kv.value))
                   for event in self.client.history(COUNTER_KEY, limit=HISTORY_READ)
                   if event.type == "PUT"]
        return (int(kv.value) if kv else 0), history


@dataclass
class Outcome:
    seed: int
    faults: list[Fault]
    verdict: Verdict
    config: ConfigVerdict
    epoch_conflicts: dict[int, set[int]]
    consumers: list[ConsumerVerdict]
    crashes: list[str]
    line: str


def _create_topic(group: ChaosGroup) -> None:
    from tidemq.client.routes import NameServerClient

    with group._config() as config:
        config.put(f"/tidemq/topics/{TOPIC}", json.dumps(
            {"name": TOPIC, "queues": QUEUES, "perm": 6, "order": False}).encode(),
            expected_revision=0)
    client = NameServerClient(group.namesrv_addrs)

    def routed() -> bool:
        try:
            return bool(client.route(TOPIC).queues)
        except Exception:
            return False

    wait_until(routed, 60, interval=0.1, message=f"a route for {TOPIC}")


def _apply(group: ChaosGroup, fault: Fault, rng: random.Random) -> callable:
    """Inflict `fault`; returns what undoes it."""
    if fault.kind not in BROKER_KINDS:
        return _apply_to_control_plane(group, fault, rng)
    master = group.master()
    if fault.kind == "kill_controller":
        controller = group.controller() or group.namesrvs[0]
        controller.kill()
        return lambda: controller.start(timeout=60)
    if fault.kind == "kill_slave":
        slaves = [r for r in group.replicas if r is not master and r.running]
        target = rng.choice(slaves) if slaves else master
        group.kill(target)
        return lambda: group.restart(target)
    if master is None:
        return lambda: None
    if fault.kind == "kill_master":
        group.kill(master)
        return lambda: group.restart(master)
    if fault.kind == "pause_master":
        group.pause(master)
        return lambda: group.resume(master)
    group.partition(master)   # partition_master
    return lambda: group.heal(master)


def _apply_to_control_plane(group: ChaosGroup, fault: Fault, rng: random.Random) -> callable:
    if fault.kind == "kill_config_center":
        center = rng.choice(group.config_centers)
        center.kill()
        return lambda: center.start(timeout=60)   # same port: clients keep their address
    tier = group.redis_tier
    if tier is None:
        return lambda: None
    if fault.kind == "kill_sentinel":
        sentinel = rng.choice(tier.sentinels)
        tier.kill(sentinel)
        return lambda: tier.restart(sentinel)
    master = tier.master()
    if master is None:
        return lambda: None
    if fault.kind == "kill_redis_master":
        tier.kill(master)
        return lambda: tier.restart(master)   # Sentinel demotes it if it was replaced
    if fault.kind == "pause_redis_master":
        tier.pause(master)
        return lambda: tier.resume(master)
    tier.partition(master)   # partition_redis_master
    return lambda: tier.heal(master)


def _read_back(group: ChaosGroup, topic: str = TOPIC) -> dict[tuple[int, int], bytes]:
    from tidemq.client import PullConsumer

    stored: dict[tuple[int, int], bytes] = {}
    with PullConsumer(group.namesrv_addrs, consumer_group="chaos-verifier") as consumer:
        for mq in consumer.fetch_queues(topic):
            offset = 0
            while True:
                pulled = consumer.pull(mq, offset, 256)
                for message in pulled.messages:
                    stored[(mq.queue_id, message.queue_offset)] = bytes(message.body)
                if pulled.next_offset >= pulled.max_offset or pulled.next_offset <= offset:
                    break
                offset = pulled.next_offset
    return stored


def _explain_consumers(consumers: list[ConsumerVerdict],
                       stored: dict[str, dict[tuple[int, int], bytes]],
                       windows: list[tuple[str, float]], seed: int, log) -> None:
    """The first few phantom reads and acked pops handed out again, each with the fault it
    fell in, for the log."""
    for consumer in consumers:
        for delivery in consumer.phantoms[:5]:
            held = stored.get(delivery.topic, {}).get((delivery.queue_id, delivery.queue_offset))
            log(f"chaos seed={seed} {consumer.group}: phantom read of {delivery.body!r} at "
                f"{delivery.topic} {delivery.queue_id}@{delivery.queue_offset} at "
                f"{_when(delivery.at, windows)}; the final log holds {held!r} there")
        for acked_at, delivery in consumer.redelivered_after_ack[:5]:
            log(f"chaos seed={seed} {consumer.group}: {delivery.body!r} acked at "
                f"{_when(acked_at, windows)}, handed over again at "
                f"{_when(delivery.at, windows)} from {delivery.topic} "
                f"{delivery.queue_id}@{delivery.queue_offset}")


def _when(at: float, windows: list[tuple[str, float]]) -> str:
    """`at` relative to the fault whose window it falls in (for the log)."""
    before = [(kind, start) for kind, start in windows if start <= at]
    if not before:
        return "before the first fault"
    kind, start = before[-1]
    return f"{kind} #{len(before)} +{at - start:.2f}s"


def _poll(condition, timeout_s: float) -> bool:
    """Whether `condition` held within the deadline (no raise: the verdicts say what is
    missing)."""
    try:
        wait_until(condition, timeout_s, interval=0.5)
    except TimeoutError:
        return False
    return True


def _wait_or_explain(group: ChaosGroup, condition, what: str):
    """Poll `condition`; past the deadline fail with what the controller and every process
    said last, so a stuck run explains itself."""
    try:
        return wait_until(condition, RECOVERY_TIMEOUT_S, interval=0.2, message=what)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\n{group.explain()}") from None


def _epoch(group: ChaosGroup) -> int | None:
    try:
        return group.state().get("epoch")
    except Exception:
        return None


def _recover(group: ChaosGroup, workload: Workload, writer: ConfigWriter, fault: Fault,
             seed: int) -> None:
    """Wait until the group is writable, the control plane whole again, and both a message
    and a config write have been acknowledged since."""
    _wait_or_explain(group, lambda: group.healthy(in_sync=2),
                     f"{GROUP} writable again after {fault} (seed {seed})")
    _wait_or_explain(group, lambda: group.control_plane_problem() is None,
                     f"the control plane whole again after {fault} (seed {seed})")
    acked, written = len(workload.acks), len(writer.acks)
    _wait_or_explain(group, lambda: len(workload.acks) > acked and len(writer.acks) > written,
                     f"an acknowledged send and config write after {fault} (seed {seed})")


def run_chaos(tmp_path: Path, seed: int, fault_count: int, log=print,
              lease_ttl_s: float = CHAOS_LEASE_TTL_S) -> Outcome:
    faults = schedule(seed, fault_count, lease_ttl_s=lease_ttl_s)
    rng = random.Random(seed ^ 0x5EED)
    with ExitStack() as stack:
        group = start_group(tmp_path, stack, lease_ttl_s=lease_ttl_s)
        _create_topic(group)
        workload = Workload(group, seed).start()
        stack.callback(workload.stop)
        pop, offsets = (PopReader(group.namesrv_addrs, TOPIC).start(),
                        OffsetReader(group.namesrv_addrs, TOPIC).start())
        readers = [pop, offsets]
        for reader in readers:
            stack.callback(reader.stop)
        writer = ConfigWriter(group.config_addrs).start()
        stack.callback(writer.stop)
        wait_until(lambda: workload.acks and writer.acks, 60,
                   message="the first acknowledged send and config write")
        windows: list[tuple[str, float]] = []
        promotions: list[tuple[float, float]] = []   # (fault start, recovered): master changed
        for number, fault in enumerate(faults, 1):
            epoch, losses = _epoch(group), group.lease_losses()
            windows.append((fault.kind, time.monotonic()))
            undo = _apply(group, fault, rng)
            log(f"chaos seed={seed} fault {number}/{len(faults)}: {fault}")
            time.sleep(fault.hold_s)   # the fault's duration (not a synchronisation)
            undo()
            _recover(group, workload, writer, fault, seed)
            if _epoch(group) != epoch:
                promotions.append((windows[-1][1], time.monotonic()))
            log(f"chaos seed={seed}   recovered {time.monotonic() - windows[-1][1]:.1f}s after "
                f"{fault.kind}: epoch {epoch}->{_epoch(group)}, broker lease losses "
                f"+{group.lease_losses() - losses}")
            time.sleep(fault.settle_s)   # traffic between faults
        end = time.monotonic()
        workload.stop()
        writer.stop()
        group.undo_all()
        confirmed = _wait_or_explain(group, group.converged,
                                     f"every replica of {GROUP} in sync (seed {seed})")
        _wait_or_explain(group, lambda: group.control_plane_problem() is None,
                         f"the control plane whole at the end (seed {seed})")
        if not _poll(lambda: drained(readers, workload.acks, pop), DRAIN_TIMEOUT_S):
            log(f"chaos seed={seed} consumers not drained after {DRAIN_TIMEOUT_S}s")
        for reader in readers:
            reader.stop()
        stored = {topic: _read_back(group, topic)
                  for topic in {TOPIC} | {d.topic for d in pop.deliveries}}
        consumers = [
            check_consumption(pop.name, workload.acks, pop.deliveries, stored, acked=pop.acked,
                              unacked=pop.unacked, promotions=promotions),
            check_consumption(offsets.name, workload.acks, offsets.deliveries, stored)]
        verdict = check_acks(workload.acks, stored[TOPIC])
        verdict.diverged = check_replicas(
            {f"replica-{r.replica_id}": r.commitlog_dir for r in group.replicas}, confirmed)
        config = check_config(writer.acks, *writer.final(), stale_reads=writer.stale_reads)
        conflicts = epoch_conflicts(group.master_grants())
        message_outages = outages_by_kind(workload.ack_times, windows, end)
        config_outages = outages_by_kind(writer.ack_times, windows, end)
        line = summary(seed, len(faults), verdict, workload.longest_outage_s,
                       workload.unacknowledged, config, conflicts,
                       {kind: (message_outages[kind], config_outages[kind])
                        for kind in message_outages})
        line += f" broker_crashes={len(group.crashes)} " + consumption_summary(consumers)
        _explain_consumers(consumers, stored, windows, seed, log)
        return Outcome(seed, faults, verdict, config, conflicts, consumers, group.crashes,
                       line)
