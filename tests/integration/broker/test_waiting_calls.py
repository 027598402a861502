"""Calls that wait cost the broker no thread (it serves on grpc.aio): concurrent SYNC_FLUSH
sends share group-commit fsyncs, and far more pulls or JoinGroups than worker threads can wait
while every other call is still answered. Real broker process, real gRPC."""

from __future__ import annotations

import re
import threading
import urllib.request

from tidemq.common.protocol import encode_subscription
from tidemq.v1 import broker_pb2, common_pb2

from tests.integration.broker.conftest import broker_client, wait_route
from tests.integration.broker.test_send_pull import encode_batch, pull, send
from tests.support.processes import wait_until


def metric(broker, name: str) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics").read()
    found = re.search(rf"^{name} (\S+)$", text.decode(), re.MULTILINE)
    assert found, f"{name} not exported"
    return float(found.group(1))


def test_concurrent_sync_flush_sends_share_fsyncs(cluster):
    cluster.put_topic("durable", queues=4)
    broker = cluster.start_broker("broker-s", "--flush-mode", "sync")
    wait_route(cluster, "durable", {"broker-s"})
    client = broker_client(broker)
    results: list[list] = [[] for _ in range(64)]

    def sender(n: int) -> None:
        for i in range(20):
            results[n].append(send(client, "durable", n % 4, encode_batch("durable", 1,
                                                                          start=n * 100 + i)))

    threads = [threading.Thread(target=sender, args=(n,)) for n in range(64)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
        assert not thread.is_alive(), "a sender never returned"
    replies = [reply for per_sender in results for reply in per_sender]
    assert len(replies) == 64 * 20
    assert {reply.status for reply in replies} == {common_pb2.SEND_OK}
    for queue_id in range(4):
        offsets = sorted(r.first_queue_offset for n in range(queue_id, 64, 4) for r in results[n])
        assert offsets == list(range(16 * 20)), f"queue {queue_id} offsets not contiguous"
    appends = metric(broker, "tidemq_broker_group_commit_appends_total")
    rounds = metric(broker, "tidemq_broker_group_commit_rounds_total")
    assert appends == 64 * 20
    assert rounds < appends, "concurrent sends never shared a group-commit fsync"


def test_more_held_pulls_than_worker_threads(cluster):
    cluster.put_topic("idle", queues=1)
    broker = cluster.start_broker("broker-p", "--worker-threads", "4")
    wait_route(cluster, "idle", {"broker-p"})
    client = broker_client(broker)
    request = broker_pb2.PullRequest(consumer_group="g", topic="idle", queue_id=0,
                                     queue_offset=0, max_messages=10, suspend_timeout_ms=30_000)
    held = [client.stub.Pull.future(request, timeout=60) for _ in range(200)]
    wait_until(lambda: metric(broker, "tidemq_broker_held_pulls") == 200, 30,
               message="200 held pulls")
    offsets = client.call("GetQueueOffsets", broker_pb2.GetQueueOffsetsRequest(topic="idle"),
                          timeout=10)   # a thread-pool RPC still answers
    assert [(q.queue_id, q.max_offset) for q in offsets.queues] == [(0, 0)]
    assert pull(client, "idle", 0, 0).status == broker_pb2.PullStatus.Value("NO_NEW_MSG")
    send(client, "idle", 0, encode_batch("idle", 3))
    answers = [future.result(30) for future in held]
    assert {a.status for a in answers} == {broker_pb2.PullStatus.Value("FOUND")}
    assert {a.record_count for a in answers} == {3}
    wait_until(lambda: metric(broker, "tidemq_broker_held_pulls") == 0, 10,
               message="no pull held after the arrival")


def test_more_pending_joins_than_worker_threads(cluster):
    cluster.put_topic("joined", queues=2)
    broker = cluster.start_broker("broker-j", "--worker-threads", "4",
                                  "--group-initial-rebalance-delay-ms", "60000")
    wait_route(cluster, "joined", {"broker-j"})
    client = broker_client(broker)
    protocols = [broker_pb2.GroupProtocol(name="averagely",
                                          metadata=encode_subscription(["joined"]))]
    pending = [client.stub.JoinGroup.future(broker_pb2.JoinGroupRequest(
        group_id="waiting", session_timeout_ms=30_000, client_id=f"c{n}", protocols=protocols),
        timeout=90) for n in range(8)]
    wait_until(lambda: len(client.call("DescribeGroup", broker_pb2.DescribeGroupRequest(
        group_id="waiting"), timeout=10).members) == 8, 30,
        message="8 members waiting in the rebalance's initial delay")
    offsets = client.call("GetQueueOffsets", broker_pb2.GetQueueOffsetsRequest(topic="joined"),
                          timeout=10)   # answered while 8 joins wait: they hold no thread
    assert [q.queue_id for q in offsets.queues] == [0, 1]
    assert not any(future.done() for future in pending)
    for future in pending:
        future.cancel()
