"""The official client's own ceiling, beside the floor: gateway-grpc's servicer (the same
MessagingServicer, interceptor-free threaded grpc.server of 256 threads) over a proxy that
answers at once, with no broker behind it — each SendMessage is OK, each ReceiveMessage hands
out 32 stored-looking messages, each AckMessage is OK. What the official client reaches
against it is what its own per-call work (message building, signing, its asyncio loop
thread, its metrics) plus one gRPC hop allow; gateway-grpc cannot do better than this.

    uv run --frozen python bench/rocketmq_compat/ceiling.py    # serves; prints its port
"""

from __future__ import annotations

import itertools
import sys
import time
from concurrent import futures
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: bench

from bench.rocketmq_compat.floor import GATEWAY_WORKERS, ServerProcess  # noqa: E402


class InstantProxy:
    """The MessagingProxy calls the official client's sends, receives and acks make."""

    def __init__(self) -> None:
        from tidemq.client.routes import QueueLayout

        self.layout = (QueueLayout("broker-a", 4, 4, 6),)
        self.offsets = itertools.count()

    def queues(self, topic):
        return self.layout

    def readable_brokers(self, topic):
        return ["broker-a"]

    def listen(self, topic) -> None:
        pass

    def subscription_group(self, group, topic):
        from tidemq.gatewaygrpc.proxy import SubscriptionGroup

        return SubscriptionGroup(False, 16)

    def send(self, message):
        from tidemq.client import SendResult, SendStatus

        offset = next(self.offsets)
        return SendResult(SendStatus.SEND_OK, f"{offset:032X}", f"U{offset:031X}", "broker-a",
                          0, offset)

    def receive(self, group, topic, broker_name, *, max_messages, **_):
        from tidemq.client import MessageExt
        from tidemq.gatewaygrpc.proxy import Received

        now = int(time.time() * 1000)
        out = []
        for _ in range(min(max_messages, 32)):
            offset = next(self.offsets)
            message = MessageExt(topic, b"x" * 256, "", [], {}, "broker-a", 0, offset,
                                 f"{offset:032X}", f"U{offset:031X}", now, now, 0, offset)
            out.append(Received(message, f"h{offset}.{offset:x}"))
        return out

    def ack_many(self, group, topic, receipts):
        return [None] * len(receipts)


def serve() -> None:
    from rocketmq.grpc_protocol import service_pb2_grpc
    from tidemq.common.rpc import SERVER_GRPC_OPTIONS
    from tidemq.gatewaygrpc.servicer import MessagingServicer
    from tidemq.gatewaygrpc.sessions import ClientSessions
    from tidemq.gatewaygrpc.telemetry import ServerSettings

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=GATEWAY_WORKERS),
                         options=SERVER_GRPC_OPTIONS)
    port = server.add_insecure_port("127.0.0.1:0")
    servicer = MessagingServicer(InstantProxy(), ClientSessions(),
                                 ServerSettings(4 << 20, 20, 32, 60_000),
                                 lambda: ("127.0.0.1", port))
    service_pb2_grpc.add_MessagingServiceServicer_to_server(servicer, server)
    server.start()
    print(port, flush=True)
    server.wait_for_termination()


class CeilingServer(ServerProcess):
    def __init__(self) -> None:
        super().__init__(__file__)


if __name__ == "__main__":
    serve()
