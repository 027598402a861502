"""What gateway-grpc does, over TideMQ's client library: no gRPC or protobuf here.

Sends go through one Producer (normal, FIFO, delayed) and one TransactionProducer (half
messages, ends, check-backs) of the gateway's producer group; receives are pops on the broker
group the client names; acks, invisible-time changes and dead-lettering go to the broker
group the receipt handle names. Check-backs the brokers send to the gateway's producer group
are handed to `on_check` (the sessions forward them to a connected producer of the topic),
and answered later through `end_transaction(..., from_check=True)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tidemq.client import (
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    SendResult,
    SendStatus,
    TransactionProducer,
    TransactionResolution,
)
from tidemq.client.acks import AckLanes
from tidemq.client.consume_spans import record_receive
from tidemq.client.consumer import RPC_MARGIN_S, checked_subscription
from tidemq.client.group import DirectClients
from tidemq.client.message import MessageQueue, decode_records, validate_topic_name
from tidemq.client.routes import NameServerClient, QueueLayout, RouteCache
from tidemq.common import errors
from tidemq.common.recall import RecallHandle
from tidemq.gatewaygrpc.handles import GatewayReceipt, TransactionId
from tidemq.gatewaygrpc.renewal import Renewals
from tidemq.v1 import broker_pb2

MAX_BATCH = 32          # the broker's pop limit
GATEWAY_READER = "tidemq-gateway-grpc"   # reads offsets only; commits nothing
MIN_INVISIBLE_MS = 1000
NACK_NOW_MS = 1         # a ChangeInvisibleDuration of 0: the broker's shortest invisible time
MAX_INVISIBLE_MS = 12 * 3600 * 1000
CheckHandler = Callable[[str, MessageExt, str], None]   # (topic, message, transaction id)


@dataclass(frozen=True, slots=True)
class Received:
    message: MessageExt
    receipt: str   # GatewayReceipt.encode()


@dataclass(frozen=True, slots=True)
class SubscriptionGroup:
    orderly: bool
    retry_max_times: int


class MessagingProxy:
    def __init__(self, namesrv_addrs: str | Sequence[str], *, producer_group: str,
                 send_timeout_s: float = 3.0, rpc_timeout_s: float = 3.0,
                 on_check: CheckHandler | None = None,
                 auto_renew_max_ms: int = 3600_000) -> None:
        self.rpc_timeout_s = rpc_timeout_s
        self.namesrv_addrs = namesrv_addrs
        self._pullers: dict[str, PullConsumer] = {}   # per consumer group: the PullConsumer RPCs
        self.routes = RouteCache(NameServerClient(namesrv_addrs, timeout=rpc_timeout_s))
        self.brokers = DirectClients(rpc_timeout_s)  # long pops must not trip a breaker
        self.acks = AckLanes(self.brokers.get)
        self.producer = Producer(namesrv_addrs, producer_group=producer_group,
                                 send_timeout=send_timeout_s)
        self.transactions = TransactionProducer(
            namesrv_addrs, producer_group=producer_group, check_listener=self._on_check,
            send_timeout=send_timeout_s)
        self.on_check = on_check
        self.renewals = Renewals(self._change_invisible, max_hold_ms=auto_renew_max_ms)

    def start(self) -> MessagingProxy:
        self.renewals.start()
        return self

    # -- routes -------------------------------------------------------------------------------

    def queues(self, topic: str) -> tuple[QueueLayout, ...]:
        """The topic's queues per broker group (TOPIC_NOT_EXIST if it has none). A name no
        topic can have is INVALID_TOPIC (ILLEGAL_TOPIC, as from RocketMQ's proxy), not looked up."""
        validate_topic_name(topic)
        route = self.routes.get(topic)
        if not route.queues:
            raise errors.TopicNotExist(f"topic {topic!r} has no broker group")
        return route.queues

    def readable_brokers(self, topic: str) -> list[str]:
        return sorted({q.broker_name for q in self.queues(topic) if q.read_queue_nums})

    def subscription_group(self, group: str, topic: str) -> SubscriptionGroup:
        """The group's definition as the brokers enforce it (auto-create defaults if none)."""
        broker_name = self.readable_brokers(topic)[0]
        reply = self._call(topic, broker_name, "GetSubscriptionGroups",
                           broker_pb2.GetSubscriptionGroupsRequest(groups=[group]))
        found = reply.groups[0] if reply.groups else broker_pb2.SubscriptionGroup(
            retry_max_times=16)
        return SubscriptionGroup(found.consume_message_orderly, found.retry_max_times)

    # -- sending ------------------------------------------------------------------------------

    def send(self, message: Message) -> SendResult:
        """Sends of many clients at once share batch sends to the brokers (send_batching),
        each answered with its own result; a send that leaves alone is made on the calling
        server thread (no hand-off to the producer's pool and back)."""
        return self.producer.send_shared(message)

    def send_batch(self, messages: Sequence[Message]) -> list[SendResult]:
        """All stored, on one queue, or none."""
        return self.producer.send_batch(messages)

    def recall(self, topic: str, handle: str) -> str:
        """Take back a scheduled message by the recall handle its send answered; the id its
        producer knows it by."""
        recalled = RecallHandle.decode(handle, topic=topic)
        self.producer.recall(handle)
        return recalled.message_id

    def prepare(self, message: Message) -> tuple[SendResult, str]:
        """Store a half message; its result and the transaction id the client ends it by."""
        result = self.transactions.prepare(message)
        return result, TransactionId(result.broker_name, result.msg_id, result.unique_id).encode()

    def end_transaction(self, transaction_id: str, topic: str, commit: bool, *,
                        from_check: bool = False) -> str:
        """Commit or roll back; the transaction's state now (COMMITTED, ROLLED_BACK, ...)."""
        txn = TransactionId.decode(transaction_id)
        prepared = SendResult(SendStatus.SEND_OK, txn.msg_id, txn.unique_id, txn.broker_name,
                              0, 0)
        resolution = TransactionResolution.COMMIT if commit else TransactionResolution.ROLLBACK
        return self.transactions.end(prepared, resolution, from_check=from_check,
                                     topic=topic).state

    def listen(self, topic: str) -> None:
        """Take check-backs for the topic's broker groups (a transactional producer's topic)."""
        self.transactions.listen(topic)

    def _on_check(self, message: MessageExt) -> TransactionResolution:
        """A broker checks back a half message: forward it, answer later (UNKNOWN now: the
        broker asks again after its interval if no producer answers)."""
        if self.on_check is not None:
            txn = TransactionId(message.broker_name, message.msg_id, message.unique_id)
            self.on_check(message.topic, message, txn.encode())
        return TransactionResolution.UNKNOWN

    # -- receiving ----------------------------------------------------------------------------

    def receive(self, group: str, topic: str, broker_name: str, *, expression: str,
                expression_type: str, max_messages: int, invisible_ms: int,
                wait_ms: int, auto_renew: bool = False) -> list[Received]:
        """Pop up to `max_messages` from one broker group ("" = each in turn, the last one
        long-polled for `wait_ms`); `auto_renew`: kept invisible until acked (renewal.py)."""
        expression_type = checked_subscription(expression or "*", expression_type)
        if not MIN_INVISIBLE_MS <= invisible_ms <= MAX_INVISIBLE_MS:
            raise errors.InvalidArgument(
                f"invisible duration must be {MIN_INVISIBLE_MS} ms .. 12 h, got {invisible_ms} ms",
                code="INVALID_INVISIBLE_TIME")
        names = [broker_name] if broker_name else self.readable_brokers(topic)
        for i, name in enumerate(names):
            wait = wait_ms if i == len(names) - 1 else 0
            request = broker_pb2.PopRequest(
                consumer_group=group, topic=topic, max_messages=min(max_messages, MAX_BATCH),
                invisible_duration_ms=invisible_ms, wait_ms=wait,
                tag_expression=expression or "*", expression_type=expression_type)
            timeout = self.rpc_timeout_s + wait / 1000 + (RPC_MARGIN_S if wait else 0)
            reply = self._call(topic, name, "Pop", request, timeout=timeout)
            if reply.record_count:
                messages = decode_records(reply.records, name)
                received = [Received(m, GatewayReceipt(h, m.physical_offset).encode())
                            for m, h in zip(messages, reply.receipt_handles, strict=True)]
                if auto_renew:
                    for item in received:
                        self.renewals.track(group, topic, item.receipt, invisible_ms)
                # ReceiveMessage is quiet (a long poll): a read that found messages is a
                # receive span of its own, linked to each message's publish span
                record_receive(topic, group, messages, own_trace=True)
                return received
        return []

    def ack(self, group: str, topic: str, receipt: str) -> None:
        (error,) = self.ack_many(group, topic, [receipt])
        if error is not None:
            raise error

    def ack_many(self, group: str, topic: str,
                 receipts: Sequence[str]) -> list[errors.TideMQError | None]:
        """Per receipt, in order, None (acked) or the error a single ack of it raises. Acks
        of many clients at once share Ack calls per broker group (tidemq.client.acks)."""
        def locate(receipt: str) -> tuple[str, str]:
            handle = GatewayReceipt.decode(self.renewals.take(receipt))
            return handle.broker_name, handle.handle

        futures = self.acks.submit_routed(group, receipts, locate,
                                          lambda broker_name: self._master(topic, broker_name),
                                          waiting=True)
        outcomes = [future.exception() for future in futures]
        if any(isinstance(e, errors.ServiceUnavailable) for e in outcomes):
            self.routes.invalidate(topic)
        return outcomes

    def change_invisible(self, group: str, topic: str, receipt: str, invisible_ms: int) -> str:
        """The message's new receipt handle (the old one is dead from now on); an
        auto-renewed message is no longer renewed. 0 ms is "visible again now": the nack of a
        push consumer that has no backoff to apply (the Node.js client 1.0.8 reads none from a
        customized backoff), which the broker, whose shortest invisible time is 1 ms, refuses."""
        return self._change_invisible(group, topic, self.renewals.take(receipt),
                                      invisible_ms or NACK_NOW_MS)

    def _change_invisible(self, group: str, topic: str, receipt: str, invisible_ms: int) -> str:
        handle = GatewayReceipt.decode(receipt)
        reply = self._call(topic, handle.broker_name, "ChangeInvisibleDuration",
                           broker_pb2.ChangeInvisibleDurationRequest(
                               consumer_group=group, receipt_handle=handle.handle,
                               invisible_duration_ms=invisible_ms))
        return GatewayReceipt(reply.receipt_handle, handle.physical_offset).encode()

    def dead_letter(self, group: str, topic: str, receipt: str, delivery_attempt: int) -> None:
        """Move the message to %DLQ%{group} now, then close its pop (it is not revived)."""
        handle = GatewayReceipt.decode(self.renewals.take(receipt))
        self._call(topic, handle.broker_name, "SendMessageBack",
                   broker_pb2.SendMessageBackRequest(
                       consumer_group=group, physical_offset=handle.physical_offset,
                       dead_letter=True, reconsume_times=max(delivery_attempt - 1, 0)))
        self._call(topic, handle.broker_name, "Ack", broker_pb2.AckRequest(
            consumer_group=group, receipt_handle=handle.handle))

    # -- plumbing -----------------------------------------------------------------------------

    def _master(self, topic: str, broker_name: str) -> str:
        try:
            return self.routes.get(topic).master_addr(broker_name)
        except errors.ServiceUnavailable:
            return self.routes.refresh(topic).master_addr(broker_name)

    def _call(self, topic: str, broker_name: str, method: str, request,
              timeout: float | None = None):
        addr = self._master(topic, broker_name)
        try:
            return self.brokers.get(addr).call(method, request, timeout=timeout)
        except errors.ServiceUnavailable:
            self.routes.invalidate(topic)
            raise

    # -- the 5.x PullConsumer: offsets the client keeps, on TideMQ's offset consumption ------

    def puller(self, group: str) -> PullConsumer:
        """The group's PullConsumer (made on first use; a few groups per gateway)."""
        puller = self._pullers.get(group)
        if puller is None:
            puller = self._pullers.setdefault(group, PullConsumer(
                self.namesrv_addrs, consumer_group=group, timeout=self.rpc_timeout_s))
        return puller

    def query_offset(self, mq: MessageQueue, policy: str, timestamp_ms: int = 0) -> int:
        """BEGINNING, END (the queue's min / max offset) or TIMESTAMP (the first stored at or
        after it)."""
        puller = self.puller(GATEWAY_READER)
        if policy == "TIMESTAMP":
            return puller.offset_for_timestamp(mq, timestamp_ms)
        low, high = puller.queue_offsets(mq.topic, mq.broker_name).get(mq.queue_id, (0, 0))
        return low if policy == "BEGINNING" else high

    def close(self) -> None:
        self.renewals.stop()
        self.transactions.close()
        self.producer.close()

