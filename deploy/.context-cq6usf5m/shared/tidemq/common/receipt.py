"""Receipt handles of pop consumption: which broker, checkpoint and message a handle acks.

A handle is opaque to users: URL-safe base64 of a small JSON array, so it travels unchanged
through gRPC, HTTP paths and JSON bodies. It names the broker group that popped the message
(clients route the ack there), the checkpoint id in that broker's revive queue, and the
message's topic, queue and queue offset.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from tidemq.common.errors import InvalidArgument, NotFound, PreconditionFailed, TideMQError

VERSION = 1
INVALID = "INVALID_RECEIPT_HANDLE"
MAX_ACK_BATCH = 1024  # receipt handles one batch Ack carries (the broker refuses more)
# the per-handle codes of a batch Ack, back to the class a single ack raises for each
_ACK_ERRORS = {"RECEIPT_HANDLE_NOT_FOUND": NotFound,
               "RECEIPT_HANDLE_EXPIRED": PreconditionFailed, INVALID: InvalidArgument}


def ack_error(code: str, message: str) -> TideMQError | None:
    """One result of a batch Ack as the error a single ack would raise (None: acked)."""
    return _ACK_ERRORS.get(code, TideMQError)(message, code=code) if code else None


@dataclass(frozen=True, slots=True)
class ReceiptHandle:
    broker_name: str
    checkpoint: int
    topic: str
    queue_id: int
    queue_offset: int

    def encode(self) -> str:
        return encode_handles(self.broker_name, self.checkpoint, self.topic, self.queue_id,
                              [self.queue_offset])[0]

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        """InvalidArgument (INVALID_RECEIPT_HANDLE) for anything not made by `encode`."""
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)).decode()
            version, broker, checkpoint, topic, queue_id, queue_offset = json.loads(raw)
            # `type(n) is int`: a JSON true is not an offset
            ok = (version == VERSION and type(broker) is str and type(topic) is str
                  and type(checkpoint) is int and type(queue_id) is int
                  and type(queue_offset) is int
                  and checkpoint >= 0 and queue_id >= 0 and queue_offset >= 0)
        except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
            ok = False
        if not ok:
            raise InvalidArgument(f"{text[:80]!r} is not a receipt handle", code=INVALID)
        return cls(broker, checkpoint, topic, queue_id, queue_offset)


_HEAD = b'[%d,"' % VERSION


def broker_of(text: str) -> str:
    """The broker group a handle names, read without decoding the rest: what a client needs
    to route an ack, at a fraction of `decode`'s cost. The broker decodes the whole handle when
    the ack arrives and answers INVALID_RECEIPT_HANDLE for one that is not a handle, as
    `decode` raises here for one whose head is not."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raw = b""
    end = raw.find(b'"', len(_HEAD))
    if raw.startswith(_HEAD) and end > len(_HEAD) and b"\\" not in raw[:end]:
        try:
            return raw[len(_HEAD):end].decode()
        except UnicodeDecodeError:
            pass
    return ReceiptHandle.decode(text).broker_name  # raises the precise error


def encode_handles(broker_name: str, checkpoint: int, topic: str, queue_id: int,
                   queue_offsets: list[int]) -> list[str]:
    """The handles of one pop's messages of a queue: they differ only in the offset, so the
    JSON is written once (a pop of 32 used to spend as long encoding handles as reading)."""
    head = json.dumps([VERSION, broker_name, checkpoint, topic, queue_id],
                      separators=(",", ":"))[:-1] + ","
    encode = base64.urlsafe_b64encode
    return [encode(f"{head}{offset}]".encode()).rstrip(b"=").decode()
            for offset in queue_offsets]
