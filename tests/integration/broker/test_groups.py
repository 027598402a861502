"""Group coordination over real gRPC: two members join, the leader assigns, both sync."""

from __future__ import annotations

import threading

import pytest
from tidemq.common.errors import TideMQError
from tidemq.v1 import broker_pb2

from tests.integration.broker.conftest import broker_client


def join(client, member_id="", client_id="c"):
    return client.call("JoinGroup", broker_pb2.JoinGroupRequest(
        group_id="g", member_id=member_id, session_timeout_ms=10_000, client_id=client_id,
        protocols=[broker_pb2.GroupProtocol(name="averagely", metadata=b'{"topics":["t"]}')]))


def test_join_sync_heartbeat_leave(cluster):
    broker = cluster.start_broker("broker-a", "--group-initial-rebalance-delay-ms", "300")
    client = broker_client(broker)
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
    assert [g.group_id for g in listed.groups] == ["g"]

    client.call("LeaveGroup", broker_pb2.LeaveGroupRequest(group_id="g",
                                                          member_id=follower.member_id))
    with pytest.raises(TideMQError) as err:
        client.call("Heartbeat", broker_pb2.HeartbeatRequest(
            group_id="g", generation_id=generation, member_id=leader.member_id))
    assert err.value.code == "REBALANCE_IN_PROGRESS"
    with pytest.raises(TideMQError) as err:
        join(client, member_id="nobody")
    assert err.value.code == "UNKNOWN_MEMBER_ID"
