"""GroupRpc behind the real BrokerServicer on a real in-process gRPC server (loopback):
proto mapping, error codes in the `tidemq-code` trailer, deadlines, and unload on stop."""

from __future__ import annotations

import asyncio
import threading

import pytest
from tidemq.broker.coordinator import CoordinatorConfig, GroupCoordinator
from tidemq.broker.group_rpc import GroupRpc
from tidemq.client.group import DirectClient
from tidemq.common.errors import TideMQError
from tidemq.common.protocol import encode_subscription
from tidemq.v1 import broker_pb2

from tests.support.coordinator import coordinator_servers

PROTOCOLS = [broker_pb2.GroupProtocol(name="averagely", metadata=encode_subscription(["t"]))]


@pytest.fixture
def served():
    with coordinator_servers() as serve:
        def serve_client(initial_delay_ms: int):
            rpc, addr = serve(initial_delay_ms)
            return rpc, DirectClient(addr, timeout=20)
        yield serve_client


def join(client, group, member_id="", timeout=10.0):
    return client.call("JoinGroup", broker_pb2.JoinGroupRequest(
        group_id=group, member_id=member_id, session_timeout_ms=5000, client_id="c",
        client_software="kafka-python 3.0.12", protocols=PROTOCOLS), timeout=timeout)


def test_join_sync_describe_list_and_error_codes_over_grpc(served):
    _, client = served(0)
    joined = join(client, "g")
    assert joined.generation_id == 1 and joined.leader_id == joined.member_id
    assert [m.member_id for m in joined.members] == [joined.member_id]
    synced = client.call("SyncGroup", broker_pb2.SyncGroupRequest(
        group_id="g", member_id=joined.member_id, generation_id=1,
        assignments=[broker_pb2.MemberAssignment(member_id=joined.member_id,
                                                 assignment=b'{"queues":[]}')]))
    assert synced.assignment == b'{"queues":[]}'
    described = client.call("DescribeGroup", broker_pb2.DescribeGroupRequest(group_id="g"))
    assert described.state == "Stable" and described.members[0].client_id == "c"
    assert described.members[0].client_host  # filled from the peer address
    assert described.members[0].client_software == "kafka-python 3.0.12"
    assert [g.group_id for g in client.call("ListGroups", broker_pb2.ListGroupsRequest())
            .groups] == ["g"]
    for request, code in [
        (broker_pb2.HeartbeatRequest(group_id="g", member_id=joined.member_id, generation_id=0),
         "ILLEGAL_GENERATION"),
        (broker_pb2.HeartbeatRequest(group_id="g", member_id="x", generation_id=1),
         "UNKNOWN_MEMBER_ID"),
    ]:
        with pytest.raises(TideMQError) as raised:
            client.call("Heartbeat", request)
        assert raised.value.code == code
    with pytest.raises(TideMQError) as raised:
        client.call("JoinGroup", broker_pb2.JoinGroupRequest(group_id="", protocols=PROTOCOLS))
    assert raised.value.code == "INVALID_GROUP_ID"
    client.call("LeaveGroup", broker_pb2.LeaveGroupRequest(group_id="g",
                                                          member_id=joined.member_id))
    assert client.call("DescribeGroup", broker_pb2.DescribeGroupRequest(
        group_id="g")).state == "Empty"


def test_join_outliving_its_deadline_is_deadline_exceeded(served):
    _, client = served(60_000)  # the delayed join will not complete within the call
    with pytest.raises(TideMQError) as raised:
        join(client, "slow", timeout=0.3)
    assert raised.value.code in {"DEADLINE_EXCEEDED"}


def test_stop_answers_waiting_joins_with_not_coordinator(served):
    rpc, client = served(60_000)
    outcome: dict = {}

    def waiting_join():
        try:
            join(client, "parked", timeout=20)
        except TideMQError as exc:
            outcome["code"] = exc.code

    thread = threading.Thread(target=waiting_join)
    thread.start()
    from tests.support.processes import wait_until

    wait_until(lambda: rpc.coordinator.list_groups(), 10, message="the join to arrive")
    rpc.stop()
    thread.join(10)
    assert outcome.get("code") == "NOT_COORDINATOR"


class _Context:
    """Only what GroupRpc reads from a grpc.ServicerContext."""

    def time_remaining(self):
        return 0.05

    def peer(self):
        return "ipv4:127.0.0.1:5555"


def test_server_side_wait_is_bounded_by_the_calls_remaining_time():
    from tidemq.common.errors import DeadlineExceeded

    rpc = GroupRpc(GroupCoordinator(CoordinatorConfig(initial_rebalance_delay_ms=60_000)))
    with pytest.raises(DeadlineExceeded) as raised:
        asyncio.run(rpc.JoinGroup(broker_pb2.JoinGroupRequest(group_id="g", protocols=PROTOCOLS),
                                  _Context()))
    assert "deadline" in raised.value.message
    assert rpc.coordinator.describe_group("g").members[0].client_host == "127.0.0.1"
