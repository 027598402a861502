"""A request whose one large bytes field is sent as it is, never copied into the message.

Inside the broker channel only: a caller hands the channel the message without the field and
the bytes beside it (`BrokerChannel.call(..., bulk=records)`), and the channel frames them.

A producer's SendRequest carries its batch of records (256 KiB for 256 messages of 1 KiB).
Put in the protobuf message, the batch is copied into the message, then again into its
encoding: three fresh buffers per batch, each first touched page a page fault (about 750 per
1 000 messages measured by bench/e2e_latency). Protobuf reads a field wherever it comes in
the encoding, so the wire framing sends the rest of the message's encoding, then the field's
key and length, then the bytes themselves in the same vectored write: the broker parses the
very message `whole()` would have been. gRPC, which serialises messages itself, gets
`whole()`.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import FieldDescriptor


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


class Spliced:
    """`head` (the message without the field) plus `data` as its bytes field `field`. Reads
    like the whole message (`request.records`, `request.queue_id`)."""

    __slots__ = ("head", "field", "data", "_key")

    def __init__(self, head: Any, field: str, data: bytes) -> None:
        descriptor = head.DESCRIPTOR.fields_by_name[field]
        if descriptor.type != FieldDescriptor.TYPE_BYTES or getattr(head, field):
            raise ValueError(f"{field!r} must be an unset bytes field of {type(head).__name__}")
        self.head, self.field, self.data = head, field, data
        self._key = _varint(descriptor.number << 3 | 2)  # wire type 2: length-delimited

    def whole(self) -> Any:
        """The complete message (a copy of the bytes into it: what gRPC sends)."""
        message = type(self.head)()
        message.CopyFrom(self.head)
        setattr(message, self.field, self.data)
        return message

    def wire_parts(self) -> tuple[bytes, bytes, bytes]:
        """The message's encoding in three parts, the bytes last and uncopied."""
        return (self.head.SerializeToString(), self._key + _varint(len(self.data)), self.data)

    def __getattr__(self, name: str) -> Any:
        return self.data if name == self.field else getattr(self.head, name)


def whole(request: Any) -> Any:
    """The protobuf message to hand to gRPC, spliced or not."""
    return request.whole() if type(request) is Spliced else request


def wire_payload(request: Any) -> Any:
    """What the wire connection writes: the message, or a spliced one's three parts."""
    return request.wire_parts() if type(request) is Spliced else request


def compose(request: Any, bulk_field: str, bulk: bytes | None) -> Any:
    """`request` with `bulk` as its field `bulk_field`, spliced (not copied) where the method
    has such a field; `request` as it is when no bulk is given."""
    if bulk is None:
        return request
    if not bulk_field:
        raise ValueError(f"{type(request).__name__} has no bulk field to carry the bytes")
    return Spliced(request, bulk_field, bulk)
