"""apache.rocketmq.v2 messages <-> TideMQ's message model (no servicer logic here).

Sending: a protobuf Message becomes a `tidemq.client.Message` (tag, keys, user properties,
message group, delivery time); the client's message id travels as the property
RMQ_MESSAGE_ID so a consumer sees the id its producer got (TideMQ's unique id is made by the
encoder), and a delivery time as RMQ_DELIVERY_MS. Receiving: a stored `MessageExt` becomes a protobuf Message with the system
properties the RocketMQ clients read (message id, type, timestamps, delivery attempt, receipt
handle, body digest).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import zlib

from rocketmq.grpc_protocol import definition_pb2 as pb
from tidemq.client import Message, MessageExt
from tidemq.common import errors, record

PROP_RMQ_MESSAGE_ID = "RMQ_MESSAGE_ID"
# The delivery time a RocketMQ producer asked for (epoch ms): the broker drops its own delay
# properties when it delivers, and consumers read the time back.
PROP_RMQ_DELIVERY_MS = "RMQ_DELIVERY_MS"
# A delivery timestamp whose seconds are past this (year 5138) is in milliseconds: the Python
# client 5.1.2 puts Message.delivery_timestamp (epoch ms) into Timestamp.seconds.
MILLIS_IN_SECONDS_FIELD = 100_000_000_000
_HIDDEN = frozenset({PROP_RMQ_MESSAGE_ID, PROP_RMQ_DELIVERY_MS, record.PROP_DELAY,
                     record.PROP_TIMER_DELIVER_MS, record.PROP_TIMER_OUT_MS})


def timestamp_ms(ts) -> int:
    """A protobuf Timestamp as epoch ms (see MILLIS_IN_SECONDS_FIELD)."""
    if ts.seconds >= MILLIS_IN_SECONDS_FIELD:
        return ts.seconds
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def set_timestamp(ts, epoch_ms: int) -> None:
    ts.seconds, ts.nanos = divmod(epoch_ms, 1000)[0], epoch_ms % 1000 * 1_000_000


def to_message(message: pb.Message, transactional: bool = False) -> Message:
    """The TideMQ message to send; InvalidArgument (precise code) for what the broker would
    refuse or what RocketMQ forbids (a transactional message with a group or a time)."""
    system = message.system_properties
    body = message.body
    if system.body_encoding == pb.GZIP:
        try:
            body = gzip.decompress(body)
        except (OSError, EOFError) as exc:
            raise errors.InvalidArgument(f"message body is not gzip: {exc}",
                                         code="MESSAGE_CORRUPTED") from None
    _check_digest(system.body_digest, body)
    deliver_at = timestamp_ms(system.delivery_timestamp) if system.HasField(
        "delivery_timestamp") else 0
    if transactional and (system.message_group or deliver_at):
        raise errors.InvalidArgument("a transactional message cannot have a message group or a "
                                     "delivery timestamp", code="MESSAGE_PROPERTY_CONFLICT")
    properties = dict(message.user_properties)
    if system.message_id:
        properties[PROP_RMQ_MESSAGE_ID] = system.message_id
    if deliver_at:
        properties[PROP_RMQ_DELIVERY_MS] = str(deliver_at)
    return Message(message.topic.name, body, tags=system.tag, keys=tuple(system.keys),
                   properties=properties, message_group=system.message_group,
                   deliver_at_ms=deliver_at)


# The digest of a body as the clients write it, normalised for comparison: CRC32 as a number
# (clients differ in zero-padding), MD5 and SHA-1 as upper-case hex.
_DIGESTS = {pb.CRC32: lambda body: zlib.crc32(body),
            pb.MD5: lambda body: hashlib.md5(body).hexdigest().upper(),
            pb.SHA1: lambda body: hashlib.sha1(body).hexdigest().upper()}


def _check_digest(digest: pb.Digest, body: bytes) -> None:
    """A digest a client sent with the body (clients need not send one) must be of a known
    type and match: MESSAGE_CORRUPTED, not a stored message the client did not send."""
    if digest.type == pb.DIGEST_TYPE_UNSPECIFIED and not digest.checksum:
        return
    compute = _DIGESTS.get(digest.type)
    if compute is None:
        raise errors.InvalidArgument(
            f"body digest type {digest.type} is not one of CRC32, MD5 and SHA1",
            code="UNSUPPORTED_DIGEST")
    given = digest.checksum.strip().upper()
    if digest.type == pb.CRC32:
        with contextlib.suppress(ValueError):   # not hex: it cannot match
            given = int(given, 16)
    if given != compute(body):
        raise errors.InvalidArgument(
            f"the body does not match its {pb.DigestType.Name(digest.type)} digest "
            f"{digest.checksum[:64]!r}: it was damaged on the way", code="MESSAGE_CORRUPTED")


def message_id(message: MessageExt) -> str:
    """The id a RocketMQ client knows the message by: its producer's, else TideMQ's."""
    return message.properties.get(PROP_RMQ_MESSAGE_ID) or message.unique_id


def message_type(message: MessageExt) -> int:
    props = message.properties
    if props.get(record.PROP_MESSAGE_GROUP):
        return pb.FIFO
    if props.get(record.PROP_TRANSACTION_PREPARED) == "true":
        return pb.TRANSACTION
    if props.get(PROP_RMQ_DELIVERY_MS) or props.get(record.PROP_TIMER_DELIVER_MS) \
            or props.get(record.PROP_DELAY):
        return pb.DELAY
    return pb.NORMAL


def to_pb(message: MessageExt, *, receipt_handle: str = "", invisible_ms: int = 0,
          topic: str = "") -> pb.Message:
    """A stored message as the RocketMQ clients expect it (`topic`: the one the client asked
    for, also when it is redelivered from a retry topic)."""
    body = message.body
    props = message.properties
    out = pb.Message(body=body)
    out.topic.name = topic or message.origin_topic
    out.user_properties.update({k: v for k, v in message.user_properties.items()
                                if k not in _HIDDEN})
    system = out.system_properties
    system.message_id = message_id(message)
    system.message_type = message_type(message)
    if message.tags:
        system.tag = message.tags
    system.keys.extend(message.keys)
    # What RocketMQ's proxy sends and every official client verifies the same way (the
    # Node.js client's CRC32 text differs from the Python one's: a CRC32 digest fails there)
    system.body_digest.type = pb.MD5
    system.body_digest.checksum = hashlib.md5(body).hexdigest().upper()
    system.body_encoding = pb.IDENTITY
    set_timestamp(system.born_timestamp, message.born_timestamp)
    set_timestamp(system.store_timestamp, message.store_timestamp)
    deliver_at = props.get(PROP_RMQ_DELIVERY_MS) or props.get(record.PROP_TIMER_DELIVER_MS)
    if deliver_at and deliver_at.isdigit():
        set_timestamp(system.delivery_timestamp, int(deliver_at))
    system.queue_id = message.queue_id
    system.queue_offset = message.queue_offset
    system.delivery_attempt = message.reconsume_times + 1
    if message.message_group:
        system.message_group = message.message_group
    if receipt_handle:
        system.receipt_handle = receipt_handle
        system.invisible_duration.seconds, rest = divmod(invisible_ms, 1000)
        system.invisible_duration.nanos = rest * 1_000_000
    return out
