"""A frozen master (SIGSTOP: a hung process, a stalled VM) is replaced before its lease expires.

The brokers run with a 60 s lease, far longer than any wait here, so a new master within these
waits can only come from the controller's failure detection (docs/replication.md, "Detecting
a failed master"): the master's renewals stopped, its health checks time out and its slaves
hear nothing. What must hold: no acknowledged message is lost, and the frozen master, when it
resumes with a send queued in its socket, does not acknowledge it at its old epoch.
"""

from __future__ import annotations

import os
import signal
import threading

from tidemq.client import SendStatus
from tidemq.common import errors, record
from tidemq.common.rpc import RpcClient
from tidemq.v1 import broker_pb2, broker_pb2_grpc, common_pb2

from tests.integration.replication.replica_group import (
    TOPIC,
    broker_call,
    group_state,
    start_group,
    wait_in_sync,
)
from tests.integration.replication.test_failover import SendLoop, consumer_decode
from tests.support.processes import wait_until

LONG_LEASE = ["--broker-lease-ttl-s", "60"]
BEFORE_LEASE_S = 30  # every wait for the new master ends well before the lease would


def test_a_frozen_master_is_replaced_before_its_lease_expires_losing_nothing(cluster):
    group = start_group(cluster, extra=LONG_LEASE)
    wait_in_sync(cluster, {0, 1, 2})
    old = group.wait_master()
    epoch = group_state(cluster)["epoch"]
    sender = SendLoop(cluster.namesrv_addrs).start()
    try:
        wait_until(lambda: len(sender.acks) >= 30, 60, message="30 acks before the freeze")
        os.kill(group.replicas[old].pid, signal.SIGSTOP)
        try:
            alive = tuple(r for r in range(3) if r != old)
            new = group.wait_master(alive, timeout=BEFORE_LEASE_S)
            frozen_acks = len(sender.acks)
            wait_until(lambda: len(sender.acks) >= frozen_acks + 30, 60,
                       message="the producer continues on the new master")
        finally:
            os.kill(group.replicas[old].pid, signal.SIGCONT)
    finally:
        sender.stop()
    assert group_state(cluster)["epoch"] > epoch
    acked = [(n, r) for n, r in sender.acks if r.status is SendStatus.SEND_OK]
    for number, result in acked:
        reply = broker_call(group.replicas[new].addr, "Pull", broker_pb2.PullRequest(
            consumer_group="check", topic=TOPIC, queue_id=result.queue_id,
            queue_offset=result.queue_offset, max_messages=1))
        assert reply.status == broker_pb2.FOUND, (number, result)
        assert consumer_decode(reply.records).body == f"msg-{number}".encode()
    wait_until(lambda: (info := group.broker_info(old)) is not None and info.role == "SLAVE"
               and info.epoch == group.broker_info(new).epoch, 60,
               message="the resumed master follows the new one")


def test_a_resumed_master_does_not_acknowledge_at_its_old_epoch(cluster):
    """ASYNC_MASTER: no slave has to confirm anything, so only the master's own fence (its
    renewals stopped; checked on the monotonic clock before appending and before answering)
    keeps the send queued during the freeze from being acknowledged at the old epoch."""
    group = start_group(cluster, broker_role="ASYNC_MASTER", min_in_sync=1, extra=LONG_LEASE)
    wait_in_sync(cluster, {0, 1, 2})
    old = group.wait_master()
    direct = RpcClient(group.replicas[old].addr, broker_pb2_grpc.BrokerServiceStub, timeout=120,
                       retries=0)
    direct.call("GetBrokerInfo", broker_pb2.GetBrokerInfoRequest())  # the channel is ready
    payload = record.encode_message(record.OutgoingMessage(TOPIC, b"queued-while-frozen"))[0]
    outcome: list[object] = []

    def send_queued() -> None:
        try:
            outcome.append(direct.call("Send", broker_pb2.SendRequest(
                topic=TOPIC, queue_id=0, records=payload, record_count=1)))
        except errors.TideMQError as exc:
            outcome.append(exc)

    os.kill(group.replicas[old].pid, signal.SIGSTOP)
    sending = threading.Thread(target=send_queued, daemon=True)
    try:
        sending.start()
        alive = tuple(r for r in range(3) if r != old)
        new = group.wait_master(alive, timeout=BEFORE_LEASE_S)
    finally:
        os.kill(group.replicas[old].pid, signal.SIGCONT)
    sending.join(130)
    assert outcome, "the queued send was never answered"
    answer = outcome[0]
    if not isinstance(answer, errors.TideMQError):
        assert answer.status != common_pb2.SEND_OK, \
            f"the resumed master acknowledged a send at its old epoch: {answer}"
    else:
        assert isinstance(answer, errors.PreconditionFailed) and answer.code == "NOT_MASTER", \
            answer
    wait_until(lambda: (info := group.broker_info(old)) is not None and info.role == "SLAVE"
               and info.epoch == group.broker_info(new).epoch, 60,
               message="the resumed master follows the new one")
