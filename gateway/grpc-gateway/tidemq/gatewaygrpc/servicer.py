"""apache.rocketmq.v2.MessagingService: validate, call the proxy, map the answer.

RocketMQ 5 reports failures in each response's `status` (the clients raise by its code), so
every method answers a response, never a bare gRPC error: TideMQ errors become codes in
`statuses`, and the RPCs TideMQ has no counterpart for answer NOT_IMPLEMENTED with a sentence.

Sends, receives and pulls go to the brokers on behalf of the calling client, so its own
client quotas apply to them (throttles.py).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator

from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2, service_pb2_grpc
from tidemq.client.message import MessageQueue
from tidemq.common import errors
from tidemq.common.logs import get_logger
from tidemq.common.recall import RecallHandle
from tidemq.gatewaygrpc import metrics
from tidemq.gatewaygrpc.messages import timestamp_ms, to_message, to_pb
from tidemq.gatewaygrpc.proxy import MessagingProxy
from tidemq.gatewaygrpc.sessions import ClientSessions, OrphanedTransaction
from tidemq.gatewaygrpc.statuses import not_implemented, ok, status_of
from tidemq.gatewaygrpc.telemetry import ServerSettings, orphaned_command, settings_reply
from tidemq.gatewaygrpc.throttles import ClientThrottles

log = get_logger(__name__)

ALL_TYPES = (pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION)
FILTER_TYPES = {pb.FILTER_TYPE_UNSPECIFIED: "TAG", pb.TAG: "TAG", pb.SQL: "SQL92"}
OUTBOX_POLL_S = 1.0
_CLOSED = object()


def _ms(duration) -> int:
    return duration.seconds * 1000 + duration.nanos // 1_000_000


def _answer(method: str, response_cls, work: Callable[[], object]):
    """Run `work`; a TideMQError becomes the response's status."""
    try:
        response = work()
    except errors.TideMQError as exc:
        response = response_cls(status=status_of(exc))
    metrics.REQUESTS.labels(method, pb.Code.Name(response.status.code)).inc()
    return response


class MessagingServicer(service_pb2_grpc.MessagingServiceServicer):
    def __init__(self, proxy: MessagingProxy, sessions: ClientSessions,
                 server: ServerSettings, advertised: Callable[[], tuple[str, int]],
                 throttles: ClientThrottles | None = None) -> None:
        self.proxy, self.sessions, self.server = proxy, sessions, server
        self.throttles = throttles or ClientThrottles()
        self.advertised = advertised  # (host, port): the port is known once serving

    def _endpoints(self, asked: pb.Endpoints) -> pb.Endpoints:
        """Where clients reach the gateway: the address they used, else the advertised one."""
        if asked.addresses:
            return asked
        host, port = self.advertised()
        return pb.Endpoints(scheme=pb.IPv4 if host.replace(".", "").isdigit()
                            else pb.DOMAIN_NAME, addresses=[pb.Address(host=host, port=port)])

    # -- routes and clients -------------------------------------------------------------------

    def QueryRoute(self, request, context):
        def work():
            topic = request.topic
            endpoints = self._endpoints(request.endpoints)
            queues = []
            for layout in self.proxy.queues(topic.name):
                for queue_id in range(max(layout.read_queue_nums, layout.write_queue_nums)):
                    readable = queue_id < layout.read_queue_nums and layout.perm & 4
                    writable = queue_id < layout.write_queue_nums and layout.perm & 2
                    permission = (pb.READ_WRITE if readable and writable else pb.READ
                                  if readable else pb.WRITE if writable else pb.NONE)
                    queues.append(pb.MessageQueue(
                        topic=topic, id=queue_id, permission=permission,
                        broker=pb.Broker(name=layout.broker_name, id=0, endpoints=endpoints),
                        accept_message_types=ALL_TYPES))
            return service_pb2.QueryRouteResponse(status=ok(), message_queues=queues)
        return _answer("QueryRoute", service_pb2.QueryRouteResponse, work)

    def QueryAssignment(self, request, context):
        """One assignment per broker group: pops take any queue of the topic there."""
        def work():
            endpoints = self._endpoints(request.endpoints)
            assignments = [pb.Assignment(message_queue=pb.MessageQueue(
                topic=request.topic, id=-1, permission=pb.READ_WRITE,
                broker=pb.Broker(name=name, id=0, endpoints=endpoints),
                accept_message_types=ALL_TYPES))
                for name in self.proxy.readable_brokers(request.topic.name)]
            return service_pb2.QueryAssignmentResponse(status=ok(), assignments=assignments)
        return _answer("QueryAssignment", service_pb2.QueryAssignmentResponse, work)

    def Heartbeat(self, request, context):
        return _answer("Heartbeat", service_pb2.HeartbeatResponse,
                       lambda: service_pb2.HeartbeatResponse(status=ok()))

    def NotifyClientTermination(self, request, context):
        return _answer("NotifyClientTermination", service_pb2.NotifyClientTerminationResponse,
                       lambda: service_pb2.NotifyClientTerminationResponse(status=ok()))

    def Telemetry(self, request_iterator, context) -> Iterator[service_pb2.TelemetryCommand]:
        """Answer each Settings command; deliver check-backs while the stream is open."""
        client_id = dict(context.invocation_metadata()).get("x-mq-client-id", "")
        session = self.sessions.open(client_id)
        metrics.SESSIONS.inc()

        def read() -> None:
            try:
                for command in request_iterator:
                    if command.HasField("settings"):
                        session.outbox.put(self._settings(session, command.settings))
            except Exception as exc:  # the client went away mid-read
                log.debug("telemetry stream ended", client_id=client_id, error=str(exc))
            session.outbox.put(_CLOSED)

        threading.Thread(target=read, name="rmq-telemetry-read", daemon=True).start()
        try:
            while context.is_active():
                try:
                    item = session.outbox.get(timeout=OUTBOX_POLL_S)
                except queue.Empty:
                    continue
                if item is _CLOSED:
                    break
                if isinstance(item, OrphanedTransaction):
                    item = orphaned_command(item)
                yield item
        finally:
            self.sessions.close(session)
            metrics.SESSIONS.dec()

    def _settings(self, session, settings: pb.Settings) -> service_pb2.TelemetryCommand:
        publishing = [r.name for r in settings.publishing.topics]
        group = settings.subscription.group.name
        for topic in self.sessions.update(session, publishing=publishing, group=group):
            try:
                self.proxy.listen(topic)   # check-backs of the topic's broker groups
            except errors.TideMQError as exc:
                log.info("no check-backs for a topic without a route", topic=topic,
                         error=str(exc))
        fifo, attempts = False, 17
        entries = settings.subscription.subscriptions
        if group and entries:
            try:
                found = self.proxy.subscription_group(group, entries[0].topic.name)
                fifo, attempts = found.orderly, found.retry_max_times + 1
            except errors.TideMQError as exc:
                log.info("subscription group unknown: defaults", group=group, error=str(exc))
        metrics.REQUESTS.labels("Telemetry", "OK").inc()
        return settings_reply(settings, self.server, fifo=fifo, max_attempts=attempts)

    # -- producing ----------------------------------------------------------------------------

    def SendMessage(self, request, context):
        """One message, or several stored all-or-nothing as one batch (as TideMQ's own batch
        send and RocketMQ's proxy): every message is checked before any is sent."""
        def work():
            if not request.messages:
                raise errors.InvalidArgument("no message to send")
            with self.throttles.calls_for(context):
                if len(request.messages) == 1:
                    entries = [self._send_one(request.messages[0])]
                else:
                    entries = self._send_batch(request.messages)
            return service_pb2.SendMessageResponse(status=ok(), entries=entries)
        return _answer("SendMessage", service_pb2.SendMessageResponse, work)

    def _send_one(self, message: pb.Message) -> service_pb2.SendResultEntry:
        kind = _message_type(message)
        transactional = kind == pb.TRANSACTION
        domain = to_message(message, transactional)
        transaction_id = ""
        if transactional:
            result, transaction_id = self.proxy.prepare(domain)
        else:
            result = self.proxy.send(domain)
        metrics.MESSAGES_SENT.labels(pb.MessageType.Name(kind)).inc()
        return self._entry(message, domain, result, transaction_id)

    def _send_batch(self, messages) -> list[service_pb2.SendResultEntry]:
        kinds = [_message_type(message) for message in messages]
        if pb.TRANSACTION in kinds:
            raise errors.InvalidArgument("a transactional message is sent alone, not in a "
                                         "batch of several")
        domains = [to_message(message, False) for message in messages]
        if len({d.topic for d in domains}) > 1 or len({d.message_group for d in domains}) > 1:
            raise errors.InvalidArgument("the messages of one batch must share their topic "
                                         "and their message group (one queue stores them)")
        results = self.proxy.send_batch(domains)
        for kind in kinds:
            metrics.MESSAGES_SENT.labels(pb.MessageType.Name(kind)).inc()
        return [self._entry(message, domain, result, "")
                for message, domain, result in zip(messages, domains, results, strict=True)]

    @staticmethod
    def _entry(message: pb.Message, domain, result, transaction_id: str
               ) -> service_pb2.SendResultEntry:
        message_id = message.system_properties.message_id or result.unique_id
        recall_handle = ""
        if domain.scheduled:   # recallable until it is due
            recall_handle = RecallHandle(domain.topic, result.broker_name, result.unique_id,
                                         message_id).encode()
        return service_pb2.SendResultEntry(
            status=ok(), message_id=message_id, transaction_id=transaction_id,
            offset=result.queue_offset, recall_handle=recall_handle)

    def EndTransaction(self, request, context):
        def work():
            if request.resolution not in (pb.COMMIT, pb.ROLLBACK):
                raise errors.InvalidArgument("resolution must be COMMIT or ROLLBACK")
            self.proxy.end_transaction(request.transaction_id, request.topic.name,
                                       request.resolution == pb.COMMIT,
                                       from_check=request.source == pb.SOURCE_SERVER_CHECK)
            return service_pb2.EndTransactionResponse(status=ok())
        return _answer("EndTransaction", service_pb2.EndTransactionResponse, work)

    # -- consuming ----------------------------------------------------------------------------

    def ReceiveMessage(self, request, context) -> Iterator[service_pb2.ReceiveMessageResponse]:
        """Status, then the delivery timestamp and the messages (MESSAGE_NOT_FOUND: none)."""
        invisible = _ms(request.invisible_duration) or self.server.default_invisible_ms
        wait_ms = min(_ms(request.long_polling_timeout), self.server.long_polling_timeout_s * 1000)
        try:
            with self.throttles.calls_for(context):
                received = self.proxy.receive(
                    request.group.name, request.message_queue.topic.name,
                    request.message_queue.broker.name,
                    expression=request.filter_expression.expression,
                    expression_type=FILTER_TYPES.get(request.filter_expression.type, "TAG"),
                    max_messages=request.batch_size or self.server.receive_batch_size,
                    invisible_ms=invisible, wait_ms=max(wait_ms, 0),
                    auto_renew=request.auto_renew)
        except errors.TideMQError as exc:
            metrics.REQUESTS.labels("ReceiveMessage", pb.Code.Name(status_of(exc).code)).inc()
            yield service_pb2.ReceiveMessageResponse(status=status_of(exc))
            return
        if not received:
            metrics.REQUESTS.labels("ReceiveMessage", "MESSAGE_NOT_FOUND").inc()
            yield service_pb2.ReceiveMessageResponse(status=pb.Status(
                code=pb.MESSAGE_NOT_FOUND, message="no new message"))
            return
        metrics.REQUESTS.labels("ReceiveMessage", "OK").inc()
        metrics.MESSAGES_RECEIVED.inc(len(received))
        yield service_pb2.ReceiveMessageResponse(status=ok())
        response = service_pb2.ReceiveMessageResponse()
        response.delivery_timestamp.GetCurrentTime()
        yield response
        topic = request.message_queue.topic.name
        for item in received:
            yield service_pb2.ReceiveMessageResponse(message=to_pb(
                item.message, receipt_handle=item.receipt, invisible_ms=invisible, topic=topic))

    def AckMessage(self, request, context):
        def work():
            outcomes = self.proxy.ack_many(request.group.name, request.topic.name,
                                           [entry.receipt_handle for entry in request.entries])
            entries = [service_pb2.AckMessageResultEntry(
                message_id=entry.message_id, receipt_handle=entry.receipt_handle,
                status=status_of(error) if error else ok())
                for entry, error in zip(request.entries, outcomes, strict=True)]
            first_error = next((error for error in outcomes if error), None)
            return service_pb2.AckMessageResponse(
                status=status_of(first_error) if first_error else ok(), entries=entries)
        return _answer("AckMessage", service_pb2.AckMessageResponse, work)

    def ChangeInvisibleDuration(self, request, context):
        def work():
            handle = self.proxy.change_invisible(request.group.name, request.topic.name,
                                                 request.receipt_handle,
                                                 _ms(request.invisible_duration))
            return service_pb2.ChangeInvisibleDurationResponse(status=ok(), receipt_handle=handle)
        return _answer("ChangeInvisibleDuration", service_pb2.ChangeInvisibleDurationResponse,
                       work)

    def ForwardMessageToDeadLetterQueue(self, request, context):
        def work():
            self.proxy.dead_letter(request.group.name, request.topic.name,
                                   request.receipt_handle, request.delivery_attempt)
            return service_pb2.ForwardMessageToDeadLetterQueueResponse(status=ok())
        return _answer("ForwardMessageToDeadLetterQueue",
                       service_pb2.ForwardMessageToDeadLetterQueueResponse, work)

    # -- what TideMQ's gateway does not offer -------------------------------------------------

    # -- the 5.x PullConsumer: the client keeps offsets, TideMQ's Pull and committed offsets --

    def PullMessage(self, request, context) -> Iterator[service_pb2.PullMessageResponse]:
        """Status, the messages from `offset`, then the next offset (MESSAGE_NOT_FOUND: none
        yet, after a long poll of up to the gateway's limit)."""
        try:
            mq = _queue(request.message_queue)
            if request.offset < 0:
                raise errors.InvalidArgument(f"offset must be >= 0, got {request.offset}",
                                             code="ILLEGAL_OFFSET")
            wait_ms = min(_ms(request.long_polling_timeout),
                          self.server.long_polling_timeout_s * 1000)
            with self.throttles.calls_for(context):
                pulled = self.proxy.puller(_group(request.group)).pull(
                    mq, request.offset, max(1, min(request.batch_size or 32, 1024)),
                    long_poll=max(wait_ms, 0) / 1000,
                    tag_expression=request.filter_expression.expression or "*",
                    expression_type=FILTER_TYPES.get(request.filter_expression.type, "TAG"))
        except errors.TideMQError as exc:
            metrics.REQUESTS.labels("PullMessage", pb.Code.Name(status_of(exc).code)).inc()
            yield service_pb2.PullMessageResponse(status=status_of(exc))
            return
        found = bool(pulled.messages)
        metrics.REQUESTS.labels("PullMessage", "OK" if found else "MESSAGE_NOT_FOUND").inc()
        yield service_pb2.PullMessageResponse(status=ok() if found else pb.Status(
            code=pb.MESSAGE_NOT_FOUND, message="no new message"))
        for message in pulled.messages:
            yield service_pb2.PullMessageResponse(message=to_pb(message, topic=mq.topic))
        yield service_pb2.PullMessageResponse(next_offset=pulled.next_offset)

    def UpdateOffset(self, request, context):
        def work():
            if request.offset < 0:
                raise errors.InvalidArgument(f"offset must be >= 0, got {request.offset}",
                                             code="ILLEGAL_OFFSET")
            self.proxy.puller(_group(request.group)).commit(_queue(request.message_queue),
                                                            request.offset)
            return service_pb2.UpdateOffsetResponse(status=ok())
        return _answer("UpdateOffset", service_pb2.UpdateOffsetResponse, work)

    def GetOffset(self, request, context):
        def work():
            mq = _queue(request.message_queue)
            offset = self.proxy.puller(_group(request.group)).committed(mq)
            if offset is None:
                raise errors.NotFound(f"group {request.group.name!r} committed no offset of "
                                      f"{mq}", code="OFFSET_NOT_FOUND")
            return service_pb2.GetOffsetResponse(status=ok(), offset=offset)
        return _answer("GetOffset", service_pb2.GetOffsetResponse, work)

    def QueryOffset(self, request, context):
        def work():
            policy = pb.QueryOffsetPolicy.Name(request.query_offset_policy)
            offset = self.proxy.query_offset(_queue(request.message_queue), policy,
                                             timestamp_ms(request.timestamp))
            return service_pb2.QueryOffsetResponse(status=ok(), offset=offset)
        return _answer("QueryOffset", service_pb2.QueryOffsetResponse, work)

    def RecallMessage(self, request, context):
        def work():
            message_id = self.proxy.recall(request.topic.name, request.recall_handle)
            return service_pb2.RecallMessageResponse(status=ok(), message_id=message_id)
        return _answer("RecallMessage", service_pb2.RecallMessageResponse, work)

    def SyncLiteSubscription(self, request, context):
        return service_pb2.SyncLiteSubscriptionResponse(status=status_of(not_implemented(
            "SyncLiteSubscription (lite topics)")))


def _message_type(message: pb.Message) -> int:
    kind = message.system_properties.message_type
    if kind not in (pb.MESSAGE_TYPE_UNSPECIFIED, *ALL_TYPES):
        raise not_implemented(f"{pb.MessageType.Name(kind)} messages")
    return kind


def _queue(queue: pb.MessageQueue) -> MessageQueue:
    """A RocketMQ queue of the route QueryRoute answered: its broker is a TideMQ broker group,
    its id the queue's id there."""
    if not queue.topic.name or not queue.broker.name or queue.id < 0:
        raise errors.InvalidArgument("message_queue needs the topic, the broker and the queue "
                                     "id of a route's queue (QueryRoute)")
    return MessageQueue(queue.topic.name, queue.broker.name, queue.id)


def _group(group: pb.Resource) -> str:
    if not group.name:
        raise errors.InvalidArgument("the consumer group must not be empty",
                                     code="INVALID_CONSUMER_GROUP")
    return group.name
