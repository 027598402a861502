"""The opaque strings gateway-grpc hands to RocketMQ clients and gets back.

A transaction id names what TideMQ's EndTransaction needs: the half message's broker group,
its offset message id (CommitLog offset) and its unique id. A receipt handle is TideMQ's own
pop receipt handle plus the message's CommitLog offset, which ForwardMessageToDeadLetterQueue
needs (RocketMQ's receipt handles carry the commit-log offset too). Clients never parse
either; both are URL-safe and survive gRPC metadata and JSON.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass

from tidemq.common.errors import InvalidArgument
from tidemq.common.receipt import ReceiptHandle, broker_of

TRANSACTION_VERSION = 1
_OFFSET_SEPARATOR = "."  # never in TideMQ's handle (URL-safe base64 without padding)


@dataclass(frozen=True, slots=True)
class TransactionId:
    broker_name: str
    msg_id: str      # offset message id of the half message (32 hex chars)
    unique_id: str   # the half message's unique id: TideMQ's transaction id

    def encode(self) -> str:
        raw = json.dumps([TRANSACTION_VERSION, self.broker_name, self.msg_id, self.unique_id],
                         separators=(",", ":")).encode()
        return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()

    @classmethod
    def decode(cls, text: str) -> TransactionId:
        """InvalidArgument INVALID_TRANSACTION_ID for anything `encode` did not make."""
        try:
            raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            version, broker, msg_id, unique_id = json.loads(raw)
            ok = version == TRANSACTION_VERSION and all(
                isinstance(v, str) and v for v in (broker, msg_id, unique_id))
        except (binascii.Error, ValueError, TypeError, UnicodeDecodeError):
            ok = False
        if not ok:
            raise InvalidArgument(f"{text[:80]!r} is not a transaction id of this gateway",
                                  code="INVALID_TRANSACTION_ID")
        return cls(broker, msg_id, unique_id)


@dataclass(frozen=True, slots=True)
class GatewayReceipt:
    handle: str            # TideMQ's pop receipt handle (tidemq.common.receipt)
    physical_offset: int   # the popped record's CommitLog offset on that broker group

    def encode(self) -> str:
        return f"{self.handle}{_OFFSET_SEPARATOR}{self.physical_offset:x}"

    @property
    def broker_name(self) -> str:
        return broker_of(self.handle)  # decode() checked the whole handle

    @classmethod
    def decode(cls, text: str) -> GatewayReceipt:
        """InvalidArgument INVALID_RECEIPT_HANDLE for anything `encode` did not make."""
        handle, _, offset = text.rpartition(_OFFSET_SEPARATOR)
        try:
            physical_offset = int(offset, 16) if offset.isalnum() else -1
        except ValueError:
            physical_offset = -1
        if not handle or physical_offset < 0:
            raise InvalidArgument(f"{text[:80]!r} is not a receipt handle of this gateway",
                                  code="INVALID_RECEIPT_HANDLE")
        ReceiptHandle.decode(handle)  # INVALID_RECEIPT_HANDLE for a damaged one
        return cls(handle, physical_offset)
