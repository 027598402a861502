"""Bad input never crashes gateway-kafka: random, truncated, oversized and negative frames close
the connection (and are counted); the listener keeps answering (hypothesis, seeds printed)."""

from __future__ import annotations

import socket
import struct

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import ApiVersionsRequest

pytestmark = pytest.mark.slow


def _api_versions_frame(version: int = 0, correlation_id: int = 1) -> bytes:
    request = ApiVersionsRequest[version]()
    request.with_header(correlation_id=correlation_id, client_id="fuzz")
    return bytes(request.encode(header=True, framed=True))


def _exchange(addr: str, payload: bytes, timeout: float = 5.0) -> bytes:
    """What the gateway sends back before closing (or b"" once it closed without a word)."""
    host, port = addr.split(":")
    with socket.create_connection((host, int(port)), timeout=timeout) as sock:
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
        return b"".join(chunks)


def _still_answers(addr: str) -> None:
    answer = _exchange(addr, _api_versions_frame(correlation_id=99))
    size, correlation_id, error_code = struct.unpack_from(">iih", answer)
    assert (size, correlation_id, error_code) == (len(answer) - 4, 99, 0)


@settings(max_examples=150, deadline=None, print_blob=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_random_bytes_never_crash_the_gateway(bootstrap, noise):
    _exchange(bootstrap, noise)


@settings(max_examples=120, deadline=None, print_blob=True,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_mangled_requests_never_crash_the_gateway(bootstrap, data):
    """A valid request with its body cut, bytes flipped, or its api key / version changed."""
    frame = bytearray(_api_versions_frame(data.draw(st.integers(0, 3))))
    frame[4:6] = struct.pack(">h", data.draw(st.sampled_from([0, 1, 2, 3, 8, 9, 11, 18, 19, 22,
                                                              32, 68, 76, 1000, -1])))
    for _ in range(data.draw(st.integers(0, 4))):
        index = data.draw(st.integers(4, len(frame) - 1))
        frame[index] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(frame)))
    _exchange(bootstrap, bytes(frame[:cut]) + data.draw(st.binary(max_size=64)))


@pytest.mark.parametrize("size", [-1, -2 ** 31, 2 ** 31 - 1, 3, 0])
def test_bad_sizes_close_the_connection_and_are_counted(kafka_cluster, bootstrap, size):
    assert _exchange(bootstrap, struct.pack(">i", size) + b"x" * 16) == b""
    metrics = requests.get(f"http://127.0.0.1:"
                           f"{kafka_cluster.extra['gateway_kafka'].metrics_port}/metrics",
                           timeout=5).text
    assert "tidemq_gateway_kafka_bad_frames_total" in metrics


def test_truncated_frame_closes_the_connection(bootstrap):
    frame = _api_versions_frame()
    assert _exchange(bootstrap, frame[:-3]) == b""


def test_unknown_api_versions_version_gets_unsupported_version_in_v0(bootstrap):
    frame = bytearray(_api_versions_frame(3))
    frame[6:8] = struct.pack(">h", 9)   # a version beyond any Kafka's
    answer = _exchange(bootstrap, bytes(frame))
    _, _, error_code = struct.unpack_from(">iih", answer)
    assert error_code == 35   # UNSUPPORTED_VERSION, with the versions served in v0 format


def test_gateway_survives_the_fuzzing(bootstrap):
    _still_answers(bootstrap)
