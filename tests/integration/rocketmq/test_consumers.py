"""The official RocketMQ 5 Python client's consumers through gateway-grpc: SimpleConsumer
with tag and SQL92 filters, invisible-time changes and redelivery; PushConsumer concurrent
(a failed message redelivered) and FIFO (group order kept, a failing message forwarded to the
dead-letter queue); the 5.x PullConsumer's RPCs through the official proto's stubs."""

from __future__ import annotations

import threading

import grpc
import pytest
import requests
from google.protobuf.timestamp_pb2 import Timestamp
from prometheus_client.parser import text_string_to_metric_families
from rocketmq import ConsumeResult, FilterExpression, MessageListener, Producer, PushConsumer
from rocketmq.grpc_protocol import FilterType, definition_pb2, service_pb2, service_pb2_grpc
from tidemq.client import DeadLetters

from tests.integration.rocketmq.clients import drain, message, simple_consumer, started
from tests.integration.rocketmq.conftest import FIFO_DLQ_GROUP, FIFO_PUSH_GROUP
from tests.support.processes import wait_until

pytestmark = pytest.mark.slow


def test_tag_filter_and_invisible_duration(config):
    with started(Producer(config, ("RmqSimple",))) as producer:
        for i in range(6):
            producer.send(message("RmqSimple", f"m-{i}".encode(), tag="even" if i % 2 == 0
                                  else "odd"))
    with simple_consumer(config, "rmq-simple", "RmqSimple",
                         FilterExpression("even")) as consumer:
        got = drain(consumer, 3, ack=False)
        assert sorted(m.body for m in got) == [b"m-0", b"m-2", b"m-4"]
        kept, released = got[0], got[1:]
        consumer.change_invisible_duration(kept, 60)   # hidden for a minute more
        for received in released:
            consumer.change_invisible_duration(received, 1)  # back in a second
        again = drain(consumer, 2)
        assert sorted(m.body for m in again) == sorted(m.body for m in released)
        assert all(m.delivery_attempt == 2 for m in again)
        consumer.ack(kept)   # the handle from change_invisible_duration is the live one


def test_sql92_filter_over_user_properties(config):
    with started(Producer(config, ("RmqSql",))) as producer:
        for i in range(6):
            producer.send(message("RmqSql", f"s-{i}".encode(), properties={"n": str(i)}))
    sql = FilterExpression("n > 3", FilterType.SQL)
    with simple_consumer(config, "rmq-sql", "RmqSql", sql) as consumer:
        got = drain(consumer, 2)
    assert sorted(m.body for m in got) == [b"s-4", b"s-5"]


class FailOnce(MessageListener):
    def __init__(self) -> None:
        self.attempts: dict[bytes, list[int]] = {}
        self.lock = threading.Lock()

    def consume(self, received):
        with self.lock:
            self.attempts.setdefault(received.body, []).append(received.delivery_attempt)
        if received.body == b"p-0" and received.delivery_attempt == 1:
            return ConsumeResult.FAILURE
        return ConsumeResult.SUCCESS


def test_push_consumer_consumes_concurrently_and_redelivers_a_failure(config):
    listener = FailOnce()
    with started(PushConsumer(config, "rmq-push", listener, {"RmqPush": FilterExpression()},
                              consumption_thread_count=4)):
        with started(Producer(config, ("RmqPush",))) as producer:
            for i in range(10):
                producer.send(message("RmqPush", f"p-{i}".encode()))

        def all_consumed() -> bool:
            with listener.lock:
                return len(listener.attempts) == 10 and listener.attempts[b"p-0"] == [1, 2]

        wait_until(all_consumed, 40, interval=0.1, message="ten consumed, p-0 twice")
    assert all(attempts == [1] for body, attempts in listener.attempts.items()
               if body != b"p-0")


class RecordOrder(MessageListener):
    def __init__(self) -> None:
        self.seen: list = []
        self.lock = threading.Lock()

    def consume(self, received):
        with self.lock:
            self.seen.append((received.message_group, received.body))
        return ConsumeResult.SUCCESS


def test_fifo_push_consumer_of_an_orderly_group_keeps_group_order(config):
    listener = RecordOrder()
    groups = ("g1", "g2", "g3")
    with started(PushConsumer(config, FIFO_PUSH_GROUP, listener,
                              {"RmqFifoPush": FilterExpression()}, consumption_thread_count=4)):
        with started(Producer(config, ("RmqFifoPush",))) as producer:
            for i in range(6):
                for group in groups:
                    producer.send(message("RmqFifoPush", f"{group}:{i}".encode(), group=group))

        def all_consumed() -> bool:
            with listener.lock:
                return len(listener.seen) >= 18

        wait_until(all_consumed, 40, interval=0.1, message="18 FIFO messages consumed")
    for group in groups:
        bodies = [int(body.split(b":")[1]) for g, body in listener.seen if g == group]
        assert bodies == list(range(6)), f"{group} out of order: {bodies}"


class AlwaysFail(MessageListener):
    def __init__(self) -> None:
        self.attempts: list[int] = []

    def consume(self, received):
        self.attempts.append(received.delivery_attempt)
        return ConsumeResult.FAILURE


def test_fifo_push_consumer_forwards_a_failing_message_to_the_dead_letter_queue(
        config, rmq_cluster):
    listener = AlwaysFail()
    with started(PushConsumer(config, FIFO_DLQ_GROUP, listener,
                              {"RmqFifoDlq": FilterExpression()})):
        with started(Producer(config, ("RmqFifoDlq",))) as producer:
            sent = producer.send(message("RmqFifoDlq", b"poison", group="g"))

        def dead_lettered() -> list:
            with DeadLetters(rmq_cluster.namesrv_addrs, FIFO_DLQ_GROUP) as dlq:
                return dlq.list()

        wait_until(lambda: dead_lettered(), 40, interval=0.2, message="poison in the DLQ")
    dead = dead_lettered()
    assert [m.body for m in dead] == [b"poison"]
    assert dead[0].origin_topic == "RmqFifoDlq" and dead[0].properties.get(
        "RMQ_MESSAGE_ID") == sent.message_id
    assert len(listener.attempts) == 2   # retry_max_times 1: two attempts, in place


class SlowOnce(MessageListener):
    """Works on "slow" until the test releases it: far past its 3 s invisible time."""

    def __init__(self) -> None:
        self.attempts: list[int] = []
        self.release = threading.Event()

    def consume(self, received):
        self.attempts.append(received.delivery_attempt)
        if received.body == b"slow":
            self.release.wait(30)
        return ConsumeResult.SUCCESS


def _metric(rmq_cluster, name: str, **labels: str) -> float:
    gateway = rmq_cluster.extra["gateway_grpc"]
    text = requests.get(f"http://127.0.0.1:{gateway.metrics_port}/metrics", timeout=5).text
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return 0.0


def test_auto_renew_keeps_a_slow_message_invisible_until_acked(config, rmq_cluster):
    listener = SlowOnce()
    renewals = "tidemq_gateway_grpc_auto_renewals_total"
    acks = {"method": "AckMessage", "code": "OK"}
    with started(PushConsumer(config, "rmq-push-slow", listener,
                              {"RmqSlow": FilterExpression()})):
        with started(Producer(config, ("RmqSlow",))) as producer:
            producer.send(message("RmqSlow", b"slow"))
        wait_until(lambda: listener.attempts, 30, message="the slow message delivered")
        before = _metric(rmq_cluster, renewals)
        acked = _metric(rmq_cluster, "tidemq_gateway_grpc_requests_total", **acks)
        # three extensions of a 3 s invisible time: without them it was delivered again
        wait_until(lambda: _metric(rmq_cluster, renewals) >= before + 3, 30,
                   message="three auto-renewals")
        listener.release.set()
        wait_until(lambda: _metric(rmq_cluster, "tidemq_gateway_grpc_requests_total",
                                   **acks) > acked, 30, message="the ack (latest handle)")
    assert listener.attempts == [1]


def test_telemetry_answers_an_orderly_group_with_fifo(endpoint):
    def settings(group: str) -> service_pb2.TelemetryCommand:
        command = service_pb2.TelemetryCommand()
        command.settings.client_type = definition_pb2.PUSH_CONSUMER
        command.settings.subscription.group.name = group
        command.settings.subscription.subscriptions.add().topic.name = "RmqFifoPush"
        return command

    with grpc.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        answers = [next(iter(stub.Telemetry(iter([settings(group)]), timeout=10)))
                   for group in (FIFO_PUSH_GROUP, "rmq-undefined")]
    assert [a.settings.subscription.fifo for a in answers] == [True, False]
    assert answers[0].settings.backoff_policy.max_attempts == 17


def test_unknown_topic_and_malformed_offset_rpcs_get_their_codes(endpoint):
    with grpc.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        reply = stub.GetOffset(service_pb2.GetOffsetRequest(), timeout=5)
        unknown = stub.QueryRoute(service_pb2.QueryRouteRequest(
            topic=definition_pb2.Resource(name="NoSuchTopic")), timeout=10)
        pulled = list(stub.PullMessage(service_pb2.PullMessageRequest(), timeout=5))
    assert reply.status.code == definition_pb2.BAD_REQUEST
    assert "message_queue" in reply.status.message
    assert [p.status.code for p in pulled] == [definition_pb2.BAD_REQUEST]
    assert unknown.status.code == definition_pb2.TOPIC_NOT_FOUND, unknown.status


def test_the_pull_consumer_rpcs_read_from_an_offset_and_keep_the_groups_offsets(config,
                                                                                 endpoint):
    """The RocketMQ 5.x PullConsumer's RPCs (no installable client has one: the official
    proto's stubs): QueryOffset, PullMessage from an offset, UpdateOffset, GetOffset."""
    with started(Producer(config, ("RmqPull",))) as producer:
        for i in range(6):
            producer.send(message("RmqPull", f"p{i}".encode()))
    group = definition_pb2.Resource(name="rmq-puller")
    with grpc.insecure_channel(endpoint) as channel:
        stub = service_pb2_grpc.MessagingServiceStub(channel)
        queues = stub.QueryRoute(service_pb2.QueryRouteRequest(
            topic=definition_pb2.Resource(name="RmqPull")), timeout=10).message_queues
        bodies = []
        for queue in queues:
            def offset(policy, timestamp_s=0, queue=queue):
                reply = stub.QueryOffset(service_pb2.QueryOffsetRequest(
                    message_queue=queue, query_offset_policy=policy,
                    timestamp=Timestamp(seconds=timestamp_s)), timeout=10)
                assert reply.status.code == definition_pb2.OK, reply.status
                return reply.offset

            begin, end = offset(definition_pb2.BEGINNING), offset(definition_pb2.END)
            assert begin == 0 and offset(definition_pb2.TIMESTAMP, 4_000_000_000) == end
            replies = list(stub.PullMessage(service_pb2.PullMessageRequest(
                group=group, message_queue=queue, offset=0, batch_size=32,
                filter_expression=definition_pb2.FilterExpression(expression="*")),
                timeout=10))
            got = [r.message.body for r in replies if r.HasField("message")]
            assert len(got) == end and replies[-1].next_offset == end, replies
            bodies += got
            missing = stub.GetOffset(service_pb2.GetOffsetRequest(
                group=group, message_queue=queue), timeout=10)
            assert missing.status.code == definition_pb2.OFFSET_NOT_FOUND, missing.status
            updated = stub.UpdateOffset(service_pb2.UpdateOffsetRequest(
                group=group, message_queue=queue, offset=end), timeout=10)
            assert updated.status.code == definition_pb2.OK, updated.status
            kept = stub.GetOffset(service_pb2.GetOffsetRequest(
                group=group, message_queue=queue), timeout=10)
            assert (kept.status.code, kept.offset) == (definition_pb2.OK, end)
            idle = list(stub.PullMessage(service_pb2.PullMessageRequest(
                group=group, message_queue=queue, offset=end, batch_size=32), timeout=10))
            assert idle[0].status.code == definition_pb2.MESSAGE_NOT_FOUND
            assert idle[-1].next_offset == end
    assert sorted(bodies) == [f"p{i}".encode() for i in range(6)]


def test_an_ack_with_another_groups_receipt_handle_is_refused_and_acks_nothing(config):
    with started(Producer(config, ("RmqAckGroups",))) as producer:
        producer.send(message("RmqAckGroups", b"owned"))
    with simple_consumer(config, "rmq-owner", "RmqAckGroups") as owner, \
            simple_consumer(config, "rmq-stranger", "RmqAckGroups") as stranger:
        (popped,) = drain(owner, 1, ack=False)
        with pytest.raises(Exception, match="INVALID_RECEIPT_HANDLE|RECEIPT_HANDLE_NOT_FOUND"):
            stranger.ack(popped)
        owner.ack(popped)   # still the owner's to ack
