"""The same-run floor beside the official client's figures: how many empty unary calls per
second a bare Python gRPC server answers to a client with one call in flight (the official
client's concurrency for a sync send and for an ack each). The server is a separate process
built as gateway-grpc's is (`grpc.server` on a ThreadPoolExecutor of 256 threads, the
services' SERVER_GRPC_OPTIONS) with nothing else: no interceptor, no tracing, a handler that
returns its request. Two clients drive it:

* `sync`: a blocking `grpc` channel on the calling thread (the stricter floor, the target's);
* `aio-threadsafe`: the official client's own stack — a `grpc.aio` channel on an event loop
  thread, each call handed over from the caller's thread with `run_coroutine_threadsafe`
  (rocketmq/v5/client/connection/rpc_client.py).

    uv run --frozen python bench/rocketmq_compat/floor.py    # prints both rates
"""

from __future__ import annotations

import asyncio
import sys
import threading
from concurrent import futures
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # repo root: bench

from bench.consumption.transport_floor import _same, rate, serve_process  # noqa: E402

GATEWAY_WORKERS = 256   # gateway-grpc's max_workers default (settings.py)
PAYLOAD = b"x" * 64


def serve() -> None:
    from tidemq.common.rpc import SERVER_GRPC_OPTIONS

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=GATEWAY_WORKERS),
                         options=SERVER_GRPC_OPTIONS)
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        "Floor", {"Echo": grpc.unary_unary_rpc_method_handler(
            lambda request, context: request, _same, _same)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()


class ServerProcess:
    """A bench server script (run with `--serve`) in a process of its own, for a `with`."""

    def __init__(self, script: str) -> None:
        self.script = script

    def __enter__(self):
        self.process, port = serve_process(self.script, "--serve")
        self.addr = f"127.0.0.1:{port}"
        return self

    def __exit__(self, *exc) -> None:
        self.process.kill()
        self.process.wait()


class FloorServer(ServerProcess):
    """The bare server in a process of its own (started once, measured several times)."""

    def __init__(self) -> None:
        super().__init__(__file__)

    def sync_rate(self, calls: int) -> float:
        with grpc.insecure_channel(self.addr) as channel:
            echo = channel.unary_unary("/Floor/Echo", _same, _same)
            return rate(lambda: echo(PAYLOAD, timeout=10), calls)

    def aio_threadsafe_rate(self, calls: int) -> float:
        loop = asyncio.new_event_loop()
        thread = threading.Thread(target=loop.run_forever, daemon=True)
        thread.start()

        async def open_channel():
            return grpc.aio.insecure_channel(self.addr)

        channel = asyncio.run_coroutine_threadsafe(open_channel(), loop).result()
        echo = channel.unary_unary("/Floor/Echo", _same, _same)

        async def one() -> bytes:
            return await echo(PAYLOAD, timeout=10)
        try:
            return rate(lambda: asyncio.run_coroutine_threadsafe(one(), loop).result(), calls)
        finally:
            asyncio.run_coroutine_threadsafe(channel.close(), loop).result()
            loop.call_soon_threadsafe(loop.stop)
            thread.join(5)
            loop.close()


if __name__ == "__main__":
    if sys.argv[1:] == ["--serve"]:
        serve()
    else:
        with FloorServer() as floor:
            print(f"{floor.sync_rate(3000):.0f} empty unary calls/s (sync client, 1 in flight)")
            print(f"{floor.aio_threadsafe_rate(3000):.0f} empty unary calls/s (grpc.aio on a "
                  "loop thread, 1 in flight: the official client's stack)")
