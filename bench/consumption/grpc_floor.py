"""The physical limit beside the pop figures: how many empty unary gRPC calls per second one
client thread makes on loopback to a grpc.aio server on uvloop (the broker's stack), measured
in the same run. A pop of 32 plus one batch ack is two such calls, so 16 x this rate bounds
any pop + batch ack figure over this stack, whatever the broker does.

    uv run --frozen python bench/consumption/grpc_floor.py        # prints calls/s
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

import grpc


def _same(payload: bytes) -> bytes:
    return payload


def serve() -> None:
    import uvloop

    async def echo(request: bytes, context) -> bytes:
        return request

    async def main() -> None:
        server = grpc.aio.server()
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
            "Floor", {"Echo": grpc.unary_unary_rpc_method_handler(echo, _same, _same)}),))
        port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        print(port, flush=True)
        await server.wait_for_termination()

    uvloop.install()
    asyncio.run(main())


def unary_calls_per_s(calls: int = 3000) -> float:
    """Empty unary calls per second, one thread, to a server process of its own."""
    server = subprocess.Popen([sys.executable, __file__, "--serve"], stdout=subprocess.PIPE,
                              text=True)
    try:
        port = int(server.stdout.readline())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            echo = channel.unary_unary("/Floor/Echo", _same, _same)
            for _ in range(200):   # connection and code paths warm
                echo(b"x" * 64)
            started = time.perf_counter()
            for _ in range(calls):
                echo(b"x" * 64)
            return calls / (time.perf_counter() - started)
    finally:
        server.kill()
        server.wait()


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        print(f"{unary_calls_per_s():.0f} empty unary gRPC calls/s")
