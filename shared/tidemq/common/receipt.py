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

from tidemq.common.errors import InvalidArgument

VERSION = 1
INVALID = "INVALID_RECEIPT_HANDLE"


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
