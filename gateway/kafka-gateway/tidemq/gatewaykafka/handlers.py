"""Request handlers by API key: Kafka requests in, response dicts out (codec.py encodes them).

A handler validates, calls the backend (blocking SDK calls run on the gateway's thread pool),
and maps results and TideMQ errors to Kafka's fields and error codes; no TideMQ logic here.
Partition leaders and group coordinators are spread over the live gateway instances
(nodes.py); any instance serves any request.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from tidemq.common import errors
from tidemq.common.logs import get_logger
from tidemq.gatewaykafka import codec, records
from tidemq.gatewaykafka.backend import KafkaBackend
from tidemq.gatewaykafka.coordination import GroupCoordination
from tidemq.gatewaykafka.nodes import GatewayNodes
from tidemq.gatewaykafka.security import SaslState

log = get_logger(__name__)

EARLIEST, LATEST = -2, -1
FETCH_POLL_S = 0.05             # a Fetch that found nothing looks again this often
KAFKA_CODES = {                 # TideMQ error codes Kafka has a name for
    "TOPIC_NOT_EXIST": "UNKNOWN_TOPIC_OR_PARTITION", "INVALID_TOPIC": "INVALID_TOPIC_EXCEPTION",
    "MESSAGE_TOO_LARGE": "MESSAGE_TOO_LARGE", "TOPIC_ALREADY_EXISTS": "TOPIC_ALREADY_EXISTS",
    "ALREADY_EXISTS": "TOPIC_ALREADY_EXISTS", "DEADLINE_EXCEEDED": "REQUEST_TIMED_OUT",
    "PERMISSION_DENIED": "TOPIC_AUTHORIZATION_FAILED", "NOT_MASTER": "NOT_COORDINATOR",
    "SLAVE_NOT_AVAILABLE": "NOT_ENOUGH_REPLICAS", "SERVICE_UNAVAILABLE": "LEADER_NOT_AVAILABLE",
    "CIRCUIT_OPEN": "LEADER_NOT_AVAILABLE", "INVALID_MESSAGE": "INVALID_RECORD",
    "BROKER_NOT_FOUND": "UNKNOWN_TOPIC_OR_PARTITION", "INVALID_ARGUMENT": "INVALID_REQUEST",
    "STORAGE_FULL": "KAFKA_STORAGE_ERROR",   # retriable in every client, as the disk guard is
}
GROUP_CODES = {                 # ... and on group calls, where unavailability is the coordinator's
    "SERVICE_UNAVAILABLE": "COORDINATOR_NOT_AVAILABLE", "CIRCUIT_OPEN": "COORDINATOR_NOT_AVAILABLE",
    "DEADLINE_EXCEEDED": "COORDINATOR_NOT_AVAILABLE",
}
TRANSACTIONS_REFUSAL = (
    "gateway-kafka does not serve Kafka transactions: drop transactional.id (the idempotent "
    "producer is served), or use TideMQ's transactional messages through its own SDK")
# DescribeConfigs: what a topic answers (docs/kafka.md; the per-topic settings table is later)
TOPIC_CONFIGS = {"cleanup.policy": "delete", "compression.type": "producer",
                 "message.timestamp.type": "CreateTime", "max.message.bytes": "4194304"}


def _within(messages: list, max_bytes: int) -> list:
    """A partition's messages up to its max_bytes (bodies and properties), the first always
    (Kafka's soft limit: a record larger than the limit still makes progress)."""
    size = 0
    for count, message in enumerate(messages):
        size += len(message.body) + sum(len(k) + len(v) for k, v in message.properties.items())
        if count and size > max_bytes:
            return messages[:count]
    return messages


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
        self.table: dict[int, Handler] = {
            0: self.produce, 1: self.fetch, 2: self.list_offsets, 3: self.metadata,
            8: self.offset_commit, 9: self.offset_fetch, 10: self.find_coordinator,
            11: self.join_group, 12: self.heartbeat, 13: self.leave_group, 14: self.sync_group,
            18: self.api_versions, 19: self.create_topics, 20: self.delete_topics,
            22: self.init_producer_id, 32: self.describe_configs, 37: self.create_partitions,
        }
        assert set(self.table) | codec.SASL_APIS == set(codec.SUPPORTED)

    async def _run(self, function: Callable, *args: Any) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, function, *args)

    # -- cluster -------------------------------------------------------------------------------

    async def api_versions(self, request, version: int, conn: Connection) -> dict:
        conn.client_software = f"{request.client_software_name or ''} " \
                               f"{request.client_software_version or ''}".strip()
        return codec.api_versions_body()

    async def metadata(self, request, version: int, conn: Connection) -> dict:
        nodes = self.nodes()
        if request.topics is None or (version == 0 and not request.topics):
            names = await self._run(self.backend.topics)
        else:
            names = [t.name for t in request.topics]
        topics = []
        auto_create = self.auto_create_partitions > 0 and \
            getattr(request, "allow_auto_topic_creation", True) is not False
        for name in names:
            try:
                try:
                    queues = await self._run(self.backend.partitions, name)
                except errors.TopicNotExist:
                    if not auto_create:
                        raise
                    queues = await self._run(self._auto_create, name)
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
            {"node_id": n.node_id, "host": n.host, "port": n.port, "rack": n.rack} for n in live],
            "cluster_id": self.cluster_id, "controller_id": live[0].node_id, "topics": topics}

    def _auto_create(self, name: str) -> list:
        """Kafka's auto.create.topics.enable (off by default: `auto_create_partitions`)."""
        log.info("kafka_topic_auto_created", topic=name, partitions=self.auto_create_partitions)
        with contextlib.suppress(errors.AlreadyExists):   # another request made it meanwhile
            self.backend.create_topic(name, self.auto_create_partitions)
        return self.backend.partitions(name)

    async def find_coordinator(self, request, version: int, conn: Connection) -> dict:
        if request.key_type not in (0, None):   # 1 = a transaction coordinator
            # fatal in every client (not retried until a timeout), with the sentence where
            # the client shows it (librdkafka does; kafka-python raises the bare error)
            return {"throttle_time_ms": 0,
                    "error_code": codec.ERRORS["TRANSACTIONAL_ID_AUTHORIZATION_FAILED"],
                    "error_message": TRANSACTIONS_REFUSAL, "node_id": -1, "host": "",
                    "port": -1}
        node = self.nodes().coordinator(request.key or "")
        return {"throttle_time_ms": 0, "error_code": 0, "error_message": None,
                "node_id": node.node_id, "host": node.host, "port": node.port}

    # -- produce -------------------------------------------------------------------------------

    async def produce(self, request, version: int, conn: Connection) -> dict | None:
        if request.transactional_id is not None:
            answer = codec.ERRORS["TRANSACTIONAL_ID_AUTHORIZATION_FAILED"]
            return self._produce_answer(request, lambda t, p: (answer, -1),
                                        TRANSACTIONS_REFUSAL)
        results: dict[tuple[str, int], tuple[int, int]] = {}
        jobs = [(topic.name, part.index, part.records)
                for topic in request.topic_data for part in topic.partition_data]
        outcomes = await asyncio.gather(*(self._run(self._produce_partition, *job)
                                          for job in jobs))
        for (name, index, _), outcome in zip(jobs, outcomes, strict=True):
            results[(name, index)] = outcome
        if request.acks == 0:
            return None
        return self._produce_answer(request, lambda t, p: results[(t, p)])

    @staticmethod
    def _produce_answer(request, outcome: Callable[[str, int], tuple[int, int]],
                        message: str | None = None) -> dict:
        return {"throttle_time_ms": 0, "responses": [
            {"name": topic.name, "partition_responses": [
                {"index": part.index, "error_code": outcome(topic.name, part.index)[0],
                 "base_offset": outcome(topic.name, part.index)[1], "log_append_time_ms": -1,
                 "log_start_offset": -1, "record_errors": [], "error_message": message}
                for part in topic.partition_data]} for topic in request.topic_data]}

    def _produce_partition(self, topic: str, index: int, record_set) -> tuple[int, int]:
        """(error code, base offset) of one partition's record set."""
        try:
            mq = self.backend.partition(topic, index)
            batches = [records.decode_batch(raw, max_uncompressed=self.max_record_batch_bytes)
                       for raw in records.split_batches(record_set or b"")]
            sequence = records.batches_sequence(batches)
            messages = [records.to_message(topic, r) for batch in batches for r in batch.records]
            if not messages:
                raise records.RecordError("CORRUPT_MESSAGE", "a produce with no records")
            return 0, self.backend.produce(mq, messages, sequence)
        except (errors.TideMQError, records.RecordError) as exc:
            log.info("produce_refused", topic=topic, partition=index, error=str(exc))
            return kafka_code(exc), -1

    # -- fetch and offsets ---------------------------------------------------------------------

    async def fetch(self, request, version: int, conn: Connection) -> dict:
        deadline = time.monotonic() + max(request.max_wait_ms, 0) / 1000
        wanted = [(t.topic, p.partition, p.fetch_offset,
                   min(p.partition_max_bytes, request.max_bytes))
                  for t in request.topics for p in t.partitions]
        while True:
            answers = await asyncio.gather(*(self._run(self._fetch_partition, *w)
                                             for w in wanted))
            size = sum(len(a["records"] or b"") for a in answers)
            if size >= max(request.min_bytes, 1) or time.monotonic() >= deadline or \
                    any(a["error_code"] for a in answers):
                break
            await asyncio.sleep(min(FETCH_POLL_S, max(deadline - time.monotonic(), 0)))
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
            fetched = self.backend.fetch(mq, offset, max_bytes)
        except errors.TideMQError as exc:
            answer["error_code"] = kafka_code(exc)
            return answer
        answer.update(high_watermark=fetched.high_watermark,
                      last_stable_offset=fetched.high_watermark,
                      log_start_offset=fetched.log_start)
        if fetched.out_of_range:
            answer["error_code"] = codec.ERRORS["OFFSET_OUT_OF_RANGE"]
        elif fetched.messages:
            answer["records"] = records.encode_messages(
                _within(fetched.messages, max_bytes))
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
                    answer["offset"] = await self._run(self.backend.offset_for_time, mq,
                                                       part.timestamp)
            except errors.TideMQError as exc:
                answer["error_code"] = kafka_code(exc)
            return answer

        return {"throttle_time_ms": 0, "topics": [
            {"name": t.name, "partitions": list(await asyncio.gather(
                *(one(t.name, p) for p in t.partitions)))} for t in request.topics]}

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
                protocols=[(p.name, bytes(p.metadata)) for p in request.protocols]))
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
                                generation, request.member_id or "")
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
                    answer["committed_offset"] = committed
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
                if not request.validate_only:
                    await self._run(self.backend.create_topic, topic.name, partitions)
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
                except errors.TideMQError as exc:
                    result.update(error_code=kafka_code(exc), error_message=exc.message)
                    results.append(result)
                    continue
                keys = resource.configuration_keys
                result["configs"] = [
                    {"name": name, "value": value, "read_only": True, "config_source": 5,
                     "is_default": True, "is_sensitive": False, "synonyms": []}
                    for name, value in TOPIC_CONFIGS.items() if keys is None or name in keys]
            results.append(result)
        return {"throttle_time_ms": 0, "results": results}
