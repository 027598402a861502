"""The chaos run's Kafka clients (#40), beside its native ones: two gateway-kafka instances in
front of the chaos group (both config centers, both name servers, registered under a 5 s
lease), confluent-kafka's idempotent `acks=all` producer writing uniquely numbered records
("<seed>:<sequence>") to a topic of its own, and a consumer group of two confluent-kafka
members committing offsets (auto-commit every 500 ms, and on close).

The run's faults apply to them (the broker master killed, stopped, partitioned, its disk
lost, the control plane's...), and one row of its own, `kill_gateway_kafka`: one instance
SIGKILLed, restarted on its port after the hold (tests.chaos.faults).

After the faults the verdict (`check_kafka`, a pure function, unit-tested) reads the topic's
partitions from offset 0 to their high watermarks with a fresh consumer:
- every acknowledged record at the partition and offset its delivery report gave (else lost);
- no record stored twice (an idempotent producer's retried batch is stored once);
- the group was handed every acknowledged record, and nothing the final log does not hold at
  that partition and offset (a phantom read); redeliveries after rebalances are counted, not
  failures (Kafka's consumer is at-least-once);
- the group's committed offsets reach each partition's end.
Reported, not judged: delivery reports with an error and fatal producer errors (librdkafka's
idempotent producer gives up on a sequence it cannot reconcile; the run then starts a new
producer, as an application must), records never acknowledged.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from tests.chaos.verify import outages_by_kind
from tests.support.processes import wait_until

if TYPE_CHECKING:
    from tests.chaos.group import ChaosGroup
    from tests.support.processes import ServiceProcess

KAFKA_TOPIC = "chaos-kafka"
KAFKA_GROUP = "chaos-kafka-group"
PARTITIONS = 2          # queues of the topic on the chaos group: one led by each instance
GATEWAYS = 2
REGISTRATION_TTL_S = 5  # an instance's registration lease (the gateway's default)
MEMBERS = 2
# The producer's pace: records per second (bounded so that the Kafka load, two more Python
# processes on CI's two cores, does not slow the native run it sits beside).
RATE_PER_S = 50
# One produce request in flight per connection: with more, a batch refused as not stored
# (NOT_ENOUGH_REPLICAS) makes the ones behind it OUT_OF_ORDER_SEQUENCE_NUMBER (as Kafka's brokers
# answer), on which librdkafka bumps the producer epoch and numbers every unacknowledged batch
# again — on every partition, so one possibly stored elsewhere (its answer lost to a failover)
# is stored twice. A librdkafka limitation, against Kafka too (confluentinc/librdkafka#4953,
# open; PR #4972); the run found it (docs/replication.md) and keeps to the case it can judge.
MAX_IN_FLIGHT = 1
CLIENT_TUNING = {"topic.metadata.refresh.interval.ms": 1000, "reconnect.backoff.max.ms": 1000}


@dataclass(frozen=True, slots=True)
class KafkaAck:
    partition: int
    offset: int | None   # None: the delivery report gave none (a batch answered as a duplicate)
    value: bytes


@dataclass(frozen=True, slots=True)
class KafkaDelivery:
    partition: int
    offset: int
    value: bytes
    member: int


@dataclass
class KafkaVerdict:
    acknowledged: int = 0
    lost: list[KafkaAck] = field(default_factory=list)       # nowhere in the log
    misplaced: list[KafkaAck] = field(default_factory=list)  # in the log, at another offset
    duplicated: list[bytes] = field(default_factory=list)    # stored more than once
    not_consumed: list[KafkaAck] = field(default_factory=list)   # the group never got it
    phantoms: list[KafkaDelivery] = field(default_factory=list)  # not in the final log there
    redelivered: int = 0                                     # deliveries past a record's first
    deliveries: int = 0
    uncommitted: dict[int, tuple[int, int]] = field(default_factory=dict)  # p -> (commit, end)
    # reported, not failures: records never acknowledged are not judged
    failures: list[str] = field(default_factory=list)        # delivery reports with an error
    fatal: list[str] = field(default_factory=list)           # fatal producer errors
    stored: int = 0
    rebalances: int = 0
    longest_outage_s: float = 0.0
    longest_outage_kind: str = ""

    @property
    def ok(self) -> bool:
        return (self.acknowledged > 0 and self.deliveries > 0 and not self.lost
                and not self.misplaced and not self.duplicated and not self.not_consumed and not self.phantoms
                and not self.uncommitted)

    def summary(self) -> str:
        return (f"kafka:acks={self.acknowledged} lost={len(self.lost)} "
                f"misplaced={len(self.misplaced)} duplicated={len(self.duplicated)} stored={self.stored} "
                f"group_deliveries={self.deliveries} not_consumed={len(self.not_consumed)} "
                f"phantom_reads={len(self.phantoms)} redelivered={self.redelivered} "
                f"rebalances={self.rebalances} uncommitted_partitions={len(self.uncommitted)} "
                f"delivery_failures={len(self.failures)} fatal_errors={len(self.fatal)} "
                f"longest_produce_outage={self.longest_outage_s:.2f}s"
                f"({self.longest_outage_kind or '-'})")


def check_kafka(acks: Sequence[KafkaAck], log: Mapping[tuple[int, int], bytes],
                deliveries: Sequence[KafkaDelivery], committed: Mapping[int, int],
                ends: Mapping[int, int]) -> KafkaVerdict:
    """`log`: (partition, offset) -> value of every record read back from offset 0 to the high
    watermarks `ends` (partition -> end) after the run; `committed`: partition -> the group's
    committed offset (-1 or absent: none). An acknowledged record nowhere in the log is lost;
    one elsewhere than the partition and offset its delivery report gave is misplaced (the
    acknowledgement pointed a reader at another record)."""
    verdict = KafkaVerdict(acknowledged=len(acks), deliveries=len(deliveries), stored=len(log))
    where: dict[bytes, set[tuple[int, int]]] = {}
    for place, value in log.items():
        where.setdefault(value, set()).add(place)
    for ack in acks:
        places = where.get(ack.value, set())
        if not places:
            verdict.lost.append(ack)
        elif ack.offset is None:   # no offset reported: anywhere in its partition
            if not any(partition == ack.partition for partition, _ in places):
                verdict.misplaced.append(ack)
        elif (ack.partition, ack.offset) not in places:
            verdict.misplaced.append(ack)
    copies = Counter(log.values())
    verdict.duplicated = sorted(value for value, count in copies.items() if count > 1)
    handed = {delivery.value for delivery in deliveries}
    verdict.not_consumed = [ack for ack in acks if ack.value not in handed]
    verdict.phantoms = [d for d in deliveries if log.get((d.partition, d.offset)) != d.value]
    verdict.redelivered = len(deliveries) - len(handed)
    verdict.uncommitted = {p: (committed.get(p, -1), end) for p, end in ends.items()
                           if end > 0 and committed.get(p, -1) < end}
    return verdict


class KafkaChaos:
    """The gateways, the producer and the group of one chaos run. `start` returns at once:
    the gateways start and the clients begin in the background (Python start-up overlaps the
    native clients'); `ready()` says when the first record was acknowledged and consumed, and
    raises what went wrong starting them."""

    def __init__(self, tmp_path: Path, stack: ExitStack, group: ChaosGroup, seed: int) -> None:
        from tests.support.cluster import process_group

        self.group, self.seed = group, seed
        self._start_process = stack.enter_context(process_group(Path(tmp_path) / "kafka"))
        stack.callback(self.stop)
        self.acks: list[KafkaAck] = []
        self.ack_times: list[float] = []
        self.failures: list[str] = []
        self.fatal: list[str] = []
        self.deliveries: list[KafkaDelivery] = []
        self.rebalances = 0
        self.consumer_errors = 0
        self._problem: BaseException | None = None
        self._log: dict[tuple[int, int], bytes] = {}
        self._stop_producing = threading.Event()
        self._stop_consuming = threading.Event()
        self._threads: list[threading.Thread] = []
        self._starter = threading.Thread(target=self._begin, name="chaos-kafka-start")

    @property
    def bootstrap(self) -> str:
        return ",".join(g.addr for g in self.group.kafka_gateways)

    def start(self) -> KafkaChaos:
        self._starter.start()
        return self

    def ready(self) -> bool:
        if self._problem is not None:
            raise RuntimeError(f"the chaos run's Kafka clients did not start: "
                               f"{self._problem!r}") from self._problem
        return bool(self.acks) and bool(self.deliveries)

    def _begin(self) -> None:
        from tidemq.configclient.client import ConfigClient
        from tidemq.configclient.topics import TopicDefinitions

        try:
            with ConfigClient(self.group.config_addrs, timeout=10.0) as config:
                TopicDefinitions(config).create(KAFKA_TOPIC, PARTITIONS)
            with ThreadPoolExecutor(GATEWAYS) as pool:   # Python start-up dominates
                gateways = list(pool.map(lambda _: self._start_gateway(), range(GATEWAYS)))
            self.group.kafka_gateways.extend(gateways)
            self._threads = [threading.Thread(target=self._produce, name="chaos-kafka-producer")]
            self._threads += [threading.Thread(target=self._consume, args=(member,),
                                               name=f"chaos-kafka-member{member}")
                              for member in range(MEMBERS)]
            for thread in self._threads:
                thread.start()
        except BaseException as exc:   # said by ready(), in the run's thread
            self._problem = exc

    def _start_gateway(self) -> ServiceProcess:
        return self._start_process("tidemq.gatewaykafka", [
            "--namesrv-addrs", self.group.namesrv_addrs,
            "--config-center", self.group.config_addrs, "--advertised-host", "127.0.0.1",
            "--registration-ttl-s", str(REGISTRATION_TTL_S), "--send-timeout-s", "10"])

    # -- the producer ----------------------------------------------------------------------
    def _on_delivery(self, err, msg) -> None:
        if err is None:
            self.acks.append(KafkaAck(msg.partition(), msg.offset(), msg.value()))
            self.ack_times.append(time.monotonic())
        else:
            self.failures.append(f"{msg.value()!r}: {err}")

    def _on_error(self, err) -> None:
        if err.fatal():
            self.fatal.append(str(err))

    def _produce(self) -> None:
        """Records at RATE_PER_S; after a fatal error (librdkafka's idempotence: the producer
        is unusable) a new producer, as an application must: its records in flight fail
        (unacknowledged, counted), the next ones go on under a new producer id."""
        from confluent_kafka import KafkaException, Producer

        sequence, pace = 0, 1.0 / RATE_PER_S
        while not self._stop_producing.is_set():
            fatal = len(self.fatal)
            producer = Producer({
                "bootstrap.servers": self.bootstrap, "enable.idempotence": True,
                "acks": "all", "linger.ms": 10, "message.timeout.ms": 120000,
                "max.in.flight.requests.per.connection": MAX_IN_FLIGHT,
                "error_cb": self._on_error, "client.id": "chaos-kafka-producer",
                **CLIENT_TUNING})
            next_at = time.monotonic()
            try:
                while not self._stop_producing.is_set() and len(self.fatal) == fatal:
                    producer.produce(KAFKA_TOPIC, f"{self.seed}:{sequence}".encode(),
                                     on_delivery=self._on_delivery)
                    sequence += 1
                    next_at += pace
                    # the producer's pace (not a synchronisation): delivery reports meanwhile
                    producer.poll(max(0.0, next_at - time.monotonic()))
            except KafkaException as exc:   # produce() raises once the producer is fatal
                if not exc.args[0].fatal():
                    raise
                if len(self.fatal) == fatal:
                    self.fatal.append(str(exc.args[0]))
            producer.flush(10 if len(self.fatal) > fatal else 120)

    # -- the group -------------------------------------------------------------------------
    def _consume(self, member: int) -> None:
        from confluent_kafka import Consumer

        def assigned(consumer, partitions) -> None:
            self.rebalances += 1

        consumer = Consumer({
            "bootstrap.servers": self.bootstrap, "group.id": KAFKA_GROUP,
            "client.id": f"chaos-kafka-member{member}", "auto.offset.reset": "earliest",
            "enable.auto.commit": True, "auto.commit.interval.ms": 500,
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 1000, **CLIENT_TUNING})
        consumer.subscribe([KAFKA_TOPIC], on_assign=assigned)
        try:
            while not self._stop_consuming.is_set():
                msg = consumer.poll(0.2)
                if msg is None:
                    continue
                if msg.error():
                    self.consumer_errors += 1
                    continue
                self.deliveries.append(KafkaDelivery(msg.partition(), msg.offset(), msg.value(),
                                                     member))
        finally:
            consumer.close()   # commits what it was handed

    # -- the run's hooks ---------------------------------------------------------------------
    def wait_ack_after(self, what: str, timeout: float) -> None:
        """Until a record is acknowledged after this call (each fault's recovery)."""
        acked = len(self.acks)
        wait_until(lambda: len(self.acks) > acked or self.fatal, timeout, interval=0.2,
                   message=f"an acknowledged Kafka record after {what}")

    def stop_producing(self) -> None:
        """No new record; the producer thread flushes what is in flight."""
        self._stop_producing.set()

    def stop(self) -> None:
        self._stop_producing.set()
        self._stop_consuming.set()
        if self._starter.is_alive():
            self._starter.join(120)
        for thread in self._threads:
            thread.join(150)

    def finish(self, windows: Sequence[tuple[str, float]], end: float, drain_s: float,
               log=print) -> KafkaVerdict:
        """After the faults: the producer's in-flight records settled, the group drained and
        its commits at the ends (polled up to `drain_s`), the log read back, the verdict."""
        self._stop_producing.set()
        if self._threads:
            self._threads[0].join(150)
        wanted = {ack.value for ack in self.acks}
        ends: dict[int, int] = {}
        committed: dict[int, int] = {}

        def drained() -> bool:
            nonlocal ends, committed
            if wanted - {d.value for d in self.deliveries}:
                return False
            ends, committed = self._ends_and_commits()
            return all(committed.get(p, -1) >= end for p, end in ends.items() if end > 0)

        try:
            wait_until(drained, drain_s, interval=0.5)
        except TimeoutError:
            log(f"chaos seed={self.seed} the Kafka group not drained and committed after "
                f"{drain_s}s")
        self._stop_consuming.set()
        for thread in self._threads[1:]:
            thread.join(60)
        ends, committed = self._ends_and_commits()   # after the members' closing commits
        self._log = read_log(self.bootstrap, ends)
        verdict = check_kafka(self.acks, self._log, self.deliveries, committed, ends)
        verdict.failures, verdict.fatal, verdict.rebalances = (list(self.failures),
                                                               list(self.fatal), self.rebalances)
        outages = outages_by_kind(self.ack_times, windows, end)
        if outages:
            verdict.longest_outage_kind = max(outages, key=outages.get)
            verdict.longest_outage_s = outages[verdict.longest_outage_kind]
        stored_log = self._log
        at = dict(zip(self.acks, self.ack_times, strict=True))
        for ack in [*verdict.lost[:5], *verdict.misplaced[:5]]:
            places = sorted(p for p, v in stored_log.items() if v == ack.value)
            log(f"chaos seed={self.seed} kafka: {ack.value!r} acknowledged at {ack.partition}@"
                f"{ack.offset} at {_when(at.get(ack, 0.0), windows)}; the final log holds "
                f"{stored_log.get((ack.partition, ack.offset))!r} there and the record at "
                f"{places or 'no offset'}")
        for value in verdict.duplicated[:5]:
            places = sorted(p for p, v in stored_log.items() if v == value)
            acked = [ack for ack in self.acks if ack.value == value]
            log(f"chaos seed={self.seed} kafka: {value!r} stored at {places}, acknowledged "
                + (f"at {acked[0].partition}@{acked[0].offset} at "
                   f"{_when(at[acked[0]], windows)}" if acked else "never"))
        for delivery in verdict.phantoms[:5]:
            log(f"chaos seed={self.seed} kafka: member {delivery.member} was handed "
                f"{delivery.value!r} at {delivery.partition}@{delivery.offset}, not in the "
                f"final log there")
        for problem in [*verdict.failures[:5], *verdict.fatal[:5]]:
            log(f"chaos seed={self.seed} kafka: {problem}")
        return verdict

    def _ends_and_commits(self) -> tuple[dict[int, int], dict[int, int]]:
        """Each partition's high watermark and the group's committed offset (a fresh client
        of the group that joins nothing: OffsetFetch only)."""
        from confluent_kafka import Consumer, TopicPartition

        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": KAFKA_GROUP,
                             "enable.auto.commit": False})
        try:
            partitions = [TopicPartition(KAFKA_TOPIC, p) for p in range(PARTITIONS)]
            ends = {tp.partition: consumer.get_watermark_offsets(tp, timeout=20)[1]
                    for tp in partitions}
            committed = {tp.partition: tp.offset
                         for tp in consumer.committed(partitions, timeout=20)}
            return ends, committed
        finally:
            consumer.close()


def _when(at: float, windows: Sequence[tuple[str, float]]) -> str:
    """`at` relative to the fault whose window it falls in (for the log)."""
    before = [(kind, start) for kind, start in windows if start <= at]
    if not before:
        return "before the first fault"
    kind, start = before[-1]
    return f"{kind} #{len(before)} +{at - start:.2f}s"


def read_log(bootstrap: str, ends: Mapping[int, int], timeout_s: float = 90.0
             ) -> dict[tuple[int, int], bytes]:
    """Every record of the topic, from offset 0 to `ends` (partition -> high watermark), with
    a fresh consumer that commits nothing; the values of one place read twice must agree."""
    from confluent_kafka import Consumer, KafkaException, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{KAFKA_TOPIC}-audit",
                         "enable.auto.commit": False})
    log: dict[tuple[int, int], bytes] = {}
    try:
        consumer.assign([TopicPartition(KAFKA_TOPIC, p, 0) for p in ends])
        done = {p for p, end in ends.items() if end == 0}
        deadline = time.monotonic() + timeout_s
        while len(done) < len(ends) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error():
                raise KafkaException(msg.error())
            log[(msg.partition(), msg.offset())] = msg.value()
            if msg.offset() + 1 >= ends[msg.partition()]:
                done.add(msg.partition())
        assert len(done) == len(ends), f"the Kafka topic was not read to its ends {ends}"
        return log
    finally:
        consumer.close()
