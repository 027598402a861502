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
        raw = json.dumps([VERSION, self.broker_name, self.checkpoint, self.topic, self.queue_id,
                          self.queue_offset], separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    @classmethod
    def decode(cls, text: str) -> ReceiptHandle:
        """InvalidArgument (INVALID_RECEIPT_HANDLE) for anything not made by `encode`."""
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            version, broker, checkpoint, topic, queue_id, queue_offset = json.loads(raw)
            ok = (version == VERSION and isinstance(broker, str) and isinstance(topic, str)
                  and all(isinstance(n, int) and not isinstance(n, bool) and n >= 0
                          for n in (checkpoint, queue_id, queue_offset)))
        except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
            ok = False
        if not ok:
            raise InvalidArgument(f"{text[:80]!r} is not a receipt handle", code=INVALID)
        return cls(broker, checkpoint, topic, queue_id, queue_offset)
