"""A group coordinator alone behind the real BrokerServicer on an in-process gRPC server
(loopback, ephemeral port), for the coordinator's RPC tests and the client's member tests."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tidemq.broker.coordinator import CoordinatorConfig, GroupCoordinator
from tidemq.broker.group_rpc import GroupRpc
from tidemq.broker.servicer import BrokerServicer
from tidemq.common.server import ServiceRuntime
from tidemq.common.settings import ServiceSettings
from tidemq.v1 import broker_pb2_grpc


@contextmanager
def coordinator_servers(shutdown_grace_s: float = 0.5
                        ) -> Iterator[Callable[[int], tuple[GroupRpc, str]]]:
    """`serve(initial_rebalance_delay_ms) -> (rpc, address)`; every server stops on exit."""
    started: list[tuple[GroupRpc, ServiceRuntime]] = []

    def serve(initial_delay_ms: int) -> tuple[GroupRpc, str]:
        rpc = GroupRpc(GroupCoordinator(CoordinatorConfig(
            initial_rebalance_delay_ms=initial_delay_ms, min_session_timeout_ms=100)),
            tick_interval_ms=10).start()
        runtime = ServiceRuntime("coordinator-test", ServiceSettings(
            metrics_port=-1, shutdown_grace_s=shutdown_grace_s), tracing=False, aio=True)
        runtime.add(broker_pb2_grpc.add_BrokerServiceServicer_to_server,
                    BrokerServicer(None, None, None, rpc))
        runtime.start()
        started.append((rpc, runtime))
        return rpc, f"127.0.0.1:{runtime.port}"

    try:
        yield serve
    finally:
        for rpc, runtime in started:
            rpc.stop()
            runtime.stop()
