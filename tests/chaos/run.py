"""One chaos run: a producer, two consumer groups (pop and offset: tests.chaos.consumers) and the
config-center load (key writers, a compare-and-set register, watchers: tests.chaos.config_load)
against a 3-replica group and its control plane (3 etcd members, 2 config centers) while a
seeded schedule of faults (tests.chaos.faults) hits them; then every fault is undone, the
replicas converge, the consumers drain and the verdicts run (tests.chaos.verify).

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

from tests.chaos import compacted
from tests.chaos.config_load import PREFIX, KeyWriters, Register, Watchers, replay
from tests.chaos.consumers import OffsetReader, PopReader, drained
from tests.chaos.faults import BY_NAME, PARTITION_UNAVAILABLE
from tests.chaos.group import GROUP, ChaosGroup, start_group
from tests.chaos.kafka_clients import KafkaChaos, KafkaVerdict
from tests.chaos.masters import ReplicationWatch, group_key, history, live_prefix
from tests.chaos.schedule import Fault, schedule
from tests.chaos.verify import (
    Ack,
    ConsumerVerdict,
    ControllerVerdict,
    ElectionVerdict,
    EpochVerdict,
    KeyVerdict,
    RegisterVerdict,
    Verdict,
    WatchVerdict,
    check_acks,
    check_consumption,
    check_controllers,
    check_elections,
    check_epochs,
    check_key_writes,
    check_register,
    check_replicas,
    check_watch,
    consumption_summary,
    masterless_spans,
    outages_by_kind,
    spans_by_kind,
    summary,
)
from tests.support.processes import wait_until

TOPIC = "chaos"
QUEUES = 2
RECOVERY_TIMEOUT_S = 90
DRAIN_TIMEOUT_S = 60   # after the faults: every consumer group catches up (else: losses)
LEADER_KEY = "/tidemq/controller/leader"
GROUP_KEY = f"/tidemq/replication/groups/{GROUP}"
# The broker lease in chaos runs: well above a frozen master's failure detection (~3.6-4.1 s,
# faults.Hold.DETECTION), so the stalls held around it are judged by detection, not by the
# lease; an etcd leader change (1 s election timeout) keeps leases (etcd extends them on a
# new leader). The controller keeps its 3 s lease, so controller hand-overs while the store
# elects stay in the runs.
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


@dataclass
class Outcome:
    seed: int
    faults: list[Fault]
    verdict: Verdict
    keys: KeyVerdict
    register: RegisterVerdict
    watches: list[WatchVerdict]
    epochs: EpochVerdict
    controllers: ControllerVerdict
    elections: ElectionVerdict
    masterless: dict[str, float]   # fault kind -> longest time the group had no master
    consumers: list[ConsumerVerdict]
    crashes: list[str]
    line: str
    compacted: compacted.CompactedVerdict | None = None
    kafka: KafkaVerdict | None = None   # the Kafka producer's and group's (kafka_clients)


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
        for acked_at, delivery in consumer.acked_handed_again[:5]:
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


def _recover(group: ChaosGroup, workload: Workload, writer: KeyWriters, fault: Fault,
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


def _store_verdicts(group: ChaosGroup, writers: KeyWriters, register: Register,
                    watchers: Watchers):
    """The control plane's verdicts, from what the clients were told, the name servers' logs
    and the store's own history read again through the config centers."""
    with group.verdict_client() as client:
        upto = client.range(PREFIX, limit=1).revision
        keys = check_key_writes(writers.acks, writers.final(client))
        chain = check_register(register.acks, Register.history(client, upto),
                               register.stale_reads)
        reference = [(e.revision, e.kv.key)
                     for e in replay(client, PREFIX, watchers.start_revision, upto)]
        watches = [check_watch(f"watcher{i}", seen, reference)
                   for i, seen in enumerate(watchers.seen)]
        group_history = replay(client, GROUP_KEY, 1, upto)
        states = [(json.loads(e.kv.value)["epoch"], json.loads(e.kv.value)["master"])
                  for e in group_history if e.type == "PUT"]
        epochs = check_epochs(states, group.master_grants())
        leader_events = [(e.revision, e.kv.lease if e.type == "PUT" else 0)
                         for e in replay(client, LEADER_KEY, 1, upto)]
        controllers = check_controllers(leader_events, group.controller_writes(),
                                        [e.revision for e in group_history if e.type == "PUT"])
        elections = check_elections(history(client, GROUP, upto), group_key(GROUP),
                                    live_prefix(GROUP), group.store_master_ends())
    return keys, chain, watches, epochs, controllers, elections


def _watchers_caught_up(watchers: Watchers, writers: KeyWriters) -> bool:
    last = max((ack.revision for ack in writers.acks), default=0)
    return all(seen and seen[-1][0] >= last for seen in watchers.seen)


def run_chaos(tmp_path: Path, seed: int, fault_count: int, log=print,
              lease_ttl_s: float = CHAOS_LEASE_TTL_S, every_kind: bool = False,
              quick: bool = False) -> Outcome:
    faults = schedule(seed, fault_count, lease_ttl_s=lease_ttl_s, every_kind=every_kind,
                      quick=quick)
    log(f"chaos seed={seed} schedule: {', '.join(map(str, faults))}")
    rng = random.Random(seed ^ 0x5EED)
    with ExitStack() as stack:
        group = start_group(tmp_path, stack, lease_ttl_s=lease_ttl_s)
        _create_topic(group)
        compacted.create_topic(group)
        kafka = KafkaChaos(tmp_path, stack, group, seed).start()
        workload = Workload(group, seed).start()
        stack.callback(workload.stop)
        updates = compacted.CompactedWriter(group.namesrv_addrs, GROUP, seed).start()
        stack.callback(updates.stop)
        pop, offsets = (PopReader(group.namesrv_addrs, TOPIC).start(),
                        OffsetReader(group.namesrv_addrs, TOPIC).start())
        readers = [pop, offsets]
        for reader in readers:
            stack.callback(reader.stop)
        with group.verdict_client() as client:
            start_revision = client.range(PREFIX, limit=1).revision + 1
        watchers = Watchers(group.config_addrs, start_revision).start()
        stack.callback(watchers.stop)
        writer = KeyWriters(group.config_addrs).start()
        stack.callback(writer.stop)
        register = Register(group.config_addrs).start()
        stack.callback(register.stop)
        masters = ReplicationWatch(group.config_addrs, GROUP).start()
        stack.callback(masters.stop)
        wait_until(lambda: workload.acks and writer.acks and register.acks and kafka.ready(),
                   90, message="the first acknowledged send, config write and register "
                               "write, Kafka record produced and consumed")
        windows: list[tuple[str, float]] = []
        promotions: list[tuple[float, float]] = []   # (fault start, recovered): master changed
        for number, fault in enumerate(faults, 1):
            epoch, losses = _epoch(group), group.lease_losses()
            kind = BY_NAME[fault.kind]
            windows.append((fault.kind, time.monotonic()))
            target = kind.apply(group, rng)
            log(f"chaos seed={seed} fault {number}/{len(faults)}: {fault}")
            time.sleep(fault.hold_s)   # the fault's duration (not a synchronisation)
            kind.undo(group, target)
            _recover(group, workload, writer, fault, seed)
            kafka.wait_ack_after(f"{fault} (seed {seed})", RECOVERY_TIMEOUT_S)
            if _epoch(group) != epoch:
                promotions.append((windows[-1][1], time.monotonic()))
            log(f"chaos seed={seed}   recovered {time.monotonic() - windows[-1][1]:.1f}s after "
                f"{fault.kind}: epoch {epoch}->{_epoch(group)}, broker lease losses "
                f"+{group.lease_losses() - losses}")
            time.sleep(fault.settle_s)   # traffic between faults
        end = time.monotonic()
        workload.stop()
        updates.stop()
        kafka.stop_producing()
        writer.stop()
        register.stop()
        group.undo_all()
        confirmed = _wait_or_explain(group, group.converged,
                                     f"every replica of {GROUP} in sync (seed {seed})")
        _wait_or_explain(group, lambda: group.control_plane_problem() is None,
                         f"the control plane whole at the end (seed {seed})")
        if not _poll(lambda: _watchers_caught_up(watchers, writer), DRAIN_TIMEOUT_S):
            log(f"chaos seed={seed} watchers not caught up after {DRAIN_TIMEOUT_S}s")
        watchers.stop()
        masters.stop()
        if not _poll(lambda: drained(readers, workload.acks, pop), DRAIN_TIMEOUT_S):
            log(f"chaos seed={seed} consumers not drained after {DRAIN_TIMEOUT_S}s")
        for reader in readers:
            reader.stop()
        kafka_verdict = kafka.finish(windows, end, DRAIN_TIMEOUT_S, log)
        stored = {topic: _read_back(group, topic)
                  for topic in {TOPIC} | {d.topic for d in pop.deliveries}}
        consumers = [
            check_consumption(pop.name, workload.acks, pop.deliveries, stored, acked=pop.acked,
                              unacked=pop.unacked, promotions=promotions),
            check_consumption(offsets.name, workload.acks, offsets.deliveries, stored)]
        verdict = check_acks(workload.acks, stored[TOPIC])
        compaction = compacted.verify(group, updates, _poll)
        verdict.diverged = check_replicas(
            {f"replica-{r.replica_id}": r.commitlog_dir for r in group.replicas}, confirmed)
        keys, chain, watches, epochs, controllers, elections = _store_verdicts(
            group, writer, register, watchers)
        masterless = spans_by_kind(masterless_spans(masters.events, group_key(GROUP),
                                                    live_prefix(GROUP), end, group.downs),
                                   windows)
        if not masters.events:   # nothing timed: the figures say nothing (test_chaos fails)
            masterless = {}
        message_outages = outages_by_kind(workload.ack_times, windows, end)
        config_outages = outages_by_kind(writer.ack_times, windows, end)
        line = summary(seed, len(faults), verdict, workload.longest_outage_s,
                       workload.unacknowledged, keys=keys, register=chain, watches=watches,
                       epochs=epochs, controllers=controllers,
                       outages={kind: (message_outages[kind], config_outages[kind])
                                for kind in message_outages},
                       elections=elections, masterless=masterless)
        # A wait naming nobody (the controller bug branch fix36b fixes: an election from a
        # killed replica's stale live key): reported, with the seed.
        nobody = sum(n.log.read_text(errors="replace").count("waiting for replica(s) []")
                     for n in group.namesrvs if n.log.exists())
        if nobody:
            log(f"chaos seed={seed} the controller waited for replica(s) [] {nobody} times")
        line += (f" waiting_for_nobody={nobody} broker_crashes={len(group.crashes)} "
                 + consumption_summary(consumers) + " " + compaction.line() + " "
                 + kafka_verdict.summary())
        if PARTITION_UNAVAILABLE:   # the row this machine cannot run, said on the line
            line += " left_out=partition_etcd_leader"
            log(f"chaos seed={seed} partition_etcd_leader left out: {PARTITION_UNAVAILABLE}")
        _explain_consumers(consumers, stored, windows, seed, log)
        for problem in [*watchers.errors, *masters.errors, *compaction.problems[:5]]:
            log(f"chaos seed={seed} {problem}")
        for election in [*elections.below, *elections.gone][:5]:
            log(f"chaos seed={seed} election at revision {election.revision}: replica "
                f"{election.master} at epoch {election.epoch}, log end {election.held} "
                f"({election.incarnation or 'no incarnation'}), confirmed "
                f"offset before {election.floor}"
                f"{' (its process was gone)' if election in elections.gone else ''}")
        return Outcome(seed, faults, verdict, keys, chain, watches, epochs, controllers,
                       elections, masterless, consumers, group.crashes, line, compaction,
                       kafka=kafka_verdict)
