"""The read fence on a SYNC_MASTER group (docs/replication.md "What consumers can see"): a
record the in-sync slaves do not all hold is not served — not by pull, pop, the HTTP gateway,
its msg-id lookup or the queue's max offset — until they do; then it is served exactly once,
and a pull held meanwhile is answered by the confirmation itself. Without the fence, a
failover at that moment would take back what a consumer already saw."""

from __future__ import annotations

import json
import os
import signal
import threading
import urllib.error
import urllib.request

from tidemq.client import PullConsumer
from tidemq.client.message import MessageQueue
from tidemq.common import errors, record
from tidemq.v1 import broker_pb2, common_pb2

from tests.integration.replication.replica_group import (
    GROUP,
    TOPIC,
    broker_call,
    start_group,
    wait_in_sync,
)
from tests.support.cluster import held_pulls
from tests.support.processes import freeze, wait_until


def send(addr: str, body: bytes) -> tuple[str, str]:
    """The send's outcome (its status, or its error code) and the record's offset msg id."""
    payload = record.encode_message(record.OutgoingMessage(TOPIC, body))[0]
    try:
        answer = broker_call(addr, "Send", broker_pb2.SendRequest(
            topic=TOPIC, queue_id=0, records=payload, record_count=1))
    except errors.TideMQError as exc:
        return exc.code, ""
    return (common_pb2.SendStatus.Name(answer.status),
            record.offset_msg_id(answer.store_host, answer.physical_offsets[0]))


def http_get(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as refused:
        return refused.code, json.loads(refused.read() or b"{}")


def gateway_bodies(cluster, offset: int) -> tuple[list[str], int]:
    status, answer = http_get(f"{cluster.gateway_url}/v1/topics/{TOPIC}/queues/{GROUP}/0/"
                              f"messages?offset={offset}")
    assert status == 200, answer
    return [m["body"] for m in answer["messages"]], answer["max_offset"]


def pop_bodies(addr: str) -> list[bytes]:
    answer = broker_call(addr, "Pop", broker_pb2.PopRequest(
        consumer_group="popper", topic=TOPIC, max_messages=32, invisible_duration_ms=60_000,
        wait_ms=0, tag_expression="*"))
    return [message.body for message in record.iter_records(answer.records)] \
        if answer.record_count else []


def test_an_unconfirmed_record_is_invisible_until_the_in_sync_slaves_hold_it(cluster):
    # A long lag limit keeps the frozen slaves in the in-sync set (its shrinking has its tests);
    # a long hold limit means a held pull can only be answered early by the confirmation.
    group = start_group(cluster, extra=["--sync-replication-timeout-ms", "1000",
                                        "--replica-lag-max-ms", "120000",
                                        "--long-poll-max-ms", "300000"])
    wait_in_sync(cluster, {0, 1, 2})
    master = group.wait_master()
    broker = group.replicas[master]
    slaves = [r for r in range(3) if r != master]
    mq = MessageQueue(TOPIC, GROUP, 0)
    with PullConsumer(cluster.namesrv_addrs, consumer_group="fenced", timeout=5) as consumer, \
            PullConsumer(cluster.namesrv_addrs, consumer_group="held", timeout=5) as holder:
        assert send(broker.addr, b"confirmed")[0] == "SEND_OK"
        cluster.start_gateway(workers=1)
        wait_until(lambda: gateway_bodies(cluster, 0) == (["confirmed"], 1), 30,
                   message="the HTTP gateway serves the confirmed record")
        assert [m.body for m in consumer.pull(mq, 0).messages] == [b"confirmed"]
        wait_until(lambda: pop_bodies(broker.addr) == [b"confirmed"], 10,
                   message="pop serves the confirmed record")
        for replica in slaves:
            freeze(group.replicas[replica].pid)  # stopped before the send
        held: list = []
        try:
            outcome, msg_id = send(broker.addr, b"unconfirmed")
            assert outcome == "FLUSH_SLAVE_TIMEOUT"
            pulled = consumer.pull(mq, 1)
            assert pulled.messages == [] and pulled.max_offset == 1
            assert consumer.queue_offsets(TOPIC, GROUP)[0] == (0, 1)
            assert pop_bodies(broker.addr) == []
            assert gateway_bodies(cluster, 1) == ([], 1)
            assert http_get(f"{cluster.gateway_url}/v1/messages/{msg_id}")[0] == 404
            waiting = threading.Thread(target=lambda: held.append(
                holder.pull(mq, 1, long_poll=300)), daemon=True)
            waiting.start()
            wait_until(lambda: held_pulls(broker) >= 1, 10, message="the pull to be held")
            assert not held
        finally:
            for replica in slaves:
                os.kill(group.replicas[replica].pid, signal.SIGCONT)
        waiting.join(60)   # not the hold's end (300 s): woken by the confirmed offset
        assert not waiting.is_alive(), "the held pull was not woken by the confirmation"
        assert [m.body for m in held[0].messages] == [b"unconfirmed"]
        pulled = consumer.pull(mq, 1)
        assert [m.body for m in pulled.messages] == [b"unconfirmed"] and pulled.max_offset == 2
        assert consumer.pull(mq, 2).messages == []
        assert consumer.queue_offsets(TOPIC, GROUP)[0] == (0, 2)
        assert pop_bodies(broker.addr) == [b"unconfirmed"]
        assert pop_bodies(broker.addr) == []
        assert gateway_bodies(cluster, 1) == (["unconfirmed"], 2)
        status, found = http_get(f"{cluster.gateway_url}/v1/messages/{msg_id}")
        assert status == 200 and found["body"] == "unconfirmed", found


def slave_pull(addr: str, offset: int) -> tuple[list[bytes], int]:
    """A pull answered by this replica itself (bodies, the queue's max offset it reports)."""
    answer = broker_call(addr, "Pull", broker_pb2.PullRequest(
        consumer_group="slave-reader", topic=TOPIC, queue_id=0, queue_offset=offset,
        max_messages=32))
    return ([message.body for message in record.iter_records(answer.records)]
            if answer.record_count else []), answer.max_offset


def slave_pull_once_served(addr: str, offset: int) -> tuple[list[bytes], int] | None:
    """`slave_pull`, or None while the replica has not yet learned the topic from the config
    center (a slave can be in sync before its topic watch has delivered the definition)."""
    try:
        return slave_pull(addr, offset)
    except errors.TopicNotExist:
        return None


def test_a_slave_holding_an_unconfirmed_record_does_not_serve_it_until_confirmed(cluster):
    """One slave frozen (kept in the in-sync set by a long lag limit): the other holds the
    new record, but it is not confirmed, so that slave — where consumers read when the master
    is down or far behind — serves it only once the master's confirmed offset covers it."""
    group = start_group(cluster, extra=["--sync-replication-timeout-ms", "1000",
                                        "--replica-lag-max-ms", "120000"])
    wait_in_sync(cluster, {0, 1, 2})
    master = group.wait_master()
    broker = group.replicas[master]
    frozen, reader = (group.replicas[r] for r in range(3) if r != master)
    assert send(broker.addr, b"confirmed")[0] == "SEND_OK"
    wait_until(lambda: slave_pull_once_served(reader.addr, 0) == ([b"confirmed"], 1), 30,
               message="the slave to serve the confirmed record")
    freeze(frozen.pid)  # stopped before the send
    try:
        assert send(broker.addr, b"unconfirmed")[0] == "FLUSH_SLAVE_TIMEOUT"
        master_end = broker_call(broker.addr, "GetBrokerInfo",
                                 broker_pb2.GetBrokerInfoRequest()).commitlog_max_offset
        wait_until(lambda: broker_call(reader.addr, "GetBrokerInfo",
                                       broker_pb2.GetBrokerInfoRequest()
                                       ).commitlog_max_offset == master_end, 30,
                   message="the running slave to hold the unconfirmed record")
        assert slave_pull(reader.addr, 1) == ([], 1)
        assert slave_pull(reader.addr, 0) == ([b"confirmed"], 1)
    finally:
        os.kill(frozen.pid, signal.SIGCONT)
    wait_until(lambda: slave_pull(reader.addr, 1) == ([b"unconfirmed"], 2), 30,
               message="the slave to serve the record once confirmed")
