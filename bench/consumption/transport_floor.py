"""The physical limits beside the pop figures, measured in the same run: how many empty calls
per second one client thread makes on loopback to a server process on uvloop (the broker's
stack), over unary gRPC (grpc.aio) and over the wire protocol (tidemq.common.wire: the same
server and client code the broker and the SDK run, with a handler that does nothing). A pop of
32 plus one batch ack is two such calls, so 16 x a rate bounds any pop + batch ack figure over
that transport, whatever the broker does.

    uv run --frozen python bench/consumption/transport_floor.py    # prints both rates
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
import time

import grpc


def _same(payload: bytes) -> bytes:
    return payload


def serve_grpc() -> None:
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


def serve_wire() -> None:
    import uvloop
    from tidemq.common.wire.methods import BROKER_METHODS
    from tidemq.common.wire.server import WireServer

    pop = BROKER_METHODS["Pop"]

    async def nothing(request, context):
        return pop.response()

    loop = uvloop.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    server = WireServer(loop, {pop.number: (pop, nothing)}, name="floor")
    print(server.start("127.0.0.1", 0), flush=True)
    threading.Event().wait()


def serve_process(script: str, flag: str) -> tuple[subprocess.Popen, int]:
    """A server script started with `flag` in a process of its own, and the port it prints."""
    server = subprocess.Popen([sys.executable, script, flag], stdout=subprocess.PIPE, text=True)
    return server, int(server.stdout.readline())


def _server(kind: str) -> tuple[subprocess.Popen, int]:
    return serve_process(__file__, f"--serve-{kind}")


def rate(call, calls: int) -> float:
    for _ in range(200):   # connection and code paths warm
        call()
    started = time.perf_counter()
    for _ in range(calls):
        call()
    return calls / (time.perf_counter() - started)


def unary_calls_per_s(calls: int = 3000) -> float:
    """Empty unary gRPC calls per second, one thread, to a server process of its own."""
    server, port = _server("grpc")
    try:
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            echo = channel.unary_unary("/Floor/Echo", _same, _same)
            return rate(lambda: echo(b"x" * 64), calls)
    finally:
        server.kill()
        server.wait()


def wire_calls_per_s(calls: int = 10_000) -> float:
    """Empty wire-protocol calls per second, one thread, to a server process of its own."""
    from tidemq.common.wire.client import WireConnection
    from tidemq.common.wire.methods import BROKER_METHODS

    pop = BROKER_METHODS["Pop"]
    server, port = _server("wire")
    connection = WireConnection(f"127.0.0.1:{port}")
    try:
        request = pop.request()
        return rate(lambda: connection.call(pop, request, 10), calls)
    finally:
        connection.close()
        server.kill()
        server.wait()


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve-grpc"]:
        serve_grpc()
    elif sys.argv[1:] == ["--serve-wire"]:
        serve_wire()
    else:
        print(f"{unary_calls_per_s():.0f} empty unary gRPC calls/s")
        print(f"{wire_calls_per_s():.0f} empty wire-protocol calls/s")
