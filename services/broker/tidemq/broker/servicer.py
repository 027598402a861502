"""BrokerService over gRPC: validate, one domain call, map the result. No logic lives here."""

from __future__ import annotations

import functools

from opentelemetry import trace
from tidemq.broker import metrics
from tidemq.broker.commit_fence import CommitFence
from tidemq.broker.deadlines import call_deadline
from tidemq.broker.group_listing import POP, PULL, PUSH, list_groups
from tidemq.broker.group_manager import SubscriptionGroupManager
from tidemq.broker.group_rpc import GroupRpc, handovers_pb
from tidemq.broker.idempotence import IdempotentSends
from tidemq.broker.messaging import Messaging
from tidemq.broker.offsets import ConsumerOffsetManager, check_metadata
from tidemq.broker.pop import PopService
from tidemq.broker.queue_locks import QueueLocks
from tidemq.broker.quotas import FETCH, PRODUCE, QuotaEnforcer
from tidemq.broker.registration import BrokerIdentity
from tidemq.broker.replication.read_advice import ReadAdvisor
from tidemq.broker.retry import RetryService
from tidemq.broker.schedule import ScheduleService
from tidemq.broker.schedule.recall import Recalls
from tidemq.broker.store import AppendStatus
from tidemq.broker.subscription_groups import SubscriptionGroupTable
from tidemq.broker.transactions import TransactionService
from tidemq.common import record
from tidemq.common.errors import InvalidArgument, PreconditionFailed
from tidemq.common.tracing import MESSAGING_SYSTEM
from tidemq.v1 import broker_pb2, broker_pb2_grpc, common_pb2

SEND_STATUS = {
    AppendStatus.PUT_OK: common_pb2.SEND_OK,
    AppendStatus.FLUSH_DISK_TIMEOUT: common_pb2.FLUSH_DISK_TIMEOUT,
    AppendStatus.FLUSH_SLAVE_TIMEOUT: common_pb2.FLUSH_SLAVE_TIMEOUT,
}

CONSUME_TYPES = {PUSH: broker_pb2.CONSUME_PUSH, PULL: broker_pb2.CONSUME_PULL,
                 POP: broker_pb2.CONSUME_POP}

# A held pull answers this long before the caller's deadline, so the caller gets NO_NEW_MSG
# rather than DEADLINE_EXCEEDED.
DEADLINE_MARGIN_MS = 250


def _hold_ms(suspend_timeout_ms: int, context) -> int:
    remaining = context.time_remaining() if context is not None else None
    if remaining is None:
        return suspend_timeout_ms
    return max(0, min(suspend_timeout_ms, int(remaining * 1000) - DEADLINE_MARGIN_MS))


def _queue_offsets_pb(entries, metadata: dict | None = None) -> list[broker_pb2.QueueOffset]:
    metadata = metadata or {}
    return [broker_pb2.QueueOffset(topic=t, queue_id=q, offset=o,
                                   metadata=metadata.get((t, q), ""))
            for t, q, o in entries]


def _describe_stored(request, result, store_host: bytes) -> None:
    """The store's facts on the Send call's span (a message's trace then says where it was
    stored): topic, queue, first queue offset, count, and for one message its msg id,
    unique id and keys. One attribute call per batch; nothing when the call is not traced."""
    span = trace.get_current_span()
    if not span.is_recording() or not result.physical_offsets:
        return
    attributes = {"messaging.system": MESSAGING_SYSTEM,
                  "messaging.destination.name": request.topic,
                  "messaging.destination.partition.id": str(request.queue_id),
                  "messaging.batch.message_count": request.record_count,
                  "tidemq.queue_offset": result.first_queue_offset}
    if request.record_count == 1:
        attributes["messaging.message.id"] = record.offset_msg_id(
            store_host, result.physical_offsets[0])
        header = record.checked_header(memoryview(request.records), 0, verify_crc=False)
        unique_id = record.property_at(request.records, 0, header, record.PROP_UNIQ_KEY)
        if unique_id:
            attributes["tidemq.unique_id"] = unique_id
        keys = record.property_at(request.records, 0, header, record.PROP_KEYS)
        if keys:  # the trace collector finds the message's trace by them
            attributes["tidemq.message.keys"] = keys.split(record.KEY_SEPARATOR)
    span.set_attributes(attributes)


class BrokerServicer(broker_pb2_grpc.BrokerServiceServicer):
    def __init__(self, identity: BrokerIdentity, messaging: Messaging,
                 offsets: ConsumerOffsetManager, groups: GroupRpc | None = None,
                 subscriptions: SubscriptionGroupManager | None = None,
                 replication=None, retry: RetryService | None = None,
                 pop: PopService | None = None, locks: QueueLocks | None = None,
                 read_advisor: ReadAdvisor | None = None,
                 transactions: TransactionService | None = None,
                 schedule: ScheduleService | None = None,
                 idempotence: IdempotentSends | None = None,
                 recalls: Recalls | None = None,
                 commit_fence: CommitFence | None = None,
                 quotas: QuotaEnforcer | None = None) -> None:
        self.quotas = quotas or QuotaEnforcer()  # client quotas (quotas.py, docs/quotas.md)
        self.commit_fence = commit_fence  # generation-fenced commits (commit_fence.py)
        self.recalls = recalls  # recalling scheduled messages (schedule/recall.py)
        self.idempotence = idempotence  # idempotent sends' dedup table (idempotence/)
        self.transactions = transactions  # transactional messages (transactions/)
        self.schedule = schedule  # delayed / scheduled sends (schedule/)
        self.replication = replication  # replication.host.BrokerRoleHost, None = disabled
        self.read_advisor = read_advisor  # where far-behind (or caught-up) pulls go next
        self.locks = locks  # orderly consumption's queue locks (queue_locks.py)
        self.pop = pop  # pop consumption (pop/)
        self.retry = retry  # retries and dead letters (retry.py)
        self.groups = groups  # group-coordinator RPCs (group_rpc.py)
        # Subscription-group definitions (none given: every group consumes with the defaults)
        self.subscriptions = subscriptions
        self.group_table = subscriptions.table if subscriptions else SubscriptionGroupTable()
        self.identity = identity
        self.messaging = messaging
        self.offsets = offsets
        self.wire_port = 0  # the wire protocol's port, once it listens (0 = not offered)
        self.wire_tls = False

    async def Send(self, request, context):
        # A full disk refuses producers' sends before anything else (docs/storage.md).
        self.messaging.admit_send()
        # Charged on arrival (the batch's bytes): a caller that did not wait out its last
        # throttle time is held here until its debt is paid (quotas.py).
        admission = await self.quotas.admit(PRODUCE, len(request.records),
                                            call_deadline(context), "Send")
        # A producer marks a half message or a batch holding a delayed message; only those
        # are looked into (the SDK refuses a delayed transactional message).
        sequenced = request.HasField("sequence")   # Kafka's idempotent producer
        if request.idempotent or sequenced:  # dedup: only batches that ask pay for it
            send = self._idempotent_send(request)
        elif request.transaction_prepared:
            send = self.transactions.prepare
        elif request.scheduled and self.schedule is not None:
            send = self.schedule.send
        else:
            send = self.messaging.send
        # The waits for the disk and the replicas end before the caller gives up, so it
        # reads FLUSH_DISK_TIMEOUT / FLUSH_SLAVE_TIMEOUT, not DEADLINE_EXCEEDED (deadlines.py).
        result = await send(request.topic, request.queue_id, request.records,
                            request.record_count, deadline=call_deadline(context))
        _describe_stored(request, result, self.messaging.store.store_host)
        reply = broker_pb2.SendResponse(
            status=SEND_STATUS[result.status], broker_name=self.identity.broker_name,
            queue_id=request.queue_id, first_queue_offset=result.first_queue_offset,
            physical_offsets=result.physical_offsets,
            store_host=self.messaging.store.store_host,
        )
        if request.idempotent or sequenced:
            self.idempotence.describe(result, reply)
        if reply.physical_offsets and reply.physical_offsets[0] >= 0 and \
                reply.status == common_pb2.SEND_OK:
            # the first record's (a duplicate's: its original's) store time: what a Kafka
            # LogAppendTime produce answers, without a read back (one 8-byte mapped read)
            reply.store_timestamp_ms = self.messaging.store.store_timestamp_at(
                reply.physical_offsets[0]) or 0
        reply.throttle_time_ms = self.quotas.throttle_ms(admission)
        return reply

    async def RecallMessage(self, request, context):
        if self.recalls is None:
            raise PreconditionFailed("this broker does not deliver scheduled messages",
                                     code="RECALL_DISABLED")
        if not request.unique_id:
            raise InvalidArgument("unique_id must not be empty", code="INVALID_RECALL_HANDLE")
        self.messaging.writable_queue(request.topic, 0)   # a served topic, on the master
        due = await self.recalls.recall(request.topic, request.unique_id)
        return broker_pb2.RecallMessageResponse(delivery_ms=due)

    def _idempotent_send(self, request):
        if self.idempotence is None:
            raise PreconditionFailed("this broker does not take idempotent sends",
                                     code="IDEMPOTENCE_DISABLED")
        if request.transaction_prepared or request.scheduled:
            raise InvalidArgument("an idempotent send cannot carry half or scheduled messages")
        if request.HasField("sequence"):
            if request.idempotent:
                raise InvalidArgument("a send is idempotent by unique id or by sequence, "
                                      "not both")
            return functools.partial(self.idempotence.send_sequenced, request.sequence)
        return functools.partial(self.idempotence.send, request.producer_id)

    async def Pull(self, request, context):
        """A caller that cancels or disconnects cancels this coroutine, ending its hold."""
        self.group_table.check_consume(request.consumer_group, broadcasting=request.broadcasting)
        quotas = self.quotas
        admission = await quotas.admit(FETCH, 0, call_deadline(context), "Pull")
        outcome = await self.messaging.pull(
            request.topic, request.queue_id, request.queue_offset, request.max_messages,
            request.max_bytes, _hold_ms(request.suspend_timeout_ms, context),
            request.tag_expression, request.expression_type,
        )
        reply = broker_pb2.PullResponse(
            status=broker_pb2.PullStatus.Value(outcome.status.value),
            next_begin_offset=outcome.next_begin_offset, min_offset=outcome.min_offset,
            max_offset=outcome.max_offset, records=outcome.records,
            record_count=outcome.record_count,
        )
        if admission is not None:   # a fetch's bytes are known once read
            quotas.charge(admission, FETCH, len(outcome.records))
            reply.throttle_time_ms = quotas.throttle_ms(admission)
        advisor = self.read_advisor
        if advisor is not None and outcome.records:
            suggested = advisor.advise(outcome.records)
            if suggested is not None:
                reply.suggested_broker_id = suggested
                reply.suggest_pull_from_slave = suggested != 0
        return reply

    def GetQueueOffsets(self, request, context):
        return broker_pb2.GetQueueOffsetsResponse(
            broker_name=self.identity.broker_name,
            queues=[broker_pb2.QueueOffsets(queue_id=q, min_offset=lo, max_offset=hi)
                    for q, lo, hi in self.messaging.queue_offsets(request.topic)],
        )

    def SearchOffset(self, request, context):
        offset, stored = self.messaging.search_timestamp(request.topic, request.queue_id,
                                                         request.timestamp_ms)
        return broker_pb2.SearchOffsetResponse(queue_offset=offset,
                                               store_timestamp_ms=stored or 0)

    def ViewMessage(self, request, context):
        return broker_pb2.ViewMessageResponse(
            record=self.messaging.view(request.physical_offset))

    def QueryMessageByKey(self, request, context):
        found = self.messaging.query_by_key(request.topic, request.key,
                                            request.begin_timestamp_ms, request.end_timestamp_ms,
                                            request.max_results)
        return broker_pb2.QueryMessageByKeyResponse(records=b"".join(found),
                                                    record_count=len(found))

    def GetBrokerInfo(self, request, context):
        _, topics = self.messaging.topics.snapshot()
        store = self.messaging.store
        ident = self.identity
        return broker_pb2.GetBrokerInfoResponse(
            cluster_name=ident.cluster_name, broker_name=ident.broker_name,
            broker_id=ident.broker_id if self.replication is None
            else self.replication.registrar.registered_id,
            broker_addr=ident.broker_addr,
            topics=[common_pb2.TopicConfig(topic_name=t.name, read_queue_nums=t.queues,
                                           write_queue_nums=t.queues, perm=t.perm, order=t.order)
                    for t in topics],
            commitlog_min_offset=store.commitlog_min_offset(),
            commitlog_max_offset=store.commitlog_max_offset(),
            wire_port=self.wire_port, wire_tls=self.wire_tls,
            consumed=[broker_pb2.TopicCount(topic=t, count=n)
                      for t, n in sorted(metrics.consumed_by_topic().items())],
            throttled=[broker_pb2.ThrottledEntity(quota=q, entity=e, owed_ms=int(owed * 1000))
                       for owed, q, e in sorted(((o, q, e) for q, e, o
                                                 in self.quotas.buckets.throttled()),
                                                reverse=True)],
            **self._replication_info(),
        )

    def _replication_info(self) -> dict:
        host = self.replication
        if host is None:
            return {}
        rebuilding = host.rebuilding()
        return dict(replica_id=self.identity.broker_id, role=host.role, epoch=host.epoch,
                    confirmed_offset=host.confirmed_offset(),
                    replicas=[broker_pb2.ReplicaProgress(replica_id=r, log_end=end,
                                                         lag_bytes=lag, lag_ms=lag_ms,
                                                         in_sync=member,
                                                         rebuilding=r in rebuilding)
                              for r, end, lag, lag_ms, member in host.progress()])

    def _check_master(self) -> None:
        """Offsets are written on the master only: a slave's table is a copy of the master's
        and would lose the write at its next copy."""
        host = self.replication
        if host is not None and host.role != "MASTER":
            raise PreconditionFailed("this replica is not the master of its group: commit "
                                     "offsets on the master", code="NOT_MASTER")

    def CommitOffsets(self, request, context):
        self._check_master()
        self.group_table.check_consume(request.consumer_group)
        for entry in request.offsets:
            self.messaging.topic(entry.topic)
        entries = [(e.topic, e.queue_id, e.offset) for e in request.offsets]
        metadata = {(e.topic, e.queue_id): e.metadata for e in request.offsets if e.metadata}
        for (topic, queue_id), text in metadata.items():   # refused before any fencing
            check_metadata(topic, queue_id, text)

        def commit() -> None:
            self.offsets.commit(request.consumer_group, entries, metadata)
        if request.generation_id < 0 or self.commit_fence is None:
            commit()   # not a coordinated member's commit: not fenced
        else:          # ILLEGAL_GENERATION / UNKNOWN_MEMBER_ID as Kafka's (commit_fence.py)
            self.commit_fence.commit(request.consumer_group, request.generation_id,
                                     request.member_id, commit)
        return broker_pb2.CommitOffsetsResponse()

    def QueryOffsets(self, request, context):
        if not request.consumer_group:
            raise InvalidArgument("consumer_group must not be empty")
        pops = [broker_pb2.PopProgress(topic=topic, queue_id=queue_id, next_offset=cursor,
                                       unacked=unacked)
                for (group, topic, queue_id), (cursor, unacked) in sorted(self.pop.progress().items())
                if group == request.consumer_group and request.topic in ("", topic)]
        return broker_pb2.QueryOffsetsResponse(
            offsets=_queue_offsets_pb(self.offsets.query(request.consumer_group, request.topic),
                                      self.offsets.metadata(request.consumer_group,
                                                            request.topic)),
            pops=pops)

    def ResetOffsets(self, request, context):
        self._check_master()
        if not request.consumer_group:
            raise InvalidArgument("consumer_group must not be empty")
        topic = self.messaging.topic(request.topic)
        entries = [(topic.name, q, self.messaging.search_offset(topic.name, q,
                                                                request.timestamp_ms))
                   for q in range(topic.queues)]
        self.offsets.commit(request.consumer_group, entries)
        return broker_pb2.ResetOffsetsResponse(offsets=_queue_offsets_pb(entries))

    def DeleteOffsets(self, request, context):
        self._check_master()  # slaves take the master's table, deletions included
        if not request.topic:
            raise InvalidArgument("topic must not be empty")
        return broker_pb2.DeleteOffsetsResponse(consumer_groups=self.offsets.delete_topic(
            request.topic, request.consumer_group))

    def GetAllConsumerOffsets(self, request, context):
        texts = self.offsets.metadata_snapshot()
        return broker_pb2.GetAllConsumerOffsetsResponse(groups=[
            broker_pb2.GroupOffsets(consumer_group=group,
                                    offsets=_queue_offsets_pb(entries, texts.get(group)))
            for group, entries in sorted(self.offsets.snapshot().items())],
            coordinated_groups=handovers_pb(self.groups.coordinator.handovers()))

    async def JoinGroup(self, request, context):
        return await self.groups.JoinGroup(request, context)

    async def SyncGroup(self, request, context):
        return await self.groups.SyncGroup(request, context)

    def Heartbeat(self, request, context):
        return self.groups.Heartbeat(request, context)

    def LeaveGroup(self, request, context):
        return self.groups.LeaveGroup(request, context)

    def DescribeGroup(self, request, context):
        return self.groups.DescribeGroup(request, context)

    def ListGroups(self, request, context):
        """Every group that consumed here: joined the coordinator, popped or committed
        offsets (group_listing.py), with how it consumes and whether it is defined."""
        coordinated = ([(g.group_id, str(g.state)) for g in self.groups.coordinator.list_groups()]
                       if self.groups is not None else [])
        popping = {group for group, _, _ in self.pop.progress()} if self.pop is not None else ()
        table = self.group_table
        offsets = self.offsets.snapshot() if self.offsets is not None else {}
        listed = list_groups(coordinated, offsets, popping,
                             lambda group: table.get(group) is not None)
        return broker_pb2.ListGroupsResponse(groups=[
            broker_pb2.DescribeGroupResponse(group_id=g.group_id, state=g.state,
                                             consume_type=CONSUME_TYPES[g.consume_type],
                                             defined=g.defined)
            for g in listed])

    def GetSubscriptionGroups(self, request, context):
        table = self.group_table
        names = list(request.groups)
        groups = [table.effective(n) for n in names] if names else table.snapshot()
        return broker_pb2.GetSubscriptionGroupsResponse(
            groups=[subscription_group_pb(g, table.get(g.name) is not None) for g in groups],
            auto_create=table.auto_create,
            revision=self.subscriptions.revision if self.subscriptions else 0,
        )

    async def SendMessageBack(self, request, context):
        moved = await self.retry.send_back(request.consumer_group, request.physical_offset,
                                           dead_letter=request.dead_letter,
                                           reconsume_times=request.reconsume_times)
        return broker_pb2.SendMessageBackResponse(
            dead_letter=moved.dead_letter, topic=moved.topic, queue_id=moved.queue_id,
            queue_offset=moved.queue_offset, reconsume_times=moved.reconsume_times)

    async def RedriveDeadLetter(self, request, context):
        moved = await self.retry.redrive(request.consumer_group, request.physical_offset)
        return broker_pb2.RedriveDeadLetterResponse(
            topic=moved.topic, queue_id=moved.queue_id, queue_offset=moved.queue_offset)

    async def Pop(self, request, context):
        quotas = self.quotas
        admission = await quotas.admit(FETCH, 0, call_deadline(context), "Pop")
        popped = await self.pop.pop(
            request.consumer_group, request.topic, request.max_messages,
            request.invisible_duration_ms,
            _hold_ms(request.wait_ms, context), request.tag_expression,
            request.expression_type)
        reply = broker_pb2.PopResponse(records=popped.records, record_count=len(popped.handles),
                                       receipt_handles=popped.handles)
        if admission is not None:
            quotas.charge(admission, FETCH, len(popped.records))
            reply.throttle_time_ms = quotas.throttle_ms(admission)
        return reply

    async def Ack(self, request, context):
        if not request.receipt_handles:
            await self.pop.ack(request.consumer_group, request.receipt_handle)
            return broker_pb2.AckResponse()
        if request.receipt_handle:
            raise InvalidArgument("set receipt_handle (one ack) or receipt_handles (a batch), "
                                  "not both")
        outcomes = await self.pop.ack_many(request.consumer_group, list(request.receipt_handles))
        response = broker_pb2.AckResponse()
        add = response.results.add  # a third of building AckEntryResults and handing them over
        for outcome in outcomes:
            if outcome.error is None:
                add(receipt_handle=outcome.receipt_handle)
            else:
                add(receipt_handle=outcome.receipt_handle, code=outcome.code,
                    message=outcome.message)
        return response

    async def ChangeInvisibleDuration(self, request, context):
        handle = await self.pop.change_invisible(request.consumer_group, request.receipt_handle,
                                                 request.invisible_duration_ms)
        return broker_pb2.ChangeInvisibleDurationResponse(receipt_handle=handle)

    def LockQueues(self, request, context):
        self.group_table.check_consume(request.consumer_group)
        held = self.locks.lock(request.consumer_group, request.client_id,
                               [(q.topic, q.queue_id) for q in request.queues])
        return broker_pb2.LockQueuesResponse(
            locked=[broker_pb2.LockedQueue(topic=t, queue_id=q) for t, q in held])

    def UnlockQueues(self, request, context):
        self.locks.unlock(request.consumer_group, request.client_id,
                          [(q.topic, q.queue_id) for q in request.queues])
        return broker_pb2.UnlockQueuesResponse()

    async def EndTransaction(self, request, context):
        commit = RESOLUTIONS.get(request.resolution)
        state, already = await self.transactions.end(
            request.producer_group, request.transaction_id, request.half_offset, commit)
        return broker_pb2.EndTransactionResponse(state=state.value, already_resolved=already)

    async def ProducerHeartbeat(self, request, context):
        self.transactions.heartbeat(request.producer_group, request.client_id)
        return broker_pb2.ProducerHeartbeatResponse()

    async def TransactionChecks(self, request, context):
        self.transactions.heartbeat(request.producer_group, request.client_id)  # validates
        async for check in self.transactions.checks(request.producer_group, request.client_id):
            yield broker_pb2.TransactionCheck(
                transaction_id=check.transaction_id, half_offset=check.half_offset,
                record=check.record, check_times=check.check_times)


# EndTransaction's resolution -> TransactionService.end's `commit`
RESOLUTIONS = {broker_pb2.TRANSACTION_COMMIT: True, broker_pb2.TRANSACTION_ROLLBACK: False,
               broker_pb2.TRANSACTION_UNKNOWN: None}


def subscription_group_pb(group, defined: bool) -> broker_pb2.SubscriptionGroup:
    return broker_pb2.SubscriptionGroup(**group.to_json(), defined=defined)
