"""The wire client's reading (frames split anyhow): against a stand-in server that answers
every request with a payload of any size, from a few bytes to over the read buffer, in one
stream cut into chunks of any sizes, every call gets its own answer whole, whether its caller
waits on it (`answer`) or holds the future."""

from __future__ import annotations

import socket
import threading

from hypothesis import given, settings
from hypothesis import strategies as st
from tidemq.common.wire import client as wire
from tidemq.common.wire import frames
from tidemq.common.wire.methods import BROKER_METHODS
from tidemq.v1 import broker_pb2

PULL = BROKER_METHODS["Pull"]


def serve(listener: socket.socket, sizes: list[int], cuts: list[int]) -> None:
    """Greet, read len(sizes) requests, then answer them all as one stream cut at `cuts`."""
    conn, _ = listener.accept()
    with conn:
        assert conn.recv(len(frames.HELLO), socket.MSG_WAITALL) == frames.HELLO
        conn.sendall(frames.greeting("stand-in"))
        stream = b""
        for size in sizes:
            (length,) = frames.LENGTH.unpack(conn.recv(4, socket.MSG_WAITALL))
            body = conn.recv(length, socket.MSG_WAITALL)
            request_id = frames.REQUEST_HEAD.unpack_from(body)[0]
            reply = broker_pb2.PullResponse(records=bytes([request_id % 251]) * size)
            stream += frames.ok(request_id, reply.SerializeToString())
        at = 0
        for cut in [*cuts, len(stream)]:
            conn.sendall(stream[at:max(at, min(cut, len(stream)))])
            at = max(at, min(cut, len(stream)))
        conn.recv(1)  # until the client closes


@settings(max_examples=25, deadline=None)
@given(st.lists(st.one_of(st.integers(0, 300), st.integers(60_000, 300_000)), min_size=1,
                max_size=6),
       st.lists(st.integers(1, 700_000), max_size=8).map(sorted), st.booleans())
def test_answers_cut_anyhow_reach_their_calls_whole(sizes, cuts, waited):
    listener = socket.create_server(("127.0.0.1", 0))
    server = threading.Thread(target=serve, args=(listener, sizes, cuts), daemon=True)
    server.start()
    connection = wire.WireConnection(f"127.0.0.1:{listener.getsockname()[1]}")
    try:
        request = broker_pb2.PullRequest(consumer_group="g", topic="t")
        calls = [connection.start(PULL, request, 30) for _ in sizes]
        for call, size in zip(calls, sizes, strict=True):
            answer = call.answer(30) if waited else call.result(30)
            assert answer.records == bytes([call.request_id % 251]) * size
        assert connection.alive
    finally:
        connection.close()
        server.join(10)
        listener.close()
