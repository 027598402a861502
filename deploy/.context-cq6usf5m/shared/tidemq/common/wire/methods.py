"""The BrokerService methods the wire protocol carries: the calls made once per message or per
small batch, where gRPC's per-call cost is most of the cost. Every other method stays on gRPC.
A number, once given, is never reused for another method."""

from __future__ import annotations

from dataclasses import dataclass

from tidemq.v1 import broker_pb2

BROKER_SERVICE = "/tidemq.v1.BrokerService/"


@dataclass(frozen=True)
class Method:
    number: int
    name: str
    request: type
    response: type

    @property
    def full_name(self) -> str:
        """gRPC's name of the method (what the ACL's permission table is keyed by)."""
        return BROKER_SERVICE + self.name


BROKER_METHODS = {m.name: m for m in (
    Method(1, "Send", broker_pb2.SendRequest, broker_pb2.SendResponse),
    Method(2, "Pull", broker_pb2.PullRequest, broker_pb2.PullResponse),
    Method(3, "Pop", broker_pb2.PopRequest, broker_pb2.PopResponse),
    Method(4, "Ack", broker_pb2.AckRequest, broker_pb2.AckResponse),
    Method(5, "ChangeInvisibleDuration", broker_pb2.ChangeInvisibleDurationRequest,
           broker_pb2.ChangeInvisibleDurationResponse),
)}
BY_NUMBER = {m.number: m for m in BROKER_METHODS.values()}
