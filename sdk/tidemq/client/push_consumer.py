"""PushConsumer: the client pulls with long polling and calls your listener
(docs/consumer-groups.md).

CLUSTERING shares the topics' queues among the group's members through the broker's group
coordinator (tidemq.client.group); BROADCASTING gives every member every queue and keeps its
offsets in a local file. Pull, decode and commit are PullConsumer's, unchanged.

A CLUSTERING consumer also subscribes to its group's retry topic (`%RETRY%{group}`): a message
the listener fails on (RECONSUME_LATER or an exception) is sent back to its broker, which
moves it there with reconsume_times + 1 (or to `%DLQ%{group}` past the group's
retry_max_times), and the consumer moves on. The broker's timer makes a retry visible only
after its delay level (3 + reconsume count; docs/scheduled.md); a retry record of an older
broker carrying NOT_BEFORE_MS is still held until then. Only when the broker cannot take it back
is it retried in place after `reconsume_backoff_s`, as BROADCASTING always does.

    >>> def listener(messages):                                     # doctest: +SKIP
    ...     for m in messages: print(m.body)
    ...     return ConsumeStatus.CONSUME_SUCCESS
    >>> with PushConsumer("127.0.0.1:9876", "audit", {"orders": "*"}, listener):  # doctest: +SKIP
    ...     input()
"""

from __future__ import annotations

import contextlib
import enum
import json
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tidemq.client.consume_spans import outcome, processing
from tidemq.client.consumer import PullConsumer, checked_subscription
from tidemq.client.group import DirectClients, GroupMember
from tidemq.client.message import MessageExt, MessageQueue, PullStatus
from tidemq.client.orderly import OrderlyConsumption
from tidemq.client.process_queue import ProcessQueue
from tidemq.common import errors, record
from tidemq.common.assignors import DEFAULT_ASSIGNOR
from tidemq.common.logs import get_logger
from tidemq.common.system_topics import RETRY_PREFIX, retry_topic
from tidemq.v1 import broker_pb2

log = get_logger(__name__)



def _not_before_s(batch: list[MessageExt]) -> float:
    """Seconds until every message of a redelivered batch is due (0 = now)."""
    due_ms = max(int(m.properties.get(record.PROP_NOT_BEFORE_MS, 0) or 0) for m in batch)
    return max(0.0, due_ms / 1000 - time.time())


class ConsumeStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"  # not committed past; redelivered after a backoff


class MessageModel(enum.Enum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFrom(enum.Enum):
    LAST = "LAST"            # a queue without a committed offset starts at its end
    FIRST = "FIRST"          # ... at its beginning
    TIMESTAMP = "TIMESTAMP"  # ... at the first message stored at/after consume_timestamp_ms


Listener = Callable[[list[MessageExt]], ConsumeStatus]


class PushConsumer:
    def __init__(
        self, namesrv_addrs: str | Sequence[str], group: str,
        subscription: str | Mapping[str, str], listener: Listener, *,
        model: MessageModel = MessageModel.CLUSTERING,
        consume_from: ConsumeFrom = ConsumeFrom.LAST, consume_timestamp_ms: int = 0,
        concurrency: int = 20, pull_batch_size: int = 32, consume_batch_size: int = 1,
        max_pending_messages: int = 1000, max_pending_bytes: int = 100 * 1024 * 1024,
        session_timeout_ms: int = 10_000, heartbeat_interval_ms: int = 3_000,
        strategy: str = DEFAULT_ASSIGNOR, auto_commit_interval_s: float = 5.0,
        long_poll_s: float = 15.0, reconsume_backoff_s: float = 1.0,
        offset_store_dir: str | Path = "~/.tidemq/offsets", timeout: float = 3.0,
        assignment_timeout_s: float = 30.0,
        orderly: bool = False, max_reconsume_times: int = 16, suspend_s: float = 1.0,
        expression_type: str = "TAG", client_id: str = "",
    ) -> None:
        self.subscription = ({subscription: "*"} if isinstance(subscription, str)
                             else dict(subscription))
        if not self.subscription:
            raise errors.InvalidArgument("subscribe to at least one topic")
        # "SQL92": each subscribed topic's expression is a SQL92 filter over the properties
        # (docs/filters.md); the retry topic holds messages that matched it, read whole
        self.expression_types = {topic: checked_subscription(expression, expression_type)
                                 for topic, expression in self.subscription.items()}
        if orderly and model is not MessageModel.CLUSTERING:
            raise errors.InvalidArgument("orderly consumption needs the CLUSTERING model")
        if model is MessageModel.CLUSTERING and not orderly:  # orderly retries in place
            self.subscription.setdefault(retry_topic(group), "*")
        self.max_reconsume_times, self.suspend_s = max_reconsume_times, suspend_s
        if concurrency <= 0 or pull_batch_size <= 0 or consume_batch_size <= 0:
            raise errors.InvalidArgument("concurrency and batch sizes must be positive")
        self.group, self.listener, self.model = group, listener, model
        self.consume_from, self.consume_timestamp_ms = consume_from, consume_timestamp_ms
        self.pull_batch_size, self.consume_batch_size = pull_batch_size, consume_batch_size
        self.max_pending_messages, self.max_pending_bytes = max_pending_messages, max_pending_bytes
        self.auto_commit_interval_s = auto_commit_interval_s
        self.long_poll_s, self.reconsume_backoff_s = long_poll_s, reconsume_backoff_s
        self.assignment_timeout_s = assignment_timeout_s
        # client_id: the entity client quotas charge (docs/quotas.md); '' = <host>@<pid>
        self.puller = PullConsumer(namesrv_addrs, consumer_group=group, timeout=timeout,
                                   client_id=client_id)
        # long polls must not trip breakers; the same client id as the puller's own
        self.puller.brokers = DirectClients(timeout, self.puller.brokers.client_id)
        self._pool = ThreadPoolExecutor(concurrency, thread_name_prefix=f"consume-{group}")
        self._queues: dict[MessageQueue, ProcessQueue] = {}
        self._committed: dict[MessageQueue, int] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._committer = threading.Thread(target=self._auto_commit, daemon=True,
                                           name=f"commit-{group}")
        self._offset_file = Path(offset_store_dir).expanduser() / f"{group}.json"
        self.member: GroupMember | None = None
        self.orderly = OrderlyConsumption(self, self._stopping) if orderly else None
        if model is MessageModel.CLUSTERING:
            self.member = GroupMember(
                self.puller.routes.namesrv, self.puller.routes, self.puller.brokers, group,
                list(self.subscription), on_assigned=self._assigned, on_revoked=self._revoked,
                strategy=strategy, session_timeout_ms=session_timeout_ms,
                heartbeat_interval_ms=heartbeat_interval_ms)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> PushConsumer:
        """Join and, by default, wait for the first assignment (up to `assignment_timeout_s`;
        0 returns at once): a queue's start offset is fixed when it is assigned, so without
        the wait a new group starting at LAST would skip, for good, what is sent meanwhile."""
        if self.member is not None:
            self.member.start()
        else:
            self._assigned([mq for topic in self.subscription
                            for mq in self.puller.fetch_queues(topic)])
        self._committer.start()
        if self.member is not None and self.assignment_timeout_s > 0:
            if self.member.wait_stable(self.assignment_timeout_s):
                log.info("push_consumer_assigned", group=self.group,
                         queues=[str(mq) for mq in self.assigned_queues()])
            else:
                log.warning("push_consumer_not_assigned_yet", group=self.group,
                            waited_s=self.assignment_timeout_s,
                            reason=self.member.last_error_code or "no answer yet")
        return self

    def shutdown(self) -> None:
        """Stop pulling, commit what was consumed, leave the group."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        if self.member is not None:
            self.member.stop()
        else:
            self._revoked(list(self._queues))
        self._pool.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> PushConsumer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()

    def assigned_queues(self) -> list[MessageQueue]:
        """The queues this member owns right now (changes at every rebalance)."""
        with self._lock:
            return sorted(self._queues)

    # ------------------------------------------------------------------ (re)assignment

    def _assigned(self, queues: list[MessageQueue]) -> None:
        stored = self._load_local_offsets() if self.member is None else {}
        for mq in queues:
            with self._lock:
                if mq in self._queues:
                    continue
            pq = ProcessQueue(mq, self._start_offset(mq, stored))
            with self._lock:
                self._queues[mq] = pq
                self._committed[mq] = -1  # commit the start offset too: a LAST start must
                # survive a rebalance that happens before anything arrives
            if self.orderly is not None:
                self.orderly.add(pq)
            threading.Thread(target=self._pull_loop, args=(pq,), daemon=True,
                             name=f"pull-{mq}").start()

    def _revoked(self, queues: list[MessageQueue]) -> None:
        with self._lock:
            gone = [self._queues.pop(mq) for mq in queues if mq in self._queues]
        for pq in gone:
            pq.drop()
        if self.orderly is not None:  # their batches finish before the commit and unlock
            self.orderly.remove([pq.mq for pq in gone])
        self._commit({pq.mq: pq.commit_offset() for pq in gone})
        with self._lock:
            for pq in gone:
                self._committed.pop(pq.mq, None)
        if self.orderly is not None:
            self.orderly.release([pq.mq for pq in gone])

    def _start_offset(self, mq: MessageQueue, stored: dict[str, int]) -> int:
        committed = (stored.get(_key(mq)) if self.member is None
                     else self.puller.committed(mq))
        if committed is not None:
            return committed
        if self.consume_from is ConsumeFrom.TIMESTAMP:
            return self.puller.offset_for_timestamp(mq, self.consume_timestamp_ms)
        low, high = self.puller.queue_offsets(mq.topic, mq.broker_name).get(mq.queue_id, (0, 0))
        return low if self.consume_from is ConsumeFrom.FIRST else high

    # ------------------------------------------------------------------ pulling

    def _pull_loop(self, pq: ProcessQueue) -> None:
        expression, backoff = self.subscription.get(pq.mq.topic, "*"), 0.05
        while not pq.dropped and not self._stopping.is_set():
            if not pq.wait_for_space(self.max_pending_messages, self.max_pending_bytes, 1.0):
                continue  # flow control: this queue's consumers are behind
            try:
                result = self.puller.pull(
                    pq.mq, pq.next_offset, self.pull_batch_size, long_poll=self.long_poll_s,
                    tag_expression=expression,
                    expression_type=self.expression_types.get(pq.mq.topic, "TAG"),
                    broadcasting=self.model is MessageModel.BROADCASTING)
                backoff = 0.05
            except errors.TideMQError as exc:
                if pq.dropped or self._stopping.is_set():
                    return
                log.info("pull_failed", queue=str(pq.mq), error=str(exc))
                self._stopping.wait(backoff)
                backoff = min(backoff * 2, 2.0)
                continue
            if pq.dropped:
                return
            if result.status is PullStatus.FOUND and result.messages:
                pq.add(result.messages, result.next_offset)
                if self.orderly is not None:
                    self.orderly.offer(pq, result.messages)
                    continue
                retried = pq.mq.topic.startswith(RETRY_PREFIX)
                for i in range(0, len(result.messages), self.consume_batch_size):
                    batch = result.messages[i:i + self.consume_batch_size]
                    wait_s = _not_before_s(batch) if retried else 0.0
                    if wait_s > 0:  # the broker's retry back-off
                        self._later(wait_s, pq, batch)
                    else:
                        self._submit(pq, batch)
                # Let the consume thread just woken take the GIL now: otherwise it waits until
                # this thread's next pull blocks, about 70 µs of a message's send-to-listener
                # latency here (a yield per pull reply, not per message).
                os.sched_yield()
            elif result.status is PullStatus.OFFSET_ILLEGAL:
                log.warning("offset_illegal", queue=str(pq.mq), offset=pq.next_offset,
                            corrected=result.next_offset)
                pq.next_offset = result.next_offset
            else:
                pq.next_offset = result.next_offset

    def _submit(self, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        with contextlib.suppress(RuntimeError):  # pool shut down: they stay uncommitted
            self._pool.submit(self._consume, pq, batch)

    def _consume(self, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        if pq.dropped:
            return
        member = self.member.client_id if self.member is not None else ""
        with processing(pq.mq.topic, self.group, batch, member) as span:
            try:
                status = self.listener(batch)
            except Exception:
                log.exception("listener_failed", queue=str(pq.mq), count=len(batch))
                status = ConsumeStatus.RECONSUME_LATER
            outcome(span, getattr(status, "value", str(status)),
                    status is not ConsumeStatus.CONSUME_SUCCESS)
        if status is not ConsumeStatus.CONSUME_SUCCESS:
            batch = self._send_back(pq, batch)
            if batch:  # kept pending (no commit past them) and tried again after a backoff
                self._later(self.reconsume_backoff_s, pq, batch)
            return
        pq.done(m.queue_offset for m in batch)

    def _later(self, delay_s: float, pq: ProcessQueue, batch: list[MessageExt]) -> None:
        timer = threading.Timer(delay_s, self._submit, (pq, batch))
        timer.daemon = True
        timer.start()

    def _send_back(self, pq: ProcessQueue, batch: list[MessageExt]) -> list[MessageExt]:
        """Give failed messages back to their broker (retry topic or DLQ); marks those it took
        as done and returns the ones it did not (to retry in place)."""
        if self.member is None:  # BROADCASTING: every member has its own copy; retry locally
            return batch
        kept, taken = [], []
        for message in batch:
            try:
                self.puller.brokers.get(self.puller.master_addr(pq.mq)).call(
                    "SendMessageBack", broker_pb2.SendMessageBackRequest(
                        consumer_group=self.group, physical_offset=message.physical_offset))
                taken.append(message.queue_offset)
            except errors.TideMQError as exc:
                log.info("send_back_failed", queue=str(pq.mq), error=str(exc))
                kept.append(message)
        pq.done(taken)
        return kept

    # ------------------------------------------------------------------ offsets

    def _auto_commit(self) -> None:
        while not self._stopping.wait(self.auto_commit_interval_s):
            self.commit_now()

    def commit_now(self) -> None:
        """Commit every owned queue's consumed prefix (also runs every auto-commit interval)."""
        with self._lock:
            offsets = {mq: pq.commit_offset() for mq, pq in self._queues.items()}
        self._commit(offsets)

    def _commit(self, offsets: Mapping[MessageQueue, int]) -> None:
        changed = {mq: o for mq, o in offsets.items() if self._committed.get(mq) != o}
        if not changed:
            return
        if self.member is None:
            self._store_local_offsets(changed)
        else:
            by_broker: dict[str, list[broker_pb2.QueueOffset]] = {}
            for mq, offset in changed.items():
                by_broker.setdefault(mq.broker_name, []).append(
                    broker_pb2.QueueOffset(topic=mq.topic, queue_id=mq.queue_id, offset=offset))
            for broker_name, entries in by_broker.items():
                mq = next(m for m in changed if m.broker_name == broker_name)
                try:
                    self.puller.brokers.get(self.puller.master_addr(mq)).call(
                        "CommitOffsets", broker_pb2.CommitOffsetsRequest(
                            consumer_group=self.group, generation_id=-1, offsets=entries))
                except errors.TideMQError as exc:
                    log.warning("commit_failed", broker=broker_name, error=str(exc))
                    for m in [m for m in changed if m.broker_name == broker_name]:
                        changed.pop(m)
        with self._lock:
            for mq, offset in changed.items():
                if mq in self._committed:
                    self._committed[mq] = offset

    def _load_local_offsets(self) -> dict[str, int]:
        try:
            return {k: int(v) for k, v in json.loads(self._offset_file.read_text()).items()}
        except FileNotFoundError:
            return {}
        except (ValueError, AttributeError) as exc:
            log.warning("offset_file_unreadable", path=str(self._offset_file), error=str(exc))
            return {}

    def _store_local_offsets(self, changed: Mapping[MessageQueue, int]) -> None:
        """Atomic: write a temp file, fsync, rename over the old one."""
        with self._lock:
            document = self._load_local_offsets()
            document.update({_key(mq): o for mq, o in changed.items()})
            self._offset_file.parent.mkdir(parents=True, exist_ok=True)
            tmp = self._offset_file.with_suffix(f".{os.getpid()}.{time.monotonic_ns()}.tmp")
            with open(tmp, "w") as handle:
                json.dump(document, handle, sort_keys=True)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, self._offset_file)


def _key(mq: MessageQueue) -> str:
    return f"{mq.topic}|{mq.broker_name}|{mq.queue_id}"
