"""The broker channel's table: every BrokerService RPC, one row each, saying how it travels.

`hot` marks the calls made once per message or per small batch, where gRPC's per-call cost is
most of the cost (docs/wire-protocol.md, "Why"): they are framed on the wire protocol when it
can carry them, and need a number in `tidemq.common.wire.methods.BROKER_METHODS`. Every other
call stays on gRPC. `bulk` names a bytes field the channel sends without copying it into the
message (a send's batch of records). A new RPC gets a row here, a permission entry in
`tidemq.common.auth.permissions`, and, if hot, a wire number: `tests/unit/common/
test_broker_rpc_tables.py` fails until it has them (checklist: docs/wire-protocol.md).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class BrokerCall:
    name: str
    hot: bool = False  # once per message or small batch: on the wire when it can
    bulk: str = ""     # a bytes field carried as it is (never copied into the message)


BROKER_CALLS: dict[str, BrokerCall] = {call.name: call for call in (
    BrokerCall("Send", hot=True, bulk="records"),
    BrokerCall("Pull", hot=True),
    BrokerCall("Pop", hot=True),
    BrokerCall("Ack", hot=True),
    BrokerCall("ChangeInvisibleDuration", hot=True),
    BrokerCall("RecallMessage"),
    BrokerCall("GetQueueOffsets"),
    BrokerCall("SearchOffset"),
    BrokerCall("ViewMessage"),
    BrokerCall("QueryMessageByKey"),
    BrokerCall("GetBrokerInfo"),
    BrokerCall("CommitOffsets"),
    BrokerCall("QueryOffsets"),
    BrokerCall("ResetOffsets"),
    BrokerCall("DeleteOffsets"),
    BrokerCall("JoinGroup"),
    BrokerCall("SyncGroup"),
    BrokerCall("Heartbeat"),
    BrokerCall("LeaveGroup"),
    BrokerCall("DescribeGroup"),
    BrokerCall("ListGroups"),
    BrokerCall("GetSubscriptionGroups"),
    BrokerCall("GetAllConsumerOffsets"),
    BrokerCall("SendMessageBack"),
    BrokerCall("RedriveDeadLetter"),
    BrokerCall("LockQueues"),
    BrokerCall("UnlockQueues"),
    BrokerCall("EndTransaction"),
    BrokerCall("ProducerHeartbeat"),
    BrokerCall("TransactionChecks"),  # server-streaming: gRPC only (BrokerChannel.stream)
)}

GRPC_ONLY = BrokerCall("")  # what a name missing from the table is treated as
