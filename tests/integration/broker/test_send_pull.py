"""Real processes: topic in config-center → routes on both name servers → send → pull,
offsets, topic changes and group RPCs, all against one shared cluster (distinct topics)."""

from __future__ import annotations

import threading
import urllib.request

import pytest
from tidemq.common import record
from tidemq.common.errors import InvalidArgument, PayloadTooLarge, TideMQError, TopicNotExist
from tidemq.v1 import broker_pb2, common_pb2

from tests.integration.broker.conftest import broker_client, route_brokers, wait_route
from tests.support.cluster import held_pulls
from tests.support.processes import wait_until


def encode_batch(topic: str, count: int, *, tags: str = "", start: int = 0) -> list[bytes]:
    return [
        record.encode_message(record.OutgoingMessage(
            topic, f"body-{start + i}".encode() * 3, tags=tags, keys=[f"k{start + i}"],
            properties={"n": str(start + i)},
        ))[0]
        for i in range(count)
    ]


def send(client, topic: str, queue_id: int, records: list[bytes], count: int | None = None):
    return client.call("Send", broker_pb2.SendRequest(
        topic=topic, queue_id=queue_id, records=b"".join(records),
        record_count=len(records) if count is None else count))


def pull(client, topic, queue_id, offset, *, max_messages=100, suspend_ms=0, tags=""):
    return client.call("Pull", broker_pb2.PullRequest(
        consumer_group="g", topic=topic, queue_id=queue_id, queue_offset=offset,
        max_messages=max_messages, suspend_timeout_ms=suspend_ms, tag_expression=tags))


def same_message(sent: bytes, stored: bytes) -> bool:
    """Everything the producer wrote survives byte for byte (broker fields are stamped)."""
    return (sent[record.OFF_BORN_TIMESTAMP:record.OFF_STORE_TIMESTAMP]
            == stored[record.OFF_BORN_TIMESTAMP:record.OFF_STORE_TIMESTAMP]
            and sent[record.OFF_BODY_LEN:] == stored[record.OFF_BODY_LEN:]
            and sent[:record.OFF_CRC] == stored[:record.OFF_CRC])


def split_records(raw: bytes) -> list[bytes]:
    out, pos = [], 0
    for rec in record.iter_records(raw):
        out.append(raw[pos:pos + rec.total_size])
        pos += rec.total_size
    return out


def test_route_send_pull_roundtrip(shared_cluster):
    cluster = shared_cluster
    cluster.put_topic("orders", queues=4)
    broker = cluster.brokers[0]
    wait_route(cluster, "orders", {"broker-a"})
    for ns in cluster.name_servers:
        assert route_brokers(ns, "orders") == {"broker-a": {0: broker.addr}}
    client = broker_client(broker)

    batch = encode_batch("orders", 20)
    reply = send(client, "orders", 2, batch)
    assert reply.status == common_pb2.SEND_OK
    assert (reply.broker_name, reply.queue_id, reply.first_queue_offset) == ("broker-a", 2, 0)
    assert len(reply.physical_offsets) == 20 and len(reply.store_host) == 8
    second = encode_batch("orders", 5, start=20)
    reply2 = send(client, "orders", 2, second)
    assert reply2.first_queue_offset == 20
    batch += second

    wait_until(lambda: pull(client, "orders", 2, 24).status == broker_pb2.FOUND, 10,
               message="dispatch of the second batch")
    pulled, offset = [], 0
    while offset < 25:
        answer = pull(client, "orders", 2, offset, max_messages=7)
        assert answer.status == broker_pb2.FOUND
        pulled += list(record.iter_records(answer.records))
        assert answer.record_count == len(pulled) - offset
        offset = answer.next_begin_offset
    assert [r.queue_offset for r in pulled] == list(range(25))
    assert [r.physical_offset for r in pulled] == list(reply.physical_offsets) + list(
        reply2.physical_offsets)
    answer = pull(client, "orders", 2, 0, max_messages=100)
    assert all(same_message(s, p) for s, p in zip(batch, split_records(answer.records),
                                                    strict=True))
    assert pull(client, "orders", 2, 25).status == broker_pb2.NO_NEW_MSG

    viewed = client.call("ViewMessage", broker_pb2.ViewMessageRequest(
        physical_offset=reply.physical_offsets[3]))
    assert same_message(batch[3], viewed.record)
    offsets = client.call("GetQueueOffsets", broker_pb2.GetQueueOffsetsRequest(topic="orders"))
    assert [(q.queue_id, q.min_offset, q.max_offset) for q in offsets.queues] == [
        (0, 0, 0), (1, 0, 0), (2, 0, 25), (3, 0, 0)]
    found = client.call("QueryMessageByKey", broker_pb2.QueryMessageByKeyRequest(
        topic="orders", key="k7", max_results=5))
    assert [bytes(r.body) for r in record.iter_records(found.records)] == [b"body-7" * 3]
    info = client.call("GetBrokerInfo", broker_pb2.GetBrokerInfoRequest())
    assert info.broker_name == "broker-a" and [t.topic_name for t in info.topics] == ["orders"]
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics").read()
    assert b'tidemq_broker_messages_in_total{topic="orders"} 25.0' in metrics


def test_tag_filter(shared_cluster):
    cluster = shared_cluster
    cluster.put_topic("tagged", queues=1)
    client = broker_client(cluster.brokers[0])
    wait_route(cluster, "tagged", {"broker-a"})
    send(client, "tagged", 0, encode_batch("tagged", 3, tags="A")
         + encode_batch("tagged", 3, tags="B", start=3)
         + encode_batch("tagged", 3, tags="C", start=6))
    wait_until(lambda: pull(client, "tagged", 0, 8).status == broker_pb2.FOUND, 10,
               message="dispatch")
    answer = pull(client, "tagged", 0, 0, tags="A || C")
    assert [r.tags for r in record.iter_records(answer.records)] == ["A"] * 3 + ["C"] * 3
    answer = pull(client, "tagged", 0, 3, tags="Z", suspend_ms=0)
    assert answer.status == broker_pb2.NO_MATCHED_MSG and answer.next_begin_offset == 9


def test_long_poll_answered_when_message_arrives(shared_cluster):
    cluster = shared_cluster
    cluster.put_topic("lp", queues=2)
    broker = cluster.brokers[0]
    wait_route(cluster, "lp", {"broker-a"})
    client = broker_client(broker)
    answers = []
    # The hold (15 s) outlasts the test's own wait: FOUND can only come from the wake-up.
    waiter = threading.Thread(target=lambda: answers.append(
        pull(client, "lp", 1, 0, suspend_ms=15_000)))
    waiter.start()
    wait_until(lambda: held_pulls(broker) == 1, 10, message="the pull to be held")
    send(client, "lp", 1, encode_batch("lp", 1))
    waiter.join(timeout=12)
    assert not waiter.is_alive()
    assert answers[0].status == broker_pb2.FOUND and answers[0].record_count == 1, answers[0]
    assert held_pulls(broker) == 0
    # A pull with suspend 0 on an empty queue answers at once.
    assert pull(client, "lp", 0, 0).status == broker_pb2.NO_NEW_MSG
    # A hold longer than the caller's deadline ends before it: an answer, not DEADLINE_EXCEEDED.
    short = client.call("Pull", broker_pb2.PullRequest(
        consumer_group="g", topic="lp", queue_id=0, queue_offset=0, max_messages=1,
        suspend_timeout_ms=60_000), timeout=1.5)
    assert short.status == broker_pb2.NO_NEW_MSG
    # A caller that cancels its held pull frees the broker's worker at once, not after 60 s.
    call = client.stub.Pull.future(broker_pb2.PullRequest(
        consumer_group="g", topic="lp", queue_id=0, queue_offset=0, max_messages=1,
        suspend_timeout_ms=60_000), timeout=120)
    wait_until(lambda: held_pulls(broker) == 1, 10, message="the pull to be held")
    call.cancel()
    wait_until(lambda: held_pulls(broker) == 0, 10, message="the cancelled pull to be released")


def test_bad_input_gets_precise_errors(shared_cluster):
    cluster = shared_cluster
    cluster.put_topic("strict", queues=2)
    cluster.put_topic("readonly", queues=1, perm=2)
    broker = cluster.brokers[0]  # started with --max-message-size 2048
    wait_route(cluster, "strict", {"broker-a"})
    wait_route(cluster, "readonly", {"broker-a"})
    client = broker_client(broker)
    good = encode_batch("strict", 2)

    with pytest.raises(TopicNotExist) as err:
        send(client, "nope", 0, encode_batch("nope", 1))
    assert err.value.code == "TOPIC_NOT_EXIST"
    with pytest.raises(InvalidArgument, match="queue_id 2 is out of range"):
        send(client, "strict", 2, good)
    with pytest.raises(InvalidArgument, match="record_count is 3"):
        send(client, "strict", 0, good, count=3)
    with pytest.raises(InvalidArgument, match="bad magic"):
        send(client, "strict", 0, [b"\x00\x00\x00\x60" + b"garbage!" * 12])
    with pytest.raises(InvalidArgument, match="truncated|remain"):
        send(client, "strict", 0, [good[0][:50]])
    with pytest.raises(InvalidArgument, match="not for topic"):
        send(client, "strict", 0, encode_batch("other", 1))
    with pytest.raises(PayloadTooLarge) as err:
        send(client, "strict", 0, [record.encode("strict", b"x" * 4096)])
    assert err.value.code == "MESSAGE_TOO_LARGE"
    with pytest.raises(Exception) as err:
        send(client, "readonly", 0, encode_batch("readonly", 1))
    assert err.value.code == "NO_PERMISSION"
    with pytest.raises(InvalidArgument, match="at least one record"):
        send(client, "strict", 0, [])
    # Nothing above was stored: the queue is still empty, and a good batch starts at offset 0.
    assert send(client, "strict", 0, good).first_queue_offset == 0
    wait_until(lambda: pull(client, "strict", 0, 1).status == broker_pb2.FOUND, 10,
               message="dispatch")
    illegal = pull(client, "strict", 0, 99)
    assert illegal.status == broker_pb2.OFFSET_ILLEGAL and illegal.next_begin_offset == 2
    assert pull(client, "strict", 1, 5).status == broker_pb2.OFFSET_ILLEGAL
    with pytest.raises(TopicNotExist):
        pull(client, "nope", 0, 0)
    with pytest.raises(InvalidArgument, match="empty tag"):
        pull(client, "strict", 0, 0, tags="A ||")


def test_topic_update_and_delete_follow_config_center(shared_cluster):
    cluster = shared_cluster
    cluster.put_topic("evolving", queues=2)
    broker = cluster.brokers[0]
    wait_route(cluster, "evolving", {"broker-a"})
    client = broker_client(broker)
    cluster.put_topic("evolving", queues=8)
    wait_until(lambda: len(client.call("GetQueueOffsets", broker_pb2.GetQueueOffsetsRequest(
        topic="evolving")).queues) == 8, 20, message="queue count update")
    send(client, "evolving", 7, encode_batch("evolving", 1))
    cluster.put_topic("audit", queues=1)
    wait_route(cluster, "audit", {"broker-a"})
    cluster.delete_topic("evolving")
    wait_route(cluster, "evolving", set())
    with pytest.raises(TopicNotExist):
        send(client, "evolving", 0, encode_batch("evolving", 1))


def test_a_topic_created_again_starts_empty_and_goes_on_from_the_old_offsets(shared_cluster):
    """Deleting a topic puts its messages out of reach at once (not when retention gets to
    them), so the topic created again under its name shows only what is sent to it from then
    on; its queue offsets go on from the old end, which keeps committed offsets meaningful."""
    cluster = shared_cluster
    cluster.put_topic("reborn", queues=1)
    wait_route(cluster, "reborn", {"broker-a"})
    client = broker_client(cluster.brokers[0])
    send(client, "reborn", 0, encode_batch("reborn", 5))
    cluster.delete_topic("reborn")
    wait_route(cluster, "reborn", set())
    cluster.put_topic("reborn", queues=1)
    wait_route(cluster, "reborn", {"broker-a"})
    assert send(client, "reborn", 0, encode_batch("reborn", 2, start=100)).first_queue_offset == 5
    wait_until(lambda: pull(client, "reborn", 0, 6).status == broker_pb2.FOUND, 10,
               message="dispatch of the new messages")
    offsets = client.call("GetQueueOffsets", broker_pb2.GetQueueOffsetsRequest(topic="reborn"))
    assert [(q.min_offset, q.max_offset) for q in offsets.queues] == [(5, 7)]
    moved = pull(client, "reborn", 0, 0)  # a consumer from the old topic's start
    assert moved.status == broker_pb2.OFFSET_ILLEGAL and moved.next_begin_offset == 5
    answer = pull(client, "reborn", 0, 5)
    assert [bytes(r.body) for r in record.iter_records(answer.records)] == [
        b"body-100" * 3, b"body-101" * 3]
    found = client.call("QueryMessageByKey", broker_pb2.QueryMessageByKeyRequest(
        topic="reborn", key="k100", max_results=5))
    assert [bytes(r.body) for r in record.iter_records(found.records)] == [b"body-100" * 3]
    gone = client.call("QueryMessageByKey", broker_pb2.QueryMessageByKeyRequest(
        topic="reborn", key="k1", max_results=5))  # a key of a deleted message
    assert list(record.iter_records(gone.records)) == []


def test_reset_offsets_to_timestamp(shared_cluster):
    cluster = shared_cluster
    cluster.put_topic("resettable", queues=1)
    client = broker_client(cluster.brokers[0])
    wait_route(cluster, "resettable", {"broker-a"})
    send(client, "resettable", 0, encode_batch("resettable", 3))
    wait_until(lambda: pull(client, "resettable", 0, 2).status == broker_pb2.FOUND, 10,
               message="dispatch")
    reset = client.call("ResetOffsets", broker_pb2.ResetOffsetsRequest(
        consumer_group="g2", topic="resettable", timestamp_ms=0))
    assert [(o.queue_id, o.offset) for o in reset.offsets] == [(0, 0)]
    reset = client.call("ResetOffsets", broker_pb2.ResetOffsetsRequest(
        consumer_group="g2", topic="resettable", timestamp_ms=2**62))
    assert [(o.queue_id, o.offset) for o in reset.offsets] == [(0, 3)]
    stored = client.call("QueryOffsets", broker_pb2.QueryOffsetsRequest(consumer_group="g2",
                                                                        topic="resettable"))
    assert [(o.queue_id, o.offset) for o in stored.offsets] == [(0, 3)]


def join(client, member_id="", client_id="c"):
    return client.call("JoinGroup", broker_pb2.JoinGroupRequest(
        group_id="g", member_id=member_id, session_timeout_ms=10_000, client_id=client_id,
        protocols=[broker_pb2.GroupProtocol(name="averagely", metadata=b'{"topics":["t"]}')]))


def test_join_sync_heartbeat_leave(shared_cluster):
    client = broker_client(shared_cluster.brokers[0])
    answers = {}
    threads = [threading.Thread(target=lambda n=n: answers.__setitem__(n, join(client, client_id=n)))
               for n in ("c1", "c2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(answers) == 2
    generations = {a.generation_id for a in answers.values()}
    leaders = {a.leader_id for a in answers.values()}
    assert len(generations) == 1 and len(leaders) == 1
    leader = next(a for a in answers.values() if a.member_id == a.leader_id)
    follower = next(a for a in answers.values() if a.member_id != a.leader_id)
    assert {m.member_id for m in leader.members} == {leader.member_id, follower.member_id}
    assert list(follower.members) == []  # the member list goes to the leader only

    generation = leader.generation_id
    synced = {}
    follower_sync = threading.Thread(target=lambda: synced.__setitem__("f", client.call(
        "SyncGroup", broker_pb2.SyncGroupRequest(group_id="g", generation_id=generation,
                                                  member_id=follower.member_id))))
    follower_sync.start()
    synced["l"] = client.call("SyncGroup", broker_pb2.SyncGroupRequest(
        group_id="g", generation_id=generation, member_id=leader.member_id, assignments=[
            broker_pb2.MemberAssignment(member_id=leader.member_id, assignment=b"L"),
            broker_pb2.MemberAssignment(member_id=follower.member_id, assignment=b"F")]))
    follower_sync.join(30)
    assert (synced["l"].assignment, synced["f"].assignment) == (b"L", b"F")

    client.call("Heartbeat", broker_pb2.HeartbeatRequest(
        group_id="g", generation_id=generation, member_id=follower.member_id))
    with pytest.raises(TideMQError) as err:
        client.call("Heartbeat", broker_pb2.HeartbeatRequest(
            group_id="g", generation_id=generation + 5, member_id=follower.member_id))
    assert err.value.code == "ILLEGAL_GENERATION"
    described = client.call("DescribeGroup", broker_pb2.DescribeGroupRequest(group_id="g"))
    assert described.state == "Stable" and len(described.members) == 2
    listed = client.call("ListGroups", broker_pb2.ListGroupsRequest())
    # the coordinator's group, as a push (joined) group; pull-only groups of the module's other
    # tests ("g2" committed offsets) are listed beside it
    joined = {g.group_id: g.consume_type for g in listed.groups
              if g.consume_type == broker_pb2.CONSUME_PUSH}
    assert joined == {"g": broker_pb2.CONSUME_PUSH}

    client.call("LeaveGroup", broker_pb2.LeaveGroupRequest(group_id="g",
                                                          member_id=follower.member_id))
    with pytest.raises(TideMQError) as err:
        client.call("Heartbeat", broker_pb2.HeartbeatRequest(
            group_id="g", generation_id=generation, member_id=leader.member_id))
    assert err.value.code == "REBALANCE_IN_PROGRESS"
    with pytest.raises(TideMQError) as err:
        join(client, member_id="nobody")
    assert err.value.code == "UNKNOWN_MEMBER_ID"
