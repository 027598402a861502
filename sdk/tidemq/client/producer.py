"""The producer: sync, batch, async and oneway sends with retries and fault avoidance
(docs/client.md).

A message becomes a CommitLog-layout record here (tidemq.common.record), so the broker only
stamps and appends bytes. Each attempt targets the master of one queue's broker group; a
transport failure marks that group not-available (latency fault avoidance), refreshes the
route and retries on another group, all inside one overall send timeout. A replica group
(its route lists slaves) whose master died or stepped down (NOT_MASTER) is waited for: the
controller elects a new master within seconds, so those failures do not use up retries; the
producer backs off, refreshes the route and resends the same bytes (same unique ids, so a
send the dead master had stored shows as a detectable duplicate).
"""

from __future__ import annotations

import contextvars
import dataclasses
import socket
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from tidemq.client import client_tracing
from tidemq.client import compression as codecs
from tidemq.client.brokers import BrokerClients
from tidemq.client.encoding import BatchEncoder
from tidemq.client.fault import LatencyFaultTolerance
from tidemq.client.message import (
    MAX_MESSAGE_SIZE,
    Message,
    MessageQueue,
    ProducerSequence,
    SendManyError,
    SendResult,
    SendStatus,
    send_results,
)
from tidemq.client.routes import NameServerClient, RouteCache, TopicRoute
from tidemq.client.selector import MessageQueueSelector, RoundRobinPicker, stable_hash
from tidemq.client.send_batching import SendCoalescer
from tidemq.common import errors, record
from tidemq.common.logs import get_logger
from tidemq.common.recall import RecallHandle
from tidemq.common.rpc import BreakerSettings
from tidemq.common.tracing import MESSAGING_SYSTEM, get_tracer, inject_context
from tidemq.v1 import broker_pb2

log = get_logger(__name__)
_tracer = get_tracer("tidemq.client")

# Transport-level failures: the message may not have been stored, another broker may take it.
RETRIABLE = (errors.ServiceUnavailable, errors.DeadlineExceeded)
FANOUT_WORKERS = 8  # concurrent per-queue batch sends of one send_many
MAX_TRACED_KEYS = 64  # keys named on a batch's publish span (the collector indexes as many)
# Refused by a replica that is not (or no longer) master, or by a master short of in-sync
# replicas: nothing was stored, the same bytes may go to the new master or another group.
REFUSED_CODES = frozenset({"NOT_MASTER", "NOT_ENOUGH_REPLICAS",
                           "GROUP_HAS_NO_MASTER"})   # waits for a replica holding its data
FAILOVER_BACKOFF_S = (0.05, 0.1, 0.2, 0.4)  # waits between sends to a group electing a master
MASTER_CHECK_S = 0.5  # a send unanswered this long asks the name servers whether its master moved


class Producer:
    """Send messages to a topic.

    >>> from tidemq.client import Producer, Message
    >>> with Producer("127.0.0.1:9876") as producer:                  # doctest: +SKIP
    ...     result = producer.send(Message("orders", b"hello", tags="new", keys=["o-1"]))
    ...     print(result.status, result.broker_name, result.queue_id, result.queue_offset)
    """

    def __init__(
        self,
        namesrv_addrs: str | Sequence[str],
        *,
        producer_group: str = "DEFAULT_PRODUCER",
        send_timeout: float = 3.0,
        retries: int = 2,
        compress_threshold: int = 4096,
        compression: str = codecs.ZSTD,
        fault_avoidance: bool = True,
        max_message_size: int = MAX_MESSAGE_SIZE,
        breaker: BreakerSettings | None = None,
        async_workers: int = 4,
        route_refresh_s: float = 30.0,
        client_host: str = "",
        client_id: str = "",
    ) -> None:
        if retries < 0 or send_timeout <= 0:
            raise errors.InvalidArgument("retries must be >= 0 and send_timeout > 0")
        client_tracing.start_export()  # before any channel: its calls carry the trace
        self.producer_group = producer_group
        self.send_timeout = send_timeout
        self.retries = retries
        self.compress_threshold = compress_threshold
        self.compression = codecs.check_codec(compression)
        self.max_message_size = max_message_size
        self.routes = RouteCache(NameServerClient(namesrv_addrs, timeout=send_timeout,
                                                  breaker=breaker),
                                 refresh_interval=route_refresh_s)
        # client_id: the entity client quotas charge (docs/quotas.md); '' = <host>@<pid>
        self.brokers = BrokerClients(timeout=send_timeout, breaker=breaker, client_id=client_id)
        self.faults = LatencyFaultTolerance() if fault_avoidance else None
        self._master_addrs: dict[str, str] = {}
        self._picker = RoundRobinPicker(self.faults, self._is_broker_open)
        self._encoder = BatchEncoder(
            max_message_size=max_message_size, compression=self.compression,
            compress_threshold=compress_threshold,
            born_host=record.pack_host(client_host or _local_ip(), 0))
        self._async_workers = async_workers
        self._executor: ThreadPoolExecutor | None = None
        self._fanout: ThreadPoolExecutor | None = None
        self._fanout_lock = threading.Lock()
        self._closed = False
        self._coalescer = SendCoalescer(self._send_coalesced, self._pool,
                                        in_flight=async_workers, brokers=self._writable_brokers)

    # -- public API --------------------------------------------------------------------

    def send(self, message: Message, *, selector: MessageQueueSelector | None = None,
             arg: Any = None, timeout: float | None = None) -> SendResult:
        """Send one message; with `selector`, the queue it picks from `arg` (ordered sends);
        else a message with a `message_group` goes to its group's queue (FIFO)."""
        choose = None
        if selector is not None:
            def choose(route: TopicRoute, last_failed: str) -> MessageQueue:
                return selector.select(route.write_queues(), message, arg)
        elif message.message_group:
            choose = _group_chooser(message.message_group)
        return self._send(message.topic, [message], choose, timeout)[0]

    def send_batch(self, messages: Sequence[Message], *, queue: MessageQueue | None = None,
                   timeout: float | None = None,
                   sequence: ProducerSequence | None = None) -> list[SendResult]:
        """Send several messages of one topic to one queue in one call: all stored or none.
        Without `queue`, a batch whose first message has a `message_group` goes to that
        group's queue (so a batch should hold one group; send_many sorts mixed groups).
        `sequence` (with `queue`): the batch's place in a sequenced producer's stream, so the
        broker stores it once however often it is sent (ProducerSequence); a repeat answers
        with the first send's offsets."""
        topic = _one_topic(messages)
        if sequence is not None:
            if queue is None:
                raise errors.InvalidArgument("a sequenced batch is sent to a given queue")
            first = messages[0]
            marked = dataclasses.replace(first, properties={
                **first.properties,
                record.PROP_PRODUCER_SEQUENCE: sequence.property_value(len(messages))})
            messages = [marked, *messages[1:]]
        choose = None
        if queue is not None:
            def choose(route: TopicRoute, last_failed: str) -> MessageQueue:
                return queue
        elif messages[0].message_group:
            choose = _group_chooser(messages[0].message_group)
        return self._send(topic, messages, choose, timeout, sequence=sequence)

    def send_many(self, messages: Sequence[Message], *,
                  timeout: float | None = None) -> list[SendResult]:
        """Spread messages of one topic round-robin over queues, one batch send per queue;
        a message with a `message_group` goes to its group's queue instead (FIFO: a group's
        messages keep their input order in that queue, and are retried only there).

        Results are in input order. Every batch is encoded (so every message checked) before
        any is sent: one invalid message sends nothing. A batch a group refuses (STORAGE_FULL,
        NOT_MASTER, a dead broker) is retried on another group within the retries; one that
        still fails does not fail the others: every batch is sent, and then `SendManyError`
        is raised with each message's result or error (`.results`, `.errors`, `.sent`,
        `.failed`). It is also an instance of the first failure's class, with its code, so an
        `except` written for the error this raised before still catches it.
        """
        topic = _one_topic(messages)
        route = self.routes.get(topic)
        self._remember(route)
        queues = route.write_queues()
        # One breaker look-up per group per call (breaker state may live in Redis).
        open_brokers = frozenset(name for name in route.brokers if self._is_broker_open(name))
        groups: dict[MessageQueue, list[int]] = {}
        by_message_group: dict[str, MessageQueue] = {}  # also: the queues pinned by a group
        for index, message in enumerate(messages):
            message_group = message.message_group
            if message_group:
                mq = by_message_group.get(message_group)
                if mq is None:
                    mq = by_message_group[message_group] = group_queue(route, message_group)
            else:
                mq = self._picker.pick(queues, open_brokers=open_brokers)
            groups.setdefault(mq, []).append(index)
        pinned = frozenset(by_message_group.values())
        deadline = time.monotonic() + (timeout or self.send_timeout)
        prepared: dict[MessageQueue, _Prepared] = {}
        try:
            for mq, indexes in groups.items():
                prepared[mq] = self._prepare(topic, [messages[i] for i in indexes])
        except BaseException:
            for batch in prepared.values():
                batch.span.end()
            raise

        def send_group(mq: MessageQueue, indexes: list[int]) -> list[SendResult]:
            def choose(route: TopicRoute, last_failed: str) -> MessageQueue:
                if mq in pinned or not last_failed and mq.broker_name not in open_brokers:
                    return mq
                return self._picker.pick(route.write_queues(), last_failed)
            group_deadline = max(deadline, time.monotonic() + 0.001)
            return self._send_prepared(topic, prepared[mq], choose, group_deadline, self.retries)

        # Broker groups are independent: each group's batches go out in one task, the groups
        # side by side, so a request costs about one group's latency, not the sum. Each task
        # runs in a copy of the caller's context so its spans stay in the caller's trace.
        items = list(groups.items())
        by_broker: dict[str, list[tuple[MessageQueue, list[int]]]] = {}
        for mq, indexes in items:
            by_broker.setdefault(mq.broker_name, []).append((mq, indexes))

        def send_broker(batches: list[tuple[MessageQueue, list[int]]],
                        ) -> list[list[SendResult] | errors.TideMQError]:
            outcomes: list[list[SendResult] | errors.TideMQError] = []
            for mq, indexes in batches:   # one batch failing does not stop the next
                try:
                    outcomes.append(send_group(mq, indexes))
                except errors.TideMQError as exc:
                    outcomes.append(exc)
            return outcomes

        if len(by_broker) == 1:
            per_broker = [send_broker(items)]
        else:
            pool = self._fanout_pool()
            futures = [pool.submit(contextvars.copy_context().run, send_broker, batches)
                       for batches in by_broker.values()]
            per_broker = [f.result() for f in futures]
        items = [item for batches in by_broker.values() for item in batches]
        outcomes = [outcome for outcomes in per_broker for outcome in outcomes]
        results: list[SendResult | None] = [None] * len(messages)
        failures: list[errors.TideMQError | None] = [None] * len(messages)
        for (_, indexes), outcome in zip(items, outcomes, strict=True):
            if isinstance(outcome, errors.TideMQError):
                for index in indexes:
                    failures[index] = outcome
                continue
            for index, result in zip(indexes, outcome, strict=True):
                results[index] = result
        if any(failure is not None for failure in failures):
            raise SendManyError.of(results, failures)
        return results  # type: ignore[return-value]

    def send_async(self, message: Message, callback: Callable[[Future], None] | None = None,
                   **kwargs: Any) -> Future:
        """Send in the background; the Future resolves to a SendResult or the error.

        Without `selector`/`timeout`, messages sent while earlier ones are on the wire go
        together as one batch send (tidemq.client.send_batching): each still gets its own
        result, and a message group's sends are stored in the order they were made. A topic
        has one batch on the wire per broker group (more once a full batch waits), at most
        `async_workers` in all."""
        if kwargs:
            future = self._pool().submit(self.send, message, **kwargs)
        else:
            self._pool()  # refuses once closed
            future = self._coalescer.submit(message)
        if callback is not None:
            future.add_done_callback(callback)
        return future

    def send_shared(self, message: Message) -> SendResult:
        """A blocking send that joins the batches of `send_async` (a server relaying many
        clients' sends shares batch sends to the brokers): on the caller's thread when the
        message leaves at once, else in the next batch of its topic."""
        self._pool()  # refuses once closed
        return self._coalescer.submit(message, waiting=True).result()

    def send_oneway(self, message: Message) -> None:
        """Fire and forget: one attempt, no result, failures only logged."""
        def attempt() -> None:
            try:
                self._send(message.topic, [message], None, self.send_timeout, retries=0)
            except errors.TideMQError as exc:
                log.debug("oneway send failed", topic=message.topic, error=str(exc))
        self._pool().submit(attempt)

    def recall(self, handle: str, *, timeout: float | None = None) -> int:
        """Take back a delayed message before it is delivered, by the recall handle of its
        send (`recall_handle(topic, result)`); returns when it would have been delivered
        (epoch ms). MESSAGE_ALREADY_DELIVERED once it is due, MESSAGE_NOT_FOUND for a handle
        of no waiting message, INVALID_RECALL_HANDLE for text that is not a handle. Recalling
        twice answers the same."""
        recalled = RecallHandle.decode(handle)
        addr = self.routes.get(recalled.topic).master_addr(recalled.broker_name)
        reply = self.brokers.get(addr).call("RecallMessage", broker_pb2.RecallMessageRequest(
            topic=recalled.topic, unique_id=recalled.unique_id),
            timeout=timeout or self.send_timeout)
        return reply.delivery_ms

    def close(self) -> None:
        self._closed = True
        for pool in (self._executor, self._fanout):
            if pool is not None:
                pool.shutdown(wait=True)

    def __enter__(self) -> Producer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- internals -----------------------------------------------------------------------

    def _pool(self) -> ThreadPoolExecutor:
        if self._closed:
            raise errors.PreconditionFailed("the producer is closed")
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self._async_workers, "tidemq-producer")
        return self._executor

    def _fanout_pool(self) -> ThreadPoolExecutor:
        with self._fanout_lock:
            if self._fanout is None:
                self._fanout = ThreadPoolExecutor(FANOUT_WORKERS, "tidemq-producer-fanout")
            return self._fanout

    def _is_broker_open(self, broker_name: str) -> bool:
        return BrokerClients.is_open(self._master_addrs.get(broker_name, ""))

    def _remember(self, route: TopicRoute) -> None:
        for name, group in route.brokers.items():
            if group.master_addr:
                self._master_addrs[name] = group.master_addr

    def _writable_brokers(self, topic: str) -> Sequence[str]:
        """The groups a coalesced batch of `topic` may go to, from the cached route only (the
        coalescer asks under its lock, on every send): those fault avoidance does not avoid,
        else all; none while the route is unknown (the first send fetches it)."""
        route = self.routes.peek(topic)
        if route is None:
            return ()
        names = route.write_brokers
        if self.faults is None or len(names) == 1:
            return names
        return [name for name in names if self.faults.is_available(name)] or names

    def _send_coalesced(self, messages: Sequence[Message], broker_name: str) -> list[SendResult]:
        """A batch of the coalescer: its first attempt on a queue of `broker_name` (the group
        the coalescer balances its batches over), retries wherever the picker says; a message
        group's batch goes to its group's queue."""
        if not broker_name or messages[0].message_group:
            return self.send_batch(messages)

        def choose(route: TopicRoute, last_failed: str) -> MessageQueue:
            queues = route.write_queues()
            if not last_failed and not self._is_broker_open(broker_name):
                own = [mq for mq in queues if mq.broker_name == broker_name]
                if own:
                    return self._picker.pick(own)
            return self._picker.pick(queues, last_failed)
        return self._send(_one_topic(messages), messages, choose, None)

    def _encode(self, messages: Sequence[Message]) -> tuple[bytes, list[str]]:
        raw, unique_ids, _ = self._encode_marked(messages)
        return raw, unique_ids

    def _encode_marked(self, messages: Sequence[Message]) -> tuple[bytes, list[str], bool]:
        return self._encoder.encode_marked(messages, inject_context().get("traceparent", ""))

    def _send(self, topic: str, messages: Sequence[Message],
              choose: Callable[[TopicRoute, str], MessageQueue] | None,
              timeout: float | None, retries: int | None = None, *,
              transaction_prepared: bool = False,
              sequence: ProducerSequence | None = None) -> list[SendResult]:
        if not messages:
            raise errors.InvalidArgument("nothing to send: the batch is empty")
        deadline = time.monotonic() + (timeout or self.send_timeout)
        return self._send_prepared(topic, self._prepare(topic, messages), choose, deadline,
                                   self.retries if retries is None else retries,
                                   transaction_prepared=transaction_prepared,
                                   sequence=sequence)

    def _prepare(self, topic: str, messages: Sequence[Message]) -> _Prepared:
        """Start the batch's PRODUCER span and encode the batch in it (the records carry the
        span's trace context); the encoder is where a message is validated, once."""
        attributes = {
            "messaging.system": MESSAGING_SYSTEM, "messaging.destination.name": topic,
            "messaging.operation": "publish", "messaging.batch.message_count": len(messages),
        }
        span = _tracer.start_span(f"{topic} publish", kind=trace.SpanKind.PRODUCER,
                                  attributes=attributes)
        if span.is_recording():  # the dashboard finds a message's trace by its keys
            keys = [key for message in messages[:MAX_TRACED_KEYS] for key in message.keys]
            if keys:
                span.set_attribute("tidemq.message.keys", keys[:MAX_TRACED_KEYS])
        try:
            with trace.use_span(span, end_on_exit=False):  # records the error and its status
                records, unique_ids, scheduled = self._encode_marked(messages)
        except BaseException:
            span.end()
            raise
        return _Prepared(span, records, unique_ids, scheduled)

    def _send_prepared(self, topic: str, batch: _Prepared,
                       choose: Callable[[TopicRoute, str], MessageQueue] | None,
                       deadline: float, retries: int, *,
                       transaction_prepared: bool = False,
                       sequence: ProducerSequence | None = None) -> list[SendResult]:
        with trace.use_span(batch.span, end_on_exit=True) as span:
            results = self._send_records(topic, batch.records, batch.unique_ids, choose,
                                         deadline, retries, transaction_prepared,
                                         batch.scheduled, sequence)
            if len(results) == 1:
                span.set_attribute("messaging.message.id", results[0].unique_id)
            span.set_attribute("messaging.destination.partition.id", str(results[0].queue_id))
            return results

    def _send_records(self, topic: str, records: bytes, unique_ids: list[str],
                      choose: Callable[[TopicRoute, str], MessageQueue] | None,
                      deadline: float, retries: int,
                      transaction_prepared: bool = False,
                      scheduled: bool = False,
                      sequence: ProducerSequence | None = None) -> list[SendResult]:
        last_failed = ""
        sequenced = None if sequence is None else broker_pb2.ProducerSequence(
            producer_id=sequence.producer_id, epoch=sequence.epoch,
            base_sequence=sequence.base_sequence)
        last_error: errors.TideMQError | None = None
        attempt = failovers = 0
        while attempt <= retries:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            route = self.routes.get(topic)
            self._remember(route)
            try:
                mq = (choose(route, last_failed) if choose
                      else self._picker.pick(route.write_queues(), last_failed))
            except errors.ServiceUnavailable as exc:  # no writable queue on any master
                if not _electing(route):
                    raise
                last_error = exc
                failovers = self._await_master(topic, failovers, deadline)
                continue
            started = time.monotonic()
            try:
                addr = route.master_addr(mq.broker_name)
                response = self.brokers.get(addr).call_unless(
                    "Send",
                    broker_pb2.SendRequest(topic=topic, queue_id=mq.queue_id,
                                           record_count=len(unique_ids),
                                           transaction_prepared=transaction_prepared,
                                           scheduled=scheduled, sequence=sequenced),
                    bulk=records,  # the channel carries the batch without copying it
                    timeout=remaining, abandon=self._master_moved(topic, mq.broker_name, addr),
                    check_every_s=MASTER_CHECK_S,
                )
            except errors.TopicNotExist:
                self.routes.invalidate(topic)
                raise
            except errors.TideMQError as exc:
                if not (isinstance(exc, RETRIABLE) or exc.code in REFUSED_CODES):
                    raise
                last_error, last_failed = exc, mq.broker_name
                log.info("send attempt failed", topic=topic, queue=str(mq), attempt=attempt + 1,
                         error=str(exc))
                if _awaits_new_master(route, mq.broker_name, exc):
                    # Not the group's fault: wait out the election instead of spending a retry.
                    failovers = self._await_master(topic, failovers, deadline)
                    continue
                attempt += 1
                if self.faults is not None:
                    self.faults.update(mq.broker_name, 0, failed=True)
                self._refresh_quietly(topic)
                continue
            if self.faults is not None:
                self.faults.update(mq.broker_name, (time.monotonic() - started) * 1000)
            return _results(response, mq, unique_ids)
        if last_error is None:
            raise errors.DeadlineExceeded(
                f"send to {topic!r} did not complete within {self.send_timeout:g} s"
            )
        raise type(last_error)(
            f"send to {topic!r} failed after {attempt + failovers} attempt(s): "
            f"{last_error.message}",
            code=last_error.code,
        )

    def _master_moved(self, topic: str, broker_name: str, addr: str) -> Callable[[], bool]:
        """For a send that is slow to answer: has the group elected another master meanwhile
        (its master frozen, then fenced out)? Then the send is abandoned and made again there
        instead of waiting out the whole send timeout (nothing is acknowledged twice: a
        fenced-out master acknowledges nothing; a duplicate carries the same unique id)."""
        def moved() -> bool:
            try:
                route = self.routes.refresh(topic)
            except errors.TideMQError:
                return False
            self._remember(route)
            group = route.brokers.get(broker_name)
            return group is not None and bool(group.master_addr) and group.master_addr != addr
        return moved

    def _await_master(self, topic: str, failovers: int, deadline: float) -> int:
        """Back off (50 ms doubling to 400 ms, never past the deadline), refresh the route."""
        pause = FAILOVER_BACKOFF_S[min(failovers, len(FAILOVER_BACKOFF_S) - 1)]
        time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
        self._refresh_quietly(topic)
        return failovers + 1

    def _refresh_quietly(self, topic: str) -> None:
        try:
            self._remember(self.routes.refresh(topic))
        except errors.TideMQError as exc:
            log.debug("route refresh failed", topic=topic, error=str(exc))


def _results(response: broker_pb2.SendResponse, mq: MessageQueue,
             unique_ids: list[str]) -> list[SendResult]:
    physical = list(response.physical_offsets)
    store_host = bytes(response.store_host) or b"\0" * 8
    host_hex = store_host.hex().upper()
    msg_ids = [f"{host_hex}{offset:016X}" if offset >= 0 else record.offset_msg_id(
        store_host, offset) for offset in physical]  # record.offset_msg_id, one hex per id
    msg_ids += [""] * (len(unique_ids) - len(msg_ids))
    return send_results(SendStatus(response.status), msg_ids, unique_ids,
                        response.broker_name or mq.broker_name,
                        response.queue_id if response.broker_name else mq.queue_id,
                        response.first_queue_offset, response.store_timestamp_ms)


def _awaits_new_master(route: TopicRoute, broker_name: str, exc: errors.TideMQError) -> bool:
    """True when the failure means "this replica group is changing masters": a refusal by a
    replica that is not master, or a dead master of a group that has slaves to promote (not a
    master that answered STORAGE_FULL: its group stays as it is, another group takes it)."""
    if exc.code == "NOT_MASTER":
        return True
    if isinstance(exc, errors.StorageFull):
        return False
    group = route.brokers.get(broker_name)
    has_slaves = group is not None and any(broker_id != 0 for broker_id in group.addrs)
    return has_slaves and isinstance(exc, RETRIABLE)


def _electing(route: TopicRoute) -> bool:
    """A group of the route has slaves but no master: the controller is electing one."""
    return any(not group.master_addr and group.addrs for group in route.brokers.values())


@dataclass(frozen=True, slots=True)
class _Prepared:
    """An encoded batch and its PRODUCER span (ended once the batch is sent or refused)."""

    span: trace.Span
    records: bytes
    unique_ids: list[str]
    scheduled: bool = False   # some message has a delay (SendRequest.scheduled)


def group_queue(route: TopicRoute, message_group: str) -> MessageQueue:
    """The queue of a message group: crc32(group) % the route's writable queues (the same in
    every producer process; it moves only when the topic's queues change)."""
    queues = route.group_queues()
    if not queues:
        raise errors.ServiceUnavailable(f"{route.topic!r} has no writable queue")
    return queues[stable_hash(message_group) % len(queues)]


def _group_chooser(message_group: str) -> Callable[[TopicRoute, str], MessageQueue]:
    def choose(route: TopicRoute, last_failed: str) -> MessageQueue:
        return group_queue(route, message_group)  # retried on the same queue: FIFO
    return choose


def _one_topic(messages: Sequence[Message]) -> str:
    if not messages:
        raise errors.InvalidArgument("nothing to send: the batch is empty")
    topics = {m.topic for m in messages}
    if len(topics) != 1:
        raise errors.InvalidArgument(f"a batch must hold one topic, got {sorted(topics)}")
    return messages[0].topic


def _local_ip() -> str:
    try:
        return socket.gethostbyname(socket.gethostname())
    except OSError:
        return "127.0.0.1"
