"""The process's wire endpoints, one per broker address and client security, each learning
its broker's wire port over gRPC (GetBrokerInfo) the first time it is needed."""

from __future__ import annotations

import threading
from typing import Any

import grpc
from tidemq.common import errors, rpc
from tidemq.common.wire.client import WireEndpoint
from tidemq.v1 import broker_pb2, broker_pb2_grpc

_endpoints: dict[tuple[str, Any], WireEndpoint] = {}
_endpoints_lock = threading.Lock()


def broker_endpoint(addr: str) -> WireEndpoint:
    """The process's WireEndpoint for the broker at `addr` (its gRPC address), with this
    process's client security (tidemq.common.rpc)."""
    security = rpc.client_security()
    key = (addr, security)
    with _endpoints_lock:
        endpoint = _endpoints.get(key)
        if endpoint is None:
            endpoint = _endpoints[key] = WireEndpoint(
                addr, lambda timeout_s: _offered_port(addr, timeout_s),
                credentials=security.credentials, tls=bool(security.ca_file))
        return endpoint


def _offered_port(addr: str, timeout_s: float) -> int:
    stub = broker_pb2_grpc.BrokerServiceStub(rpc.default_pool.get(addr))
    try:
        return stub.GetBrokerInfo(broker_pb2.GetBrokerInfoRequest(), timeout=timeout_s).wire_port
    except grpc.RpcError as exc:
        raise errors.from_rpc_error(exc) from None


def close_endpoints() -> None:
    """Close every wire connection of this process (tests; a process that forks)."""
    with _endpoints_lock:
        for endpoint in _endpoints.values():
            endpoint.close()
        _endpoints.clear()
