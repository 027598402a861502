"""Transactional messages (docs/transactions.md): RocketMQ's TransactionMQProducer.

`send_in_transaction` stores the message as a half message (invisible to consumers), runs the
local transaction and ends the broker's transaction with its outcome: COMMIT makes the message
visible, ROLLBACK drops it, UNKNOWN leaves it to the broker's check-back. A check-back asks a
live producer of the same producer group, through the `check_listener`, how a transaction it
cannot resolve itself ended; so every producer of the group keeps a TransactionChecks stream
open to the brokers it sent to (and to those of `check_topics`), and heartbeats them.

>>> def local(message, arg):                                        # doctest: +SKIP
...     db.insert_order(arg)
...     return TransactionResolution.COMMIT
>>> with TransactionProducer("127.0.0.1:9876", producer_group="orders-tx",
...                          check_listener=lambda m: lookup(m.keys[0])) as p:  # doctest: +SKIP
...     p.send_in_transaction(Message("orders", b"{...}", keys=["o-1"]), local, arg=order)
"""

from __future__ import annotations

import dataclasses
import enum
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import grpc
from tidemq.client.message import Message, MessageExt, SendResult
from tidemq.client.producer import REFUSED_CODES, RETRIABLE, Producer, _group_chooser
from tidemq.common import errors, record
from tidemq.common.logs import get_logger
from tidemq.v1 import broker_pb2

log = get_logger(__name__)

HEARTBEAT_INTERVAL_S = 10.0   # well inside the broker's 120 s producer expiry
RECONNECT_BACKOFF_S = (0.2, 0.5, 1.0, 2.0)


class TransactionResolution(enum.Enum):
    COMMIT = "COMMIT"
    ROLLBACK = "ROLLBACK"
    UNKNOWN = "UNKNOWN"   # not decided yet: the broker checks back later


_WIRE = {TransactionResolution.COMMIT: broker_pb2.TRANSACTION_COMMIT,
         TransactionResolution.ROLLBACK: broker_pb2.TRANSACTION_ROLLBACK,
         TransactionResolution.UNKNOWN: broker_pb2.TRANSACTION_UNKNOWN}

LocalTransaction = Callable[[Message, Any], TransactionResolution]
CheckListener = Callable[[MessageExt], TransactionResolution]


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionSendResult:
    """A half message's SendResult and the outcome its local transaction gave."""

    send_result: SendResult
    resolution: TransactionResolution

    @property
    def transaction_id(self) -> str:
        return self.send_result.unique_id


@dataclasses.dataclass(frozen=True, slots=True)
class TransactionEnd:
    """The broker's answer to an end: the transaction's state now (COMMITTED, ROLLED_BACK,
    DISCARDED or PENDING) and whether that had been done before (nothing appended twice)."""

    state: str
    already_resolved: bool


def _resolution(value: object) -> TransactionResolution:
    if isinstance(value, TransactionResolution):
        return value
    log.warning("a transaction callback returned no TransactionResolution: UNKNOWN",
                returned=repr(value))
    return TransactionResolution.UNKNOWN


class TransactionProducer(Producer):
    """A Producer that also sends in transactions and answers check-backs for its group."""

    def __init__(self, namesrv_addrs: str | Sequence[str], *, producer_group: str,
                 check_listener: CheckListener | None = None,
                 check_topics: Sequence[str] = (), check_workers: int = 4,
                 **producer_options: Any) -> None:
        if not producer_group:
            raise errors.InvalidArgument("a TransactionProducer needs a producer_group: the "
                                         "broker checks back with that group")
        super().__init__(namesrv_addrs, producer_group=producer_group, **producer_options)
        self.check_listener = check_listener
        self.client_id = f"{socket.gethostname()}@{os.getpid()}@{uuid.uuid4().hex[:8]}"
        self._topic_of: dict[str, str] = {}          # broker name -> a topic it serves
        self._streams: dict[str, threading.Thread] = {}
        self._calls: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._answers = ThreadPoolExecutor(check_workers, "tidemq-txn-check")
        self._heartbeats = threading.Thread(target=self._heartbeat_forever,
                                            name="tidemq-txn-heartbeat", daemon=True)
        self._heartbeats.start()
        for topic in check_topics:
            self.listen(topic)

    # -- transactions ----------------------------------------------------------------------

    def send_in_transaction(self, message: Message, local_transaction: LocalTransaction,
                            arg: Any = None) -> TransactionSendResult:
        """Prepare `message`, run `local_transaction(message, arg)`, end with its outcome.

        A callback that raises counts as UNKNOWN (the check-back settles it). An end that
        fails is logged, not raised: the half message is stored and the check-back settles it,
        as in RocketMQ."""
        prepared = self.prepare(message)
        try:
            resolution = _resolution(local_transaction(message, arg))
        except Exception:
            log.exception("local transaction failed: left to the check-back",
                          transaction_id=prepared.unique_id)
            resolution = TransactionResolution.UNKNOWN
        if resolution is not TransactionResolution.UNKNOWN:
            try:
                self.end(prepared, resolution)
            except errors.TideMQError as exc:
                log.warning("end transaction failed: left to the check-back",
                            transaction_id=prepared.unique_id, error=str(exc))
        return TransactionSendResult(prepared, resolution)

    def prepare(self, message: Message, *, timeout: float | None = None) -> SendResult:
        """Store `message` as a half message (invisible until `end` commits it); a message
        with a `message_group` is committed to its group's queue, as `send` would choose."""
        half = dataclasses.replace(message, properties={
            **message.properties, record.PROP_PRODUCER_GROUP: self.producer_group,
            record.PROP_TRANSACTION_PREPARED: "true"})
        if message.scheduled:
            raise errors.InvalidArgument(
                "a transactional message cannot also be delayed: it becomes visible when its "
                "transaction commits (RocketMQ refuses the same)", code="TRANSACTION_WITH_DELAY")
        choose = _group_chooser(message.message_group) if message.message_group else None
        result = self._send(message.topic, [half], choose, timeout,
                            transaction_prepared=True)[0]
        self._topic_of[result.broker_name] = message.topic
        self._ensure_stream(result.broker_name)
        return result

    def end(self, prepared: SendResult, resolution: TransactionResolution, *,
            from_check: bool = False, timeout: float | None = None,
            topic: str = "") -> TransactionEnd:
        """Commit or roll back the half message `prepared` (UNKNOWN: just its state).

        Repeating an end is safe: the answer says `already_resolved`. Ending it the other way
        than before raises PreconditionFailed TRANSACTION_ALREADY_RESOLVED; an unknown one
        NotFound TRANSACTION_NOT_FOUND. `topic` (the message's) lets a producer that did not
        prepare it find the broker group's master."""
        if topic:
            self._topic_of.setdefault(prepared.broker_name, topic)
            self._ensure_stream(prepared.broker_name)
        _, half_offset = record.parse_offset_msg_id(prepared.msg_id)
        request = broker_pb2.EndTransactionRequest(
            producer_group=self.producer_group, transaction_id=prepared.unique_id,
            half_offset=half_offset, resolution=_WIRE[resolution], from_check=from_check)
        response = self._to_master(prepared.broker_name, "EndTransaction", request, timeout)
        return TransactionEnd(response.state, response.already_resolved)

    def listen(self, topic: str) -> None:
        """Take check-backs from every broker group serving `topic` (also before any send)."""
        route = self.routes.get(topic)
        self._remember(route)
        for broker_name in route.brokers:
            self._topic_of.setdefault(broker_name, topic)
            self._ensure_stream(broker_name)

    def close(self) -> None:
        self._stopping.set()
        with self._lock:
            calls = list(self._calls.values())
        for call in calls:
            cancel = getattr(call, "cancel", None)
            if cancel is not None:  # traced (instrumented) streams are generators: they end
                cancel()            # with their daemon thread once the producer stops
        self._answers.shutdown(wait=True, cancel_futures=True)
        super().close()

    # -- internals -------------------------------------------------------------------------

    def _master(self, broker_name: str, refresh: bool = False) -> str:
        topic = self._topic_of.get(broker_name, "")
        if topic and (refresh or broker_name not in self._master_addrs):
            self._refresh_quietly(topic)
        addr = self._master_addrs.get(broker_name, "")
        if not addr:
            raise errors.ServiceUnavailable(f"no master address known for broker group "
                                            f"{broker_name!r}", code="NO_MASTER")
        return addr

    def _to_master(self, broker_name: str, method: str, request: Any,
                   timeout: float | None) -> Any:
        """Call the group's master; a master change (NOT_MASTER, a dead master) is waited out
        within the send timeout, as sends do."""
        deadline = time.monotonic() + (timeout or self.send_timeout)
        failovers, refresh = 0, False
        while True:
            try:
                addr = self._master(broker_name, refresh)
                return self.brokers.get(addr).call(
                    method, request, timeout=max(0.05, deadline - time.monotonic()))
            except errors.TideMQError as exc:
                retriable = isinstance(exc, RETRIABLE) or exc.code in REFUSED_CODES \
                    or exc.code == "NO_MASTER"
                if not retriable or time.monotonic() >= deadline:
                    raise
                failovers = self._await_master(self._topic_of.get(broker_name, ""),
                                               failovers, deadline)
                refresh = True

    def _ensure_stream(self, broker_name: str) -> None:
        with self._lock:
            if broker_name in self._streams or self._stopping.is_set():
                return
            thread = threading.Thread(target=self._stream_forever, args=(broker_name,),
                                      name=f"tidemq-txn-checks-{broker_name}", daemon=True)
            self._streams[broker_name] = thread
        thread.start()

    def _stream_forever(self, broker_name: str) -> None:
        """Keep one TransactionChecks stream open to the group's master, reconnecting (to a
        new master after a failover) until the producer closes."""
        attempt = 0
        request = broker_pb2.TransactionChecksRequest(producer_group=self.producer_group,
                                                      client_id=self.client_id)
        while not self._stopping.is_set():
            try:
                addr = self._master(broker_name, refresh=attempt > 0)
                call = self.brokers.get(addr).stream("TransactionChecks", request)
                with self._lock:
                    self._calls[broker_name] = call
                if self._stopping.is_set():
                    call.cancel()
                for check in call:
                    attempt = 0
                    self._answers.submit(self._answer, broker_name, check)
            except (grpc.RpcError, errors.TideMQError, RuntimeError) as exc:
                if self._stopping.is_set():
                    return
                log.debug("check stream broke", broker=broker_name, error=str(exc))
            attempt += 1
            self._stopping.wait(RECONNECT_BACKOFF_S[min(attempt, len(RECONNECT_BACKOFF_S)) - 1])

    def _answer(self, broker_name: str, check: broker_pb2.TransactionCheck) -> None:
        message = checked_message(check.record, broker_name)
        try:
            resolution = (_resolution(self.check_listener(message)) if self.check_listener
                          else TransactionResolution.UNKNOWN)
        except Exception:
            log.exception("check listener failed: UNKNOWN", transaction_id=check.transaction_id)
            resolution = TransactionResolution.UNKNOWN
        if resolution is TransactionResolution.UNKNOWN:
            return  # the broker checks again after its interval
        request = broker_pb2.EndTransactionRequest(
            producer_group=self.producer_group, transaction_id=check.transaction_id,
            half_offset=check.half_offset, resolution=_WIRE[resolution], from_check=True)
        try:
            self._to_master(broker_name, "EndTransaction", request, None)
        except errors.TideMQError as exc:
            log.warning("answering a check-back failed", transaction_id=check.transaction_id,
                        error=str(exc))

    def _heartbeat_forever(self) -> None:
        while not self._stopping.wait(HEARTBEAT_INTERVAL_S):
            request = broker_pb2.ProducerHeartbeatRequest(producer_group=self.producer_group,
                                                          client_id=self.client_id)
            for broker_name in list(self._streams):
                try:
                    self.brokers.get(self._master(broker_name)).call("ProducerHeartbeat",
                                                                     request)
                except errors.TideMQError as exc:
                    log.debug("producer heartbeat failed", broker=broker_name, error=str(exc))


def checked_message(raw: bytes, broker_name: str = "") -> MessageExt:
    """A check-back's half message as the producer sent it: its real topic and queue."""
    rec = record.decode(raw)
    half = MessageExt.from_record(rec, broker_name)
    return MessageExt(
        topic=rec.properties.get(record.PROP_REAL_TOPIC, rec.topic), body=half.body,
        tags=half.tags, keys=half.keys, properties=half.properties, broker_name=broker_name,
        queue_id=int(rec.properties.get(record.PROP_REAL_QUEUE_ID, rec.queue_id) or 0),
        queue_offset=rec.queue_offset, msg_id=half.msg_id, unique_id=half.unique_id,
        born_timestamp=rec.born_timestamp, store_timestamp=rec.store_timestamp,
        reconsume_times=rec.reconsume_times, physical_offset=rec.physical_offset)
