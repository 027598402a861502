"""Request handlers by API key: Kafka requests in, response dicts out (codec.py encodes them).

A handler validates, calls the backend (blocking SDK calls run on the gateway's thread pool),
and maps results and TideMQ errors to Kafka's fields and error codes; no TideMQ logic here.
Partition leaders and group coordinators are spread over the live gateway instances
(nodes.py); any instance serves any request.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from tidemq.common import errors
from tidemq.common.logs import get_logger
from tidemq.configclient import topic_settings
from tidemq.gatewaykafka import codec, metrics, records, spans
from tidemq.gatewaykafka.backend import KafkaBackend
from tidemq.gatewaykafka.coordination import (
    NATIVE_PROTOCOL_TYPE,
    Described,
    GroupCoordination,
    split_protocol,
)
from tidemq.gatewaykafka.fetch_wait import FetchWaits
from tidemq.gatewaykafka.nodes import INTERNAL, GatewayNodes
from tidemq.gatewaykafka.security import SaslState

log = get_logger(__name__)

EARLIEST, LATEST = -2, -1
TIME_SCAN_RECORDS = 10_000      # ListOffsets by time reads at most this many past its start
TIME_SCAN_BYTES = 1 << 20       # ... this much per read
KAFKA_CODES = {                 # TideMQ error codes Kafka has a name for
    "TOPIC_NOT_EXIST": "UNKNOWN_TOPIC_OR_PARTITION", "INVALID_TOPIC": "INVALID_TOPIC_EXCEPTION",
    "MESSAGE_TOO_LARGE": "MESSAGE_TOO_LARGE", "TOPIC_ALREADY_EXISTS": "TOPIC_ALREADY_EXISTS",
    "ALREADY_EXISTS": "TOPIC_ALREADY_EXISTS", "DEADLINE_EXCEEDED": "REQUEST_TIMED_OUT",
    "PERMISSION_DENIED": "TOPIC_AUTHORIZATION_FAILED", "NOT_MASTER": "NOT_COORDINATOR",
    "SLAVE_NOT_AVAILABLE": "NOT_ENOUGH_REPLICAS", "SERVICE_UNAVAILABLE": "LEADER_NOT_AVAILABLE",
    "CIRCUIT_OPEN": "LEADER_NOT_AVAILABLE", "INVALID_MESSAGE": "INVALID_RECORD",
    "BROKER_NOT_FOUND": "UNKNOWN_TOPIC_OR_PARTITION", "INVALID_ARGUMENT": "INVALID_REQUEST",
    "INVALID_TOPIC_CONFIG": "INVALID_CONFIG",
    "STORAGE_FULL": "KAFKA_STORAGE_ERROR",   # retriable in every client, as the disk guard is
}
# ... and on Produce, where a send that failed after reaching a broker (its connection lost, its
# attempts exhausted into an open circuit) may have been stored: Kafka's "possibly persisted"
# error, so an idempotent producer retries it under the same sequence (the broker answers a
# stored one as a duplicate) instead of numbering it again under a new epoch (stored twice)
PRODUCE_CODES = {"SERVICE_UNAVAILABLE": "REQUEST_TIMED_OUT", "CIRCUIT_OPEN": "REQUEST_TIMED_OUT",
                 # refused before anything was appended: retriable, not stored (these were
                 # UNKNOWN_SERVER_ERROR, which clients give up on)
                 "NOT_MASTER": "NOT_LEADER_OR_FOLLOWER",
                 "GROUP_HAS_NO_MASTER": "NOT_LEADER_OR_FOLLOWER"}
GROUP_CODES = {                 # ... and on group calls, where unavailability is the coordinator's
    "SERVICE_UNAVAILABLE": "COORDINATOR_NOT_AVAILABLE", "CIRCUIT_OPEN": "COORDINATOR_NOT_AVAILABLE",
    "DEADLINE_EXCEEDED": "COORDINATOR_NOT_AVAILABLE",
}
TRANSACTIONS_REFUSAL = (
    "gateway-kafka does not serve Kafka transactions: drop transactional.id (the idempotent "
    "producer is served), or use TideMQ's transactional messages through its own SDK")
# DescribeConfigs: besides the per-topic settings (topic_settings.py, from the definition),
# what every topic answers and nothing changes (docs/kafka.md)
TOPIC_CONFIGS = {"compression.type": "producer"}
CONFIG_SOURCE = {"topic": 1, "default": 5}   # DYNAMIC_TOPIC_CONFIG, DEFAULT_CONFIG


def _fit_response(answers: list[dict], max_bytes: int) -> None:
    """The request's max_bytes (fetch.max.bytes) over all partitions: partitions past it answer
    no records this time (the client fetches them again from the same offset); the first
    partition with records is always answered whole."""
    used = 0
    for answer in answers:
        size = len(answer["records"] or b"")
        if size and used and used + size > max_bytes:
            answer["records"] = b""
        else:
            used += size


def kafka_code(exc: BaseException, table: dict[str, str] | None = None) -> int:
    if isinstance(exc, records.RecordError):
        return codec.ERRORS[exc.kafka_error]
    if isinstance(exc, errors.TideMQError):
        code = exc.code
        if code in codec.ERRORS:
            return codec.ERRORS[code]
        name = (table or {}).get(code) or KAFKA_CODES.get(code)
        if name:
            return codec.ERRORS[name]
    return codec.ERRORS["UNKNOWN_SERVER_ERROR"]


Handler = Callable[[Any, int, "Connection"], Awaitable[dict | None]]


@dataclass(slots=True)
class Connection:
    peer_host: str
    client_id: str = ""
    client_software: str = ""
    sasl: SaslState = field(default_factory=SaslState)   # security.py
    close_after: bool = False   # close once this request's answer is written
    throttled_until: float = 0.0   # monotonic: not read again before (a broker throttled it)
    listener: str = INTERNAL    # the listener it came in on: the addresses it is given


class KafkaApis:
    def __init__(self, backend: KafkaBackend, coordination: GroupCoordination,
                 nodes: Callable[[], GatewayNodes], *, pool: ThreadPoolExecutor,
                 max_record_batch_bytes: int, cluster_id: str,
                 auto_create_partitions: int = 0) -> None:
        self.backend, self.coordination, self.nodes = backend, coordination, nodes
        self.pool = pool
        self.max_record_batch_bytes = max_record_batch_bytes
        self.cluster_id = cluster_id
        self.auto_create_partitions = auto_create_partitions
        self.waits = FetchWaits(backend, self._run)
        self.table: dict[int, Handler] = {
            0: self.produce, 1: self.fetch, 2: self.list_offsets, 3: self.metadata,
            8: self.offset_commit, 9: self.offset_fetch, 10: self.find_coordinator,
            11: self.join_group, 12: self.heartbeat, 13: self.leave_group, 14: self.sync_group,
            15: self.describe_groups, 16: self.list_groups,
            18: self.api_versions, 19: self.create_topics, 20: self.delete_topics,
            22: self.init_producer_id, 32: self.describe_configs, 37: self.create_partitions,
            44: self.incremental_alter_configs,
        }
        assert set(self.table) | codec.SASL_APIS == set(codec.SUPPORTED)

    async def _run(self, function: Callable, *args: Any) -> Any:
        """`function(*args)` on the pool, in the caller's context: the request's span is the
        parent of the broker calls it makes (spans.py)."""
        call = contextvars.copy_context().run
        return await asyncio.get_running_loop().run_in_executor(self.pool, call, function,
                                                                *args)

    # -- cluster -------------------------------------------------------------------------------

    async def api_versions(self, request, version: int, conn: Connection) -> dict:
        conn.client_software = f"{request.client_software_name or ''} " \
                               f"{request.client_software_version or ''}".strip()
        return codec.api_versions_body()

    async def metadata(self, request, version: int, conn: Connection) -> dict:
        nodes = self.nodes()
        listed = request.topics is None or (version == 0 and not request.topics)
        if listed:
            names = await self._run(self.backend.topics)
        else:
            names = [t.name for t in request.topics]
        # v4+ says whether the client lets a topic be created; earlier versions always did
        # (security.py may have said no for the user: it sets the field then)
        may_create = self.auto_create_partitions > 0 and not listed and \
            getattr(request, "allow_auto_topic_creation", True) is not False
        topics = []
        for name in names:
            try:
                try:
                    queues = await self._run(self.backend.partitions, name)
                except errors.TopicNotExist:
                    if not may_create:
                        raise
                    queues = await self._auto_create(name)
            except errors.TideMQError as exc:
                topics.append({"error_code": kafka_code(exc), "name": name, "partitions": []})
                continue
            leaders = [nodes.leader(name, i).node_id for i in range(len(queues))]
            topics.append({"error_code": 0, "name": name, "is_internal": False, "partitions": [
                {"error_code": 0, "partition_index": i, "leader_id": leader,
                 "leader_epoch": 0, "replica_nodes": [leader], "isr_nodes": [leader],
                 "offline_replicas": []} for i, leader in enumerate(leaders)]})
        live = nodes.live()
        return {"throttle_time_ms": 0, "brokers": [
            {"node_id": n.node_id, "host": host, "port": port, "rack": n.rack}
            for n in live for host, port in (n.endpoint(conn.listener),)],
            "cluster_id": self.cluster_id, "controller_id": live[0].node_id, "topics": topics}

    async def _auto_create(self, name: str) -> list:
        """Create `name` with the gateway's default partition count (Kafka's auto-creation);
        another request creating it first is fine. Its partitions, once routed."""
        log.info("topic_auto_created", topic=name, partitions=self.auto_create_partitions)
        with contextlib.suppress(errors.AlreadyExists):
            await self._run(self.backend.create_topic, name, self.auto_create_partitions)
        return await self._run(self.backend.partitions, name)

    async def find_coordinator(self, request, version: int, conn: Connection) -> dict:
        if request.key_type not in (0, None):   # 1 = a transaction coordinator
            # fatal in every client (not retried until a timeout), with the sentence where
            # the client shows it (librdkafka does; kafka-python raises the bare error)
            return {"throttle_time_ms": 0,
                    "error_code": codec.ERRORS["TRANSACTIONAL_ID_AUTHORIZATION_FAILED"],
                    "error_message": TRANSACTIONS_REFUSAL, "node_id": -1, "host": "",
                    "port": -1}
        node = self.nodes().coordinator(request.key or "")
        host, port = node.endpoint(conn.listener)
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "node_id": node.node_id, "host": host, "port": port}

    # -- produce -------------------------------------------------------------------------------

    async def produce(self, request, version: int, conn: Connection) -> dict | None:
        if request.transactional_id is not None:
            answer = codec.ERRORS["TRANSACTIONAL_ID_AUTHORIZATION_FAILED"]
            return self._produce_answer(request, lambda t, p: (answer, -1, -1),
                                        TRANSACTIONS_REFUSAL)
        results: dict[tuple[str, int], tuple[int, int, int]] = {}
        span = trace.get_current_span()
        traced = span.is_recording()   # else no record's headers are looked at for the links
        jobs = [(topic.name, part.index, part.records, traced)
                for topic in request.topic_data for part in topic.partition_data]
        outcomes = await asyncio.gather(*(self._run(self._produce_partition, *job)
                                          for job in jobs))
        produced: list[spans.RecordContexts] = []
        for (name, index, _, _), (code, offset, append_time, contexts) in zip(jobs, outcomes,
                                                                           strict=True):
            results[(name, index)] = code, offset, append_time
            produced.append((name, index, offset, contexts))
        if traced:
            spans.link_records(span, produced)
        if request.acks == 0:
            return None
        return self._produce_answer(request, lambda t, p: results[(t, p)])

    @staticmethod
    def _produce_answer(request, outcome: Callable[[str, int], tuple[int, int, int]],
                        message: str | None = None) -> dict:
        return {"throttle_time_ms": 0, "responses": [
            {"name": topic.name, "partition_responses": [
                {"index": part.index, "error_code": outcome(topic.name, part.index)[0],
                 "base_offset": outcome(topic.name, part.index)[1],
                 "log_append_time_ms": outcome(topic.name, part.index)[2],
                 "log_start_offset": -1, "record_errors": [], "error_message": message}
                for part in topic.partition_data]} for topic in request.topic_data]}

    def _produce_partition(self, topic: str, index: int, record_set, traced: bool = False
                           ) -> tuple[int, int, int, list]:
        """(error code, base offset, log append time or -1, the records' trace contexts) of
        one partition's record set; the append time (a LogAppendTime topic's) is the first
        message's store time, as the broker's Send answers it. With `traced`, the contexts
        are (position, span context) of each record with a valid `traceparent` header: the
        request's span links to them (spans.py)."""
        contexts: list = []
        try:
            mq = self.backend.partition(topic, index)
            batches = [records.decode_batch(raw, max_uncompressed=self.max_record_batch_bytes)
                       for raw in records.split_batches(record_set or b"")]
            sequence = records.batches_sequence(batches)
            produced = [r for batch in batches for r in batch.records]
            if traced:
                contexts = [(position, context) for position, context in
                            enumerate(spans.record_context(r.headers) for r in produced)
                            if context is not None]
            messages = [records.to_message(topic, r) for r in produced]
            if not messages:
                raise records.RecordError("CORRUPT_MESSAGE", "a produce with no records")
            # read before the send: nothing after it may turn a stored batch into an error
            log_append_time = self.backend.log_append_time(topic)
            offset, stored = self.backend.produce(mq, messages, sequence)
            metrics.RECORDS_PRODUCED.inc(len(messages))
        except (errors.TideMQError, records.RecordError) as exc:
            log.info("produce_refused", topic=topic, partition=index, error=str(exc))
            return kafka_code(exc, PRODUCE_CODES), -1, -1, contexts
        return 0, offset, (stored or -1) if log_append_time else -1, contexts

    # -- fetch and offsets ---------------------------------------------------------------------

    async def fetch(self, request, version: int, conn: Connection) -> dict:
        """Read every wanted partition; when that finds less than `min_bytes` (and no error),
        wait up to `max_wait_ms` on the brokers' long polls for data, then read again."""
        deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
        wanted = [(t.topic, p.partition, p.fetch_offset,
                   min(p.partition_max_bytes, request.max_bytes))
                  for t in request.topics for p in t.partitions]
        while True:
            answers = await asyncio.gather(*(self._run(self._fetch_partition, *w)
                                             for w in wanted))
            size = sum(len(a["records"] or b"") for a in answers)
            remaining = deadline - time.monotonic()
            if size >= max(request.min_bytes, 1) or remaining <= 0 or \
                    any(a["error_code"] for a in answers):
                break
            # wait where each partition ends now: past data already found when min_bytes asks
            # for more than there is
            await self.waits.wait(
                [(topic, index, max(offset, answer["high_watermark"]))
                 for (topic, index, offset, _), answer in zip(wanted, answers, strict=True)],
                remaining)
        _fit_response(answers, request.max_bytes)
        by_topic: dict[str, list[dict]] = {}
        for (topic, *_), answer in zip(wanted, answers, strict=True):
            by_topic.setdefault(topic, []).append(answer)
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0,
                "responses": [{"topic": t, "partitions": p} for t, p in by_topic.items()]}

    def _fetch_partition(self, topic: str, index: int, offset: int, max_bytes: int) -> dict:
        answer = {"partition_index": index, "error_code": 0, "high_watermark": -1,
                  "last_stable_offset": -1, "log_start_offset": -1, "aborted_transactions": None,
                  "preferred_read_replica": -1, "records": b""}
        try:
            mq = self.backend.partition(topic, index)
            with _own_trace_unless_recorded():
                fetched = self.backend.fetch(mq, offset, max_bytes)
            log_append_time = bool(fetched.messages) and self.backend.log_append_time(topic)
        except errors.TideMQError as exc:
            answer["error_code"] = kafka_code(exc)
            return answer
        answer.update(high_watermark=fetched.high_watermark,
                      last_stable_offset=fetched.high_watermark,
                      log_start_offset=fetched.log_start)
        if fetched.out_of_range:
            answer["error_code"] = codec.ERRORS["OFFSET_OUT_OF_RANGE"]
        elif fetched.messages:
            # the broker's pull kept to max_bytes in stored sizes, which a compressed body
            # makes far smaller than the records answered: keep to it in record sizes too
            answer["records"] = records.encode_fetched(fetched.messages, max_bytes,
                                                       log_append_time)
        return answer

    async def list_offsets(self, request, version: int, conn: Connection) -> dict:
        async def one(topic: str, part) -> dict:
            answer = {"partition_index": part.partition_index, "error_code": 0,
                      "timestamp": -1, "offset": -1, "leader_epoch": 0}
            try:
                mq = await self._run(self.backend.partition, topic, part.partition_index)
                if part.timestamp in (EARLIEST, LATEST):
                    low, high = await self._run(self.backend.offsets, mq)
                    answer["offset"] = low if part.timestamp == EARLIEST else high
                else:
                    answer["offset"], answer["timestamp"] = await self._run(
                        self._offset_for_time, topic, mq, part.timestamp)
            except errors.TideMQError as exc:
                answer["error_code"] = kafka_code(exc)
            return answer

        return {"throttle_time_ms": 0, "topics": [
            {"name": t.name, "partitions": list(await asyncio.gather(
                *(one(t.name, p) for p in t.partitions)))} for t in request.topics]}

    def _offset_for_time(self, topic: str, mq, target_ms: int) -> tuple[int, int]:
        """(offset, timestamp) of the earliest record whose Kafka timestamp is >= target_ms,
        (-1, -1) when none is, as Kafka answers. The brokers index store time, so for a
        LogAppendTime topic their answer (the first record stored at or after the target,
        with its store time) is the answer: no record is read. For CreateTime, a record
        stored at or after the target is the first candidate (a CreateTime is not later than
        its store time when the producer's clock is not ahead of the broker's), and records
        from there are read, only their timestamp property decoded, until one's timestamp
        reaches the target: only those created before it and stored after it are passed
        over, at most TIME_SCAN_RECORDS of them."""
        offset, stored = self.backend.offset_for_time(mq, target_ms)
        if self.backend.log_append_time(topic):
            return (offset, stored) if stored else (-1, -1)
        if not stored:   # nothing was stored at or after the target: nothing created then
            return -1, -1
        scanned = 0
        while scanned < TIME_SCAN_RECORDS:
            fetched = self.backend.fetch(mq, offset, TIME_SCAN_BYTES)
            if fetched.out_of_range or not fetched.messages:
                return -1, -1
            for message in fetched.messages:
                stamp = records.timestamp_of(message)
                if stamp >= target_ms:
                    return message.queue_offset, stamp
            offset = fetched.messages[-1].queue_offset + 1
            scanned += len(fetched.messages)
        return offset, -1   # gave up scanning: the next offset, no timestamp known

    # -- groups --------------------------------------------------------------------------------

    async def join_group(self, request, version: int, conn: Connection) -> dict:
        answer = {"throttle_time_ms": 0, "error_code": 0, "generation_id": -1,
                  "protocol_name": "", "leader": "", "member_id": request.member_id or "",
                  "members": []}
        if request.group_instance_id is not None:
            answer["error_code"] = codec.ERRORS["INVALID_REQUEST"]
            return answer    # static membership (KIP-345) is not served
        rebalance_ms = request.rebalance_timeout_ms
        if version == 0 or rebalance_ms is None or rebalance_ms < 0:
            rebalance_ms = request.session_timeout_ms
        try:
            joined = await self._run(lambda: self.coordination.join(
                request.group_id, request.member_id or "",
                session_timeout_ms=request.session_timeout_ms,
                rebalance_timeout_ms=rebalance_ms, client_id=conn.client_id,
                client_host=conn.peer_host, protocol_type=request.protocol_type,
                protocols=[(p.name, bytes(p.metadata)) for p in request.protocols],
                client_software=conn.client_software))
        except errors.TideMQError as exc:
            answer["error_code"] = kafka_code(exc, GROUP_CODES)
            return answer
        answer.update(generation_id=joined.generation_id, protocol_name=joined.protocol_name,
                      leader=joined.leader_id, member_id=joined.member_id,
                      members=[{"member_id": m, "group_instance_id": None, "metadata": meta}
                               for m, meta in joined.members])
        return answer

    async def sync_group(self, request, version: int, conn: Connection) -> dict:
        try:
            assignment = await self._run(
                self.coordination.sync, request.group_id, request.generation_id,
                request.member_id, [(a.member_id, bytes(a.assignment))
                                    for a in request.assignments or []], 60.0)
        except errors.TideMQError as exc:
            return {"throttle_time_ms": 0, "error_code": kafka_code(exc, GROUP_CODES),
                    "assignment": b""}
        return {"throttle_time_ms": 0, "error_code": 0, "assignment": assignment}

    async def heartbeat(self, request, version: int, conn: Connection) -> dict:
        try:
            await self._run(self.coordination.heartbeat, request.group_id,
                            request.generation_id, request.member_id)
        except errors.TideMQError as exc:
            return {"throttle_time_ms": 0, "error_code": kafka_code(exc, GROUP_CODES)}
        return {"throttle_time_ms": 0, "error_code": 0}

    async def leave_group(self, request, version: int, conn: Connection) -> dict:
        member_ids = ([m.member_id for m in request.members] if version >= 3
                      else [request.member_id])
        codes = []
        for member_id in member_ids:
            try:
                await self._run(self.coordination.leave, request.group_id, member_id)
                codes.append(0)
            except errors.TideMQError as exc:
                codes.append(kafka_code(exc, GROUP_CODES))
        return {"throttle_time_ms": 0, "error_code": 0 if version >= 3 else codes[0],
                "members": [{"member_id": m, "group_instance_id": None, "error_code": c}
                            for m, c in zip(member_ids, codes, strict=True)]}

    async def describe_groups(self, request, version: int, conn: Connection) -> dict:
        """Each group as its coordinator sees it. A group the coordinator does not know is
        Dead, as in Kafka, unless it committed offsets (a consumer using assign(), a native
        pull or pop group): then Empty with no protocol type, Kafka's "simple" group. A
        native group's members are listed without their (TideMQ-encoded) metadata and
        assignment, which Kafka tools would misread."""
        async def one(group: str) -> dict:
            answer = {"error_code": 0, "group_id": group, "group_state": "Dead",
                      "protocol_type": "", "protocol_data": "", "members": []}
            if not group:
                answer["error_code"] = codec.ERRORS["INVALID_GROUP_ID"]
                return answer
            try:
                described = await self._run(self.coordination.describe, group)
                if described.state == "Dead" and await self._run(self.backend.has_offsets,
                                                                 group):
                    described = Described("Empty", "", "", [])
            except errors.TideMQError as exc:
                answer["error_code"] = kafka_code(exc, GROUP_CODES)
                return answer
            kafka_group = described.protocol_type not in ("", NATIVE_PROTOCOL_TYPE)
            answer.update(
                group_state=described.state, protocol_type=described.protocol_type,
                protocol_data=described.protocol,
                members=[{"member_id": member_id, "group_instance_id": None,
                          "client_id": client_id, "client_host": host,
                          "member_metadata": metadata if kafka_group else b"",
                          "member_assignment": assignment if kafka_group else b""}
                         for member_id, client_id, host, metadata, assignment
                         in described.members])
            return answer

        groups = await asyncio.gather(*(one(g) for g in request.groups))
        return {"throttle_time_ms": 0, "groups": list(groups)}

    async def list_groups(self, request, version: int, conn: Connection) -> dict:
        """Every group that consumed, by any client: Kafka groups with their protocol type
        ("consumer"), native push groups as type "tidemq", and groups that only committed
        offsets or popped (or whose members all left) with no type, Kafka's "simple" groups."""
        try:
            listed = await self._run(self.backend.groups)
        except errors.TideMQError as exc:
            return {"throttle_time_ms": 0, "error_code": kafka_code(exc, GROUP_CODES),
                    "groups": []}
        return {"throttle_time_ms": 0, "error_code": 0, "groups": [
            {"group_id": group, "protocol_type": split_protocol(protocol)[0]}
            for group, _, protocol in listed]}

    async def offset_commit(self, request, version: int, conn: Connection) -> dict:
        group = request.group_id
        generation = request.generation_id_or_member_epoch
        if generation is None or generation < 0:
            generation = -1   # a consumer outside the group protocol (assign()): not fenced

        async def one(topic: str, part) -> dict:
            # the queue's broker takes the commit only from a member of the group's current
            # generation: ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID / REBALANCE_IN_PROGRESS
            try:
                mq = await self._run(self.backend.partition, topic, part.partition_index)
                await self._run(self.backend.commit, group, mq, part.committed_offset,
                                generation, request.member_id or "",
                                part.committed_metadata or "")
                code = 0
            except errors.TideMQError as exc:
                code = kafka_code(exc, GROUP_CODES)
            return {"partition_index": part.partition_index, "error_code": code}

        return {"throttle_time_ms": 0, "topics": [
            {"name": t.name, "partitions": list(await asyncio.gather(
                *(one(t.name, p) for p in t.partitions)))} for t in request.topics]}

    async def offset_fetch(self, request, version: int, conn: Connection) -> dict:
        group = request.group_id
        if request.topics is None:
            # every topic the group has offsets for is not listed yet: the routed topics
            topics = [(name, None) for name in await self._run(self.backend.topics)]
        else:
            topics = [(t.name, list(t.partition_indexes)) for t in request.topics]

        async def one(topic: str, index: int) -> dict:
            answer = {"partition_index": index, "committed_offset": -1,
                      "committed_leader_epoch": -1, "metadata": "", "error_code": 0}
            try:
                mq = await self._run(self.backend.partition, topic, index)
                committed = await self._run(self.backend.committed, group, mq)
                if committed is not None:
                    answer["committed_offset"], answer["metadata"] = committed
            except errors.TideMQError as exc:
                answer["error_code"] = kafka_code(exc)
            return answer

        answers = []
        for name, indexes in topics:
            if indexes is None:
                try:
                    indexes = list(range(len(await self._run(self.backend.partitions, name))))
                except errors.TideMQError:
                    continue
            partitions = list(await asyncio.gather(*(one(name, i) for i in indexes)))
            if request.topics is None:
                partitions = [p for p in partitions if p["committed_offset"] >= 0]
                if not partitions:
                    continue
            answers.append({"name": name, "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": answers, "error_code": 0}

    # -- admin ---------------------------------------------------------------------------------

    async def create_topics(self, request, version: int, conn: Connection) -> dict:
        answers = []
        for topic in request.topics:
            answer = {"name": topic.name, "error_code": 0, "error_message": None}
            try:
                if topic.assignments:
                    raise errors.InvalidArgument("replica assignments are not accepted: "
                                                 "TideMQ places queues itself",
                                                 code="INVALID_REQUEST")
                partitions = topic.num_partitions
                if partitions == -1:
                    partitions = len(await self._run(self.backend.broker_groups))
                if partitions < 1:
                    raise errors.InvalidArgument("num_partitions must be >= 1",
                                                 code="INVALID_PARTITIONS")
                config = topic_settings.parse_settings(
                    {c.name: c.value for c in topic.configs or []})
                if not request.validate_only:
                    await self._run(self.backend.create_topic, topic.name, partitions, config)
            except errors.TideMQError as exc:
                answer.update(error_code=kafka_code(exc), error_message=exc.message)
            answers.append(answer)
        return {"throttle_time_ms": 0, "topics": answers}

    async def create_partitions(self, request, version: int, conn: Connection) -> dict:
        results = []
        for topic in request.topics:
            result = {"name": topic.name, "error_code": 0, "error_message": None}
            try:
                if topic.assignments:
                    raise errors.InvalidArgument("replica assignments are not accepted: "
                                                 "TideMQ places queues itself",
                                                 code="INVALID_REQUEST")
                if request.validate_only:
                    have = len(await self._run(self.backend.partitions, topic.name))
                    if topic.count <= have:
                        raise errors.InvalidArgument(
                            f"topic {topic.name!r} has {have} partitions: partitions can only "
                            f"be added, ask for more than {have}", code="INVALID_PARTITIONS")
                else:
                    await self._run(self.backend.create_partitions, topic.name, topic.count)
            except errors.TideMQError as exc:
                result.update(error_code=kafka_code(exc), error_message=exc.message)
            results.append(result)
        return {"throttle_time_ms": 0, "results": results}

    async def delete_topics(self, request, version: int, conn: Connection) -> dict:
        answers = []
        for name in request.topic_names:
            code = 0
            try:
                await self._run(self.backend.delete_topic, name)
            except errors.TideMQError as exc:
                code = kafka_code(exc)
            answers.append({"name": name, "error_code": code})
        return {"throttle_time_ms": 0, "responses": answers}

    async def init_producer_id(self, request, version: int, conn: Connection) -> dict:
        answer = {"throttle_time_ms": 0, "error_code": 0, "producer_id": -1,
                  "producer_epoch": -1}
        if request.transactional_id is not None:
            # transactions are not served: refused fast and for good, not retried
            answer["error_code"] = codec.ERRORS["TRANSACTIONAL_ID_AUTHORIZATION_FAILED"]
            return answer
        try:
            answer.update(producer_id=await self._run(self.backend.next_producer_id),
                          producer_epoch=0)
        except errors.TideMQError as exc:
            log.warning("producer_id_unavailable", error=str(exc))
            answer["error_code"] = codec.ERRORS["COORDINATOR_NOT_AVAILABLE"]
        return answer

    async def describe_configs(self, request, version: int, conn: Connection) -> dict:
        results = []
        for resource in request.resources:
            result = {"error_code": 0, "error_message": None,
                      "resource_type": resource.resource_type,
                      "resource_name": resource.resource_name, "configs": []}
            if resource.resource_type == 2:   # a topic
                try:
                    await self._run(self.backend.partitions, resource.resource_name)
                    settings = await self._run(self.backend.topic_config,
                                               resource.resource_name)
                except errors.TideMQError as exc:
                    result.update(error_code=kafka_code(exc), error_message=exc.message)
                    results.append(result)
                    continue
                keys = resource.configuration_keys
                answered = [(name, str(v["value"]), False, v["source"])
                            for name, v in settings.items()]
                answered += [(name, value, True, "default")
                             for name, value in TOPIC_CONFIGS.items()]
                result["configs"] = [
                    {"name": name, "value": value, "read_only": read_only,
                     "config_source": CONFIG_SOURCE[source], "is_default": source == "default",
                     "is_sensitive": False, "synonyms": []}
                    for name, value, read_only, source in answered
                    if keys is None or name in keys]
            results.append(result)
        return {"throttle_time_ms": 0, "results": results}

    async def incremental_alter_configs(self, request, version: int, conn: Connection) -> dict:
        """A topic's settings (docs/topics.md): SET and DELETE (back to the default); the
        settings are not lists, so APPEND and SUBTRACT are INVALID_CONFIG."""
        responses = []
        for resource in request.resources:
            answer = {"error_code": 0, "error_message": None,
                      "resource_type": resource.resource_type,
                      "resource_name": resource.resource_name}
            try:
                if resource.resource_type != 2:
                    raise errors.InvalidArgument(
                        "only topic settings (resource type 2) can be altered through "
                        "gateway-kafka", code="INVALID_REQUEST")
                changes = {c.name: _config_change(c) for c in resource.configs or []}
                topic_settings.parse_settings(changes, allow_null=True)   # names the bad one
                if request.validate_only:
                    await self._run(self.backend.topic_config, resource.resource_name)
                else:
                    await self._run(self.backend.alter_topic, resource.resource_name, changes)
            except errors.TideMQError as exc:
                answer.update(error_code=kafka_code(exc), error_message=exc.message)
            responses.append(answer)
        return {"throttle_time_ms": 0, "responses": responses}


@contextlib.contextmanager
def _own_trace_unless_recorded():
    """A Fetch's span is not recorded as a root (a long poll, quiet by default: spans.py), and
    the `<topic> receive` span the SDK records for a read that found messages would be
    dropped under it: unless the Fetch is recorded, the read runs outside its trace, so the
    receive span is a root of its own (its transport span, a Pull, is quiet as a root)."""
    if trace.get_current_span().is_recording():
        yield
        return
    token = otel_context.attach(otel_context.Context())
    try:
        yield
    finally:
        otel_context.detach(token)


def _config_change(config) -> str | None:
    """IncrementalAlterConfigs' operation on one setting: its value (SET) or None (DELETE)."""
    if config.config_operation == 1:
        return None
    if config.config_operation != 0 or config.value is None:
        raise errors.InvalidArgument(
            f"topic setting {config.name!r}: only SET (with a value) and DELETE apply; it is "
            f"not a list (operation {config.config_operation})", code="INVALID_TOPIC_CONFIG")
    return config.value
