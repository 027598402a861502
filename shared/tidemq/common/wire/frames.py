"""The frames of the wire protocol.

A connection opens with `HELLO` from the client, which the server echoes followed by its name
(`length:u16` and the broker's advertised gRPC address): a client that dialled a gRPC port, or
a server of another version, fails there with a clear error, and a client whose port now belongs
to another broker (restarted on other ports) finds out before it sends anything. Then each side
sends frames, each `length:u32` followed by `length` bytes, big-endian:

    request:  request_id:u32  method:u8  metadata_count:u8  timeout_ms:u32
              metadata_count × (key_length:u8  value_length:u16  key  value)
              the request's protobuf message
    response: request_id:u32  status:u8 (0 = ok, 1 = error)
              ok: the response's protobuf message
              error: grpc_status:u8  code_length:u8  code  message (UTF-8)

Requests on one connection are independent: the server may answer them in any order (a long
poll answers after the send that woke it), so the client matches answers by request id. The
metadata are what gRPC would carry as call metadata (the request signature). A request of
method `CANCEL` (0, no payload, not answered) cancels the running call of its request id, as a
gRPC client's cancellation does: a caller that stops waiting ends the broker's long poll.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence

import grpc
from tidemq.common import errors

HELLO = b"TMQW\x01"  # magic + protocol version
MAX_FRAME = 64 * 1024 * 1024 + 4096  # gRPC's message limit here (rpc.GRPC_OPTIONS) + headers

NAME_LENGTH = struct.Struct(">H")
LENGTH = struct.Struct(">I")
REQUEST_HEAD = struct.Struct(">IBBI")
RESPONSE_HEAD = struct.Struct(">IB")
META_HEAD = struct.Struct(">BH")
ERROR_HEAD = struct.Struct(">BB")
OK, ERROR = 0, 1
CANCEL = 0  # the method number of a cancellation

_STATUS_BY_NUMBER = {status.value[0]: status for status in grpc.StatusCode}


class FrameError(Exception):
    """Bytes that are not a frame of this protocol: the connection cannot continue."""


def greeting(name: str) -> bytes:
    encoded = name.encode()
    return HELLO + NAME_LENGTH.pack(len(encoded)) + encoded


def request_head(request_id: int, method: int, timeout_ms: int,
                 metadata: Sequence[tuple[str, str]], payload_length: int) -> bytes:
    """A request frame up to its payload: the payload is sent after it as it is (a batch of
    records is not copied into the frame)."""
    parts = [b"", REQUEST_HEAD.pack(request_id, method, len(metadata), timeout_ms)]
    for key, value in metadata:
        k, v = key.encode(), value.encode()
        parts += (META_HEAD.pack(len(k), len(v)), k, v)
    parts[0] = LENGTH.pack(sum(len(part) for part in parts) + payload_length)
    return b"".join(parts)


def request(request_id: int, method: int, timeout_ms: int,
            metadata: Sequence[tuple[str, str]], payload: bytes) -> bytes:
    return request_head(request_id, method, timeout_ms, metadata, len(payload)) + payload


def parse_request(body: bytes) -> tuple[int, int, int, list[tuple[str, str]], memoryview]:
    """(request id, method, timeout ms, metadata, payload) of a request frame's body; the
    payload is a view into `body`, not a copy."""
    try:
        request_id, method, count, timeout_ms = REQUEST_HEAD.unpack_from(body)
        offset = REQUEST_HEAD.size
        metadata = []
        for _ in range(count):
            key_length, value_length = META_HEAD.unpack_from(body, offset)
            offset += META_HEAD.size
            key = body[offset:offset + key_length].decode()
            offset += key_length
            value = body[offset:offset + value_length].decode()
            offset += value_length
            metadata.append((key, value))
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"malformed request frame: {exc}") from None
    if offset > len(body):
        raise FrameError("malformed request frame: metadata run past its end")
    return request_id, method, timeout_ms, metadata, memoryview(body)[offset:]


def ok_head(request_id: int, payload_length: int) -> bytes:
    """An answer frame up to its payload (which is written after it as it is)."""
    return LENGTH.pack(RESPONSE_HEAD.size + payload_length) + RESPONSE_HEAD.pack(request_id, OK)


def ok(request_id: int, payload: bytes) -> bytes:
    return ok_head(request_id, len(payload)) + payload


def error(request_id: int, exc: errors.TideMQError) -> bytes:
    code = exc.code.encode()[:255]
    body = RESPONSE_HEAD.pack(request_id, ERROR) + \
        ERROR_HEAD.pack(exc.grpc_status.value[0], len(code)) + code + exc.message.encode()
    return LENGTH.pack(len(body)) + body


def parse_response(body: bytes | memoryview) -> tuple[int, memoryview | errors.TideMQError]:
    """(request id, the response's payload, a view into `body`, or the error the server
    answered)."""
    try:
        request_id, status = RESPONSE_HEAD.unpack_from(body)
        if status == OK:
            return request_id, memoryview(body)[RESPONSE_HEAD.size:]
        if status != ERROR:
            raise FrameError(f"malformed response frame: status {status}")
        grpc_number, code_length = ERROR_HEAD.unpack_from(body, RESPONSE_HEAD.size)
        offset = RESPONSE_HEAD.size + ERROR_HEAD.size
        code = str(body[offset:offset + code_length], "utf-8")  # body may be a memoryview
        message = str(body[offset + code_length:], "utf-8")
    except (struct.error, UnicodeDecodeError) as exc:
        raise FrameError(f"malformed response frame: {exc}") from None
    status_code = _STATUS_BY_NUMBER.get(grpc_number, grpc.StatusCode.UNKNOWN)
    return request_id, errors.from_status(status_code, code or None, message)
