"""Which wire port each broker offers, by its gRPC address.

Routes carry it: a broker registers its wire port (and whether it is TLS) with the name
servers, which publish it beside the broker's address in every route and in the cluster
info, so a client's first call to a broker needs no question first. A route from an older name
server has none: then the broker is asked over gRPC (GetBrokerInfo) the first time, as before.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

import grpc
from tidemq.common import errors, rpc
from tidemq.v1 import broker_pb2, broker_pb2_grpc


@dataclass(frozen=True)
class WirePort:
    port: int         # 0: none offered
    tls: bool = False  # the port serves TLS (a broker serving TLS on gRPC does on the wire)


_known: dict[str, WirePort] = {}
_lock = threading.Lock()


def learn(addr: str, port: int, tls: bool = False) -> None:
    with _lock:
        _known[addr] = WirePort(port, tls)


def learn_route(route: Any) -> None:
    """Remember the wire ports a TopicRouteData (or a ClusterInfo's broker table) names."""
    datas = getattr(route, "broker_datas", None)
    if datas is None:
        datas = route.broker_addr_table.values()
    for data in datas:
        for addr, offered in data.wire_ports.items():
            learn(addr, offered.port, offered.tls)


def forget(addr: str) -> None:
    """A port that failed: ask again (a broker restarted on other ports)."""
    with _lock:
        _known.pop(addr, None)


def known(addr: str) -> WirePort | None:
    return _known.get(addr)


def port_of(addr: str, timeout_s: float) -> WirePort:
    """The broker's wire port: from a route when one named it, else asked of the broker."""
    offered = _known.get(addr)
    if offered is None:
        offered = ask_broker(addr, timeout_s)
        learn(addr, offered.port, offered.tls)
    return offered


def ask_broker(addr: str, timeout_s: float) -> WirePort:
    """GetBrokerInfo over gRPC: for routes from name servers that do not carry wire ports."""
    stub = broker_pb2_grpc.BrokerServiceStub(rpc.default_pool.get(addr))
    try:
        info = stub.GetBrokerInfo(broker_pb2.GetBrokerInfoRequest(), timeout=timeout_s)
    except grpc.RpcError as exc:
        raise errors.from_rpc_error(exc) from None
    return WirePort(info.wire_port, info.wire_tls)


def forget_all() -> None:
    """Tests."""
    with _lock:
        _known.clear()
