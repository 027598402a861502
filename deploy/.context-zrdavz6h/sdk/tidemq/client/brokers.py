"""One RpcClient per broker address, shared by producers and consumers of a process."""

from __future__ import annotations

import threading

from tidemq.common.rpc import BreakerSettings, RpcClient, is_endpoint_open
from tidemq.common.wire.endpoints import broker_endpoint
from tidemq.v1 import broker_pb2_grpc


class BrokerClients:
    def __init__(self, *, timeout: float = 3.0, breaker: BreakerSettings | None = None) -> None:
        self._timeout = timeout
        self._breaker = breaker
        self._lock = threading.Lock()
        self._clients: dict[str, RpcClient] = {}

    def get(self, addr: str) -> RpcClient:
        with self._lock:
            client = self._clients.get(addr)
            if client is None:
                client = RpcClient(addr, broker_pb2_grpc.BrokerServiceStub,
                                   timeout=self._timeout, breaker=self._breaker, retries=1,
                                   wire=broker_endpoint(addr))
                self._clients[addr] = client
            return client

    @staticmethod
    def is_open(addr: str) -> bool:
        """True while the breaker for `addr` is open: route traffic elsewhere."""
        return bool(addr) and is_endpoint_open(addr)
