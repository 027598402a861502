"""One chaos run: producers and a consumer against a 3-replica group while a seeded schedule
of faults hits it; then every fault is undone, the replicas converge and the verdicts run.

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

from tests.chaos.group import GROUP, LEASE_TTL_S, ChaosGroup, start_group
from tests.chaos.schedule import Fault, schedule
from tests.chaos.verify import Ack, Verdict, check_acks, check_replicas, summary
from tests.support.processes import wait_until

TOPIC = "chaos"
QUEUES = 2
RECOVERY_TIMEOUT_S = 90


class Workload:
    """A producer sending one message at a time with SYNC acknowledgements (each body unique)
    and a consumer reading every queue; both ride out faults and keep going."""

    def __init__(self, group: ChaosGroup, seed: int) -> None:
        from tidemq.client import Producer, PullConsumer

        self.seed = seed
        self.producer = Producer(group.namesrv_addrs, send_timeout=5.0, route_refresh_s=1.0)
        self.consumer = PullConsumer(group.namesrv_addrs, consumer_group="chaos-readers",
                                     timeout=3.0, route_refresh_s=1.0)
        self.acks: list[Ack] = []
        self.unacknowledged = 0
        self.consumed = 0
        self.longest_outage_s = 0.0
        self._last_ack = time.monotonic()
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._produce, name="chaos-producer"),
                         threading.Thread(target=self._consume, name="chaos-consumer")]

    def start(self) -> Workload:
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> None:
        if self._stop.is_set():
            return
        self._stop.set()
        for thread in self._threads:
            thread.join(30)
        self.producer.close()
        self.consumer.close()

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

    def _consume(self) -> None:
        from tidemq.common.errors import TideMQError

        offsets: dict[int, int] = {}
        while not self._stop.is_set():
            try:
                for mq in self.consumer.fetch_queues(TOPIC):
                    pulled = self.consumer.pull(mq, offsets.get(mq.queue_id, 0), 64,
                                                long_poll=0.2)
                    self.consumed += len(pulled.messages)
                    offsets[mq.queue_id] = max(offsets.get(mq.queue_id, 0), pulled.next_offset)
            except TideMQError:
                self._stop.wait(0.1)


@dataclass
class Outcome:
    seed: int
    faults: list[Fault]
    verdict: Verdict
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


def _read_back(group: ChaosGroup) -> dict[tuple[int, int], bytes]:
    from tidemq.client import PullConsumer

    stored: dict[tuple[int, int], bytes] = {}
    with PullConsumer(group.namesrv_addrs, consumer_group="chaos-verifier") as consumer:
        for mq in consumer.fetch_queues(TOPIC):
            offset = 0
            while True:
                pulled = consumer.pull(mq, offset, 256)
                for message in pulled.messages:
                    stored[(mq.queue_id, message.queue_offset)] = bytes(message.body)
                if pulled.next_offset >= pulled.max_offset or pulled.next_offset <= offset:
                    break
                offset = pulled.next_offset
    return stored


def _wait_or_explain(group: ChaosGroup, condition, what: str):
    """Poll `condition`; past the deadline fail with what the controller and every process
    said last, so a stuck run explains itself."""
    try:
        return wait_until(condition, RECOVERY_TIMEOUT_S, interval=0.2, message=what)
    except TimeoutError as exc:
        raise TimeoutError(f"{exc}\n{group.explain()}") from None


def run_chaos(tmp_path: Path, seed: int, fault_count: int, log=print) -> Outcome:
    faults = schedule(seed, fault_count, lease_ttl_s=LEASE_TTL_S)
    rng = random.Random(seed ^ 0x5EED)
    with ExitStack() as stack:
        group = start_group(tmp_path, stack)
        _create_topic(group)
        workload = Workload(group, seed).start()
        stack.callback(workload.stop)
        wait_until(lambda: workload.acks, 60, message="the first acknowledged send")
        for number, fault in enumerate(faults, 1):
            undo = _apply(group, fault, rng)
            log(f"chaos seed={seed} fault {number}/{len(faults)}: {fault}")
            time.sleep(fault.hold_s)   # the fault's duration (not a synchronisation)
            undo()
            _wait_or_explain(group, lambda: group.healthy(in_sync=2),
                             f"{GROUP} writable again after {fault} (seed {seed})")
            acked = len(workload.acks)
            wait_until(lambda acked=acked: len(workload.acks) > acked, RECOVERY_TIMEOUT_S, interval=0.05,
                       message=f"an acknowledged send after {fault} (seed {seed})")
            time.sleep(fault.settle_s)   # traffic between faults
        workload.stop()
        group.undo_all()
        confirmed = _wait_or_explain(group, group.converged,
                                     f"every replica of {GROUP} in sync (seed {seed})")
        verdict = check_acks(workload.acks, _read_back(group))
        verdict.diverged = check_replicas(
            {f"replica-{r.replica_id}": r.commitlog_dir for r in group.replicas}, confirmed)
        line = summary(seed, len(faults), verdict, workload.longest_outage_s,
                       workload.unacknowledged)
        return Outcome(seed, faults, verdict, line)
