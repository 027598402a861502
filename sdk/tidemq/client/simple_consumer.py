"""SimpleConsumer: pop consumption with receipt handles (RocketMQ 5's SimpleConsumer, SQS's
ReceiveMessage / DeleteMessage / ChangeMessageVisibility; docs/consumption.md).

No queues, no offsets, no rebalance: `receive` pops from the topic's broker groups, each
message stays invisible to the group for `invisible_duration_s`, `ack` finishes it, and one
not acked in time is delivered again with `delivery_count + 1` (to the group's DLQ past its
retry_max_times). Pop and offset consumption can share a topic in different groups.

    >>> with SimpleConsumer("127.0.0.1:9876", "billing", "orders") as consumer:  # doctest: +SKIP
    ...     for received in consumer.receive(max_messages=16, wait_s=5):
    ...         handle(received.body)
    ...         consumer.ack(received)

Acking a batch is one Ack call (and one revive-log write) per broker group instead of one per
message; it never raises for a message, each result says:

    >>> batch = consumer.receive(max_messages=32)                 # doctest: +SKIP
    >>> failed = [r for r in consumer.ack_many(batch) if not r.ok]  # doctest: +SKIP
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import NamedTuple

from tidemq.client import client_tracing
from tidemq.client.acks import AckLanes
from tidemq.client.brokers import default_client_id
from tidemq.client.consume_spans import record_receive
from tidemq.client.consumer import RPC_MARGIN_S, checked_subscription
from tidemq.client.group import DirectClients
from tidemq.client.message import MessageExt, decode_records
from tidemq.client.routes import NameServerClient, RouteCache
from tidemq.common import errors
from tidemq.common.receipt import broker_of
from tidemq.v1 import broker_pb2


class AckResult(NamedTuple):
    """One message of a batch ack: `error` None = acked (or acked before), else the error a
    single ack of it would raise (RECEIPT_HANDLE_EXPIRED: it is, or will be, delivered
    again; SERVICE_UNAVAILABLE: its broker group was not reached — safe to ack again)."""

    receipt_handle: str
    error: errors.TideMQError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass(slots=True)
class ReceivedMessage:
    message: MessageExt
    receipt_handle: str  # replaced by change_invisible_duration

    @property
    def body(self) -> bytes:
        return self.message.body

    @property
    def delivery_count(self) -> int:
        """1 on the first delivery; + 1 each time its invisible time ran out."""
        return self.message.reconsume_times + 1


class ReceivedBatch(list):
    """What `receive` answers: the ReceivedMessages of one Pop (a list, as always) and that
    Pop's reply as it came, for code that renders a whole batch at once (the HTTP gateway
    writes a pop's JSON straight from the records, in C where built: docs/http-api.md).

    `broker_name`: the group every message came from; `records`: the reply's records (record
    layout, every one framed and CRC-checked by `decode_records`); `receipt_handles`: one per
    record, in order. They stay the reply as it came: changing the list (or a message's handle,
    `change_invisible_duration`) changes none of them."""

    __slots__ = ("broker_name", "records", "receipt_handles")

    def __init__(self, received: Iterable[ReceivedMessage] = (), broker_name: str = "",
                 records: bytes = b"", receipt_handles: list[str] | None = None) -> None:
        super().__init__(received)
        self.broker_name, self.records = broker_name, records
        self.receipt_handles = [] if receipt_handles is None else receipt_handles


def _locate_received(received: ReceivedMessage) -> tuple[str, str]:
    """A received message's ack goes to the broker group it came from (no handle decoding)."""
    return received.message.broker_name, received.receipt_handle


def _locate_handle(text: str) -> tuple[str, str]:
    return broker_of(text), text


class SimpleConsumer:
    def __init__(self, namesrv_addrs: str | Sequence[str], group: str, topic: str, *,
                 tag_expression: str = "*", invisible_duration_s: float = 30.0,
                 timeout: float = 3.0, expression_type: str = "TAG",
                 client_id: str = "", receive_trace_of_its_own: bool = False) -> None:
        """`receive_trace_of_its_own`: a receive that found messages records its span as a
        trace of its own rather than under the current span (a server whose request span is
        a quiet poll, like the HTTP gateway's pop, would otherwise drop it with its parent)."""
        if not group or not topic:
            raise errors.InvalidArgument("group and topic must not be empty")
        self.group, self.topic, self.tag_expression = group, topic, tag_expression
        # "SQL92": tag_expression is a SQL92 filter over the properties (docs/filters.md)
        self.expression_type = checked_subscription(tag_expression, expression_type)
        self.invisible_duration_s, self.timeout = invisible_duration_s, timeout
        self._own_receive_trace = receive_trace_of_its_own
        client_tracing.start_export()  # before any channel: its calls carry the trace
        self.routes = RouteCache(NameServerClient(namesrv_addrs, timeout=timeout))
        # long pops must not trip a breaker; client_id: what client quotas charge (quotas.md)
        self.brokers = DirectClients(timeout, client_id or default_client_id())
        self._turn = itertools.count()
        self._acks = AckLanes(self.brokers.get)

    def _addr(self, broker_name: str) -> str:
        return self.routes.get(self.topic).master_addr(broker_name)

    def receive(self, max_messages: int = 16, *, invisible_duration_s: float | None = None,
                wait_s: float = 0.0) -> ReceivedBatch:
        """Up to `max_messages` (1..32) from one broker group; with `wait_s` the last group
        asked holds the call until a message arrives or the wait ends. A list of
        ReceivedMessages (a ReceivedBatch: also the reply's records and handles)."""
        invisible = invisible_duration_s or self.invisible_duration_s
        names = sorted(self.routes.get(self.topic).brokers)
        if not names:
            raise errors.TopicNotExist(f"topic {self.topic!r} has no broker group")
        start = next(self._turn)
        order = [names[(start + i) % len(names)] for i in range(len(names))]
        for i, broker_name in enumerate(order):
            wait = wait_s if i == len(order) - 1 else 0.0
            request = broker_pb2.PopRequest(
                consumer_group=self.group, topic=self.topic, max_messages=max_messages,
                invisible_duration_ms=int(invisible * 1000), wait_ms=int(wait * 1000),
                tag_expression=self.tag_expression, expression_type=self.expression_type)
            try:
                reply = self.brokers.get(self._addr(broker_name)).call(
                    "Pop", request, timeout=self.timeout + wait + (RPC_MARGIN_S if wait else 0))
            except errors.ServiceUnavailable:
                self.routes.invalidate(self.topic)
                if i == len(order) - 1:
                    raise
                continue
            if reply.record_count:
                records = reply.records
                if type(records) is not bytes:
                    records = bytes(records)
                messages = decode_records(records, broker_name)
                record_receive(self.topic, self.group, messages,
                               own_trace=self._own_receive_trace)
                handles = list(reply.receipt_handles)
                return ReceivedBatch([ReceivedMessage(m, h)
                                      for m, h in zip(messages, handles, strict=True)],
                                     broker_name, records, handles)
        return ReceivedBatch()

    def _call(self, handle: str, method: str, request):
        broker_name = broker_of(handle)
        return self.brokers.get(self._addr(broker_name)).call(method, request)

    def ack(self, received: ReceivedMessage) -> None:
        """Done: the message is not delivered to this group again. RECEIPT_HANDLE_EXPIRED if
        its invisible time ran out first (it is, or will be, delivered again)."""
        (future,) = self._ack_futures([received], _locate_received, waiting=True)
        future.result()

    def ack_handle(self, receipt_handle: str) -> None:
        (future,) = self._ack_futures([receipt_handle], _locate_handle, waiting=True)
        future.result()

    def ack_async(self, received: ReceivedMessage) -> Future:
        """`ack` without waiting: a future that is done (None) once the broker logged the ack,
        or raises what `ack` raises. Acks made while an Ack call to the same broker group is
        on the wire go together in the next call (tidemq.client.acks), so acking message by
        message costs about what `ack_many` does."""
        return self._ack_futures([received], _locate_received)[0]

    def ack_many(self, received: Iterable[ReceivedMessage]) -> list[AckResult]:
        """Ack a batch: one Ack call per broker group the messages came from (per 1024
        handles). One result per message, in order; never raises for a message (see
        AckResult)."""
        received = list(received)
        outcomes = self._acks.ack_routed(self.group, received, _locate_received, self._addr)
        return [AckResult(r.receipt_handle, error)
                for r, error in zip(received, outcomes, strict=True)]

    def ack_handles(self, receipt_handles: Sequence[str]) -> list[AckResult]:
        """`ack_many` over bare receipt handles (the HTTP gateway's batch ack): each is routed
        to the broker group it names."""
        outcomes = self._acks.ack_routed(self.group, receipt_handles, _locate_handle,
                                         self._addr)
        return [AckResult(text, error)
                for text, error in zip(receipt_handles, outcomes, strict=True)]

    def _ack_futures(self, items: Sequence, locate, *, waiting: bool = False) -> list[Future]:
        """One future per message or handle (`waiting`: the caller waits for them next)."""
        return self._acks.submit_routed(self.group, items, locate, self._addr, waiting=waiting)

    def change_invisible_duration(self, received: ReceivedMessage, seconds: float) -> None:
        """Keep the message hidden `seconds` from now (e.g. a long job); updates its handle."""
        received.receipt_handle = self.change_invisible_handle(received.receipt_handle,
                                                               int(seconds * 1000))

    def change_invisible_handle(self, receipt_handle: str, invisible_ms: int) -> str:
        """The new receipt handle (the old one is dead from now on)."""
        return self._call(receipt_handle, "ChangeInvisibleDuration",
                          broker_pb2.ChangeInvisibleDurationRequest(
                              consumer_group=self.group, receipt_handle=receipt_handle,
                              invisible_duration_ms=invisible_ms)).receipt_handle

    def close(self) -> None:
        """Nothing to release (channels are pooled per process); kept for symmetry."""

    def __enter__(self) -> SimpleConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

