"""The Kafka protocol's framing and messages, with kafka-python's classes as the codec.

kafka-python 3.x generates its request and response classes from Kafka's JSON message schemas
and can decode requests and encode responses, so no schema is written by hand here. This
module knows which API keys and versions the gateway speaks (`SUPPORTED`), decodes a request
frame (header v1 or v2, by the API's flexible versions) and encodes a response (header v0 or
v1; ApiVersions' is always v0) from plain dicts.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

import kafka.protocol.admin  # noqa: F401 - registers the admin APIs' classes
import kafka.protocol.consumer  # noqa: F401
import kafka.protocol.metadata  # noqa: F401
import kafka.protocol.producer  # noqa: F401
from kafka.protocol.api_message import ApiMessage

HEADER = struct.Struct(">hhi")       # api key, api version, correlation id
MIN_REQUEST_SIZE = HEADER.size + 2   # ... plus the client id's length (header v1)

# Kafka's error codes by name (the protocol guide's table), as the handlers use them.
ERRORS = {
    "NONE": 0, "UNKNOWN_SERVER_ERROR": -1, "OFFSET_OUT_OF_RANGE": 1, "CORRUPT_MESSAGE": 2,
    "UNKNOWN_TOPIC_OR_PARTITION": 3, "LEADER_NOT_AVAILABLE": 5, "NOT_LEADER_OR_FOLLOWER": 6,
    "REQUEST_TIMED_OUT": 7,
    "MESSAGE_TOO_LARGE": 10, "OFFSET_METADATA_TOO_LARGE": 12, "COORDINATOR_NOT_AVAILABLE": 15,
    "NOT_COORDINATOR": 16,
    "INVALID_TOPIC_EXCEPTION": 17, "NOT_ENOUGH_REPLICAS": 19,
    "NOT_ENOUGH_REPLICAS_AFTER_APPEND": 20, "ILLEGAL_GENERATION": 22,
    "INCONSISTENT_GROUP_PROTOCOL": 23, "INVALID_GROUP_ID": 24, "UNKNOWN_MEMBER_ID": 25,
    "INVALID_SESSION_TIMEOUT": 26, "REBALANCE_IN_PROGRESS": 27, "TOPIC_AUTHORIZATION_FAILED": 29,
    "GROUP_AUTHORIZATION_FAILED": 30, "CLUSTER_AUTHORIZATION_FAILED": 31,
    "UNSUPPORTED_SASL_MECHANISM": 33, "ILLEGAL_SASL_STATE": 34, "UNSUPPORTED_VERSION": 35,
    "TOPIC_ALREADY_EXISTS": 36,
    "INVALID_PARTITIONS": 37, "INVALID_REPLICATION_FACTOR": 38, "INVALID_CONFIG": 40,
    "INVALID_REQUEST": 42, "POLICY_VIOLATION": 44, "OUT_OF_ORDER_SEQUENCE_NUMBER": 45,
    "DUPLICATE_SEQUENCE_NUMBER": 46, "INVALID_PRODUCER_EPOCH": 47,
    "TRANSACTIONAL_ID_AUTHORIZATION_FAILED": 53, "UNKNOWN_PRODUCER_ID": 59,
    "KAFKA_STORAGE_ERROR": 56, "SASL_AUTHENTICATION_FAILED": 58, "NON_EMPTY_GROUP": 68,
    "GROUP_ID_NOT_FOUND": 69,
    "UNSUPPORTED_COMPRESSION_TYPE": 76, "INVALID_RECORD": 87,
}

# API key -> the versions served: pre-flexible ones where Kafka 4 still accepts them (Kafka 4
# dropped Produce < 3, Fetch < 4, ListOffsets < 1, OffsetCommit < 2, OffsetFetch < 1,
# CreateTopics < 2, DeleteTopics < 1, DescribeConfigs < 1); ApiVersions up to v3.
SUPPORTED: dict[int, tuple[int, int]] = {
    0: (3, 8),     # Produce
    1: (4, 11),    # Fetch
    2: (1, 5),     # ListOffsets
    3: (0, 8),     # Metadata
    8: (2, 7),     # OffsetCommit
    9: (1, 5),     # OffsetFetch
    10: (0, 2),    # FindCoordinator
    11: (0, 5),    # JoinGroup
    12: (0, 3),    # Heartbeat
    13: (0, 3),    # LeaveGroup
    14: (0, 3),    # SyncGroup
    15: (0, 4),    # DescribeGroups
    16: (0, 2),    # ListGroups
    17: (1, 1),    # SaslHandshake (v1: tokens in SaslAuthenticate; security.py)
    18: (0, 3),    # ApiVersions
    19: (2, 4),    # CreateTopics
    20: (1, 3),    # DeleteTopics
    22: (0, 1),    # InitProducerId
    32: (1, 3),    # DescribeConfigs
    36: (0, 2),    # SaslAuthenticate (security.py)
    37: (0, 1),    # CreatePartitions
    44: (0, 1),    # IncrementalAlterConfigs
}
API_VERSIONS = 18
SASL_APIS = frozenset({17, 36})   # answered by security.py, not by handlers.py

# The next-generation group protocols (KIP-848 consumer groups, KIP-932 share groups) are
# refused with a sentence naming the classic protocol, answered here by hand (kafka-python has
# no classes for them). ConsumerGroupHeartbeat v0-1 is advertised: librdkafka (2.16) with
# group.protocol=consumer sends only v1, and when the broker lacks it marks the coordinator
# dead and looks for another one for ever, never telling the application; v0 and v1 answers
# have the same fields. ShareGroupHeartbeat is answered the same way, never advertised.
CONSUMER_GROUP_HEARTBEAT, SHARE_GROUP_HEARTBEAT = 68, 76
NEW_GROUP_PROTOCOLS = {CONSUMER_GROUP_HEARTBEAT: "ConsumerGroupHeartbeat",
                       SHARE_GROUP_HEARTBEAT: "ShareGroupHeartbeat"}
ADVERTISED_ONLY = {CONSUMER_GROUP_HEARTBEAT: (0, 1)}   # answered, never served
NEW_PROTOCOL_REFUSAL = (
    "gateway-kafka serves the classic consumer group protocol only (JoinGroup/SyncGroup/"
    "Heartbeat): set group.protocol=classic (the default), not the KIP-848 'consumer' "
    "protocol or share groups")


def _message_classes() -> tuple[dict[int, type[ApiMessage]], dict[int, type[ApiMessage]]]:
    requests: dict[int, type[ApiMessage]] = {}
    responses: dict[int, type[ApiMessage]] = {}
    pending = list(ApiMessage.__subclasses__())
    while pending:
        cls = pending.pop()
        pending.extend(cls.__subclasses__())
        if getattr(cls, "_class_version", None) is not None or cls._json is None:
            continue
        (requests if cls.type == "request" else responses)[cls.API_KEY] = cls
    return requests, responses


REQUESTS, RESPONSES = _message_classes()
API_NAMES = {key: REQUESTS[key].name.removesuffix("Request") for key in SUPPORTED} | \
    NEW_GROUP_PROTOCOLS


class FrameError(ValueError):
    """A request the gateway cannot even answer: the connection is closed."""


@dataclass(frozen=True, slots=True)
class RequestFrame:
    api_key: int
    api_version: int
    correlation_id: int
    payload: memoryview   # header and body


def peek_header(payload: bytes | memoryview) -> RequestFrame:
    if len(payload) < MIN_REQUEST_SIZE:
        raise FrameError(f"a request of {len(payload)} bytes has no complete header")
    api_key, api_version, correlation_id = HEADER.unpack_from(payload)
    return RequestFrame(api_key, api_version, correlation_id, memoryview(payload))


def supported(api_key: int, api_version: int) -> bool:
    low, high = SUPPORTED.get(api_key, (0, -1))
    return low <= api_version <= high


def decode_request(frame: RequestFrame) -> Any:
    """The request (its `.header` set); FrameError if it does not decode."""
    cls = REQUESTS[frame.api_key]
    try:
        return cls.decode(frame.payload, version=frame.api_version, header=True)
    except Exception as exc:  # the library raises whatever its parsers meet
        raise FrameError(f"{cls.name} v{frame.api_version} does not decode: "
                         f"{type(exc).__name__}: {exc}") from None


def build(cls: type, fields: dict[str, Any], version: int | None = None) -> Any:
    """A kafka-python data object from a dict, nested structs from nested dicts."""
    values = {}
    for name, field in cls._struct.fields.items():
        if name not in fields:
            continue
        value = fields[name]
        if field.is_struct_array() and value is not None:
            value = [build(field.data_class, item) if isinstance(item, dict) else item
                     for item in value]
        elif field.is_struct() and isinstance(value, dict):
            value = build(field.data_class, value)
        values[name] = value
    unknown = set(fields) - set(cls._struct.fields)
    if unknown:
        raise KeyError(f"{cls.__name__} has no fields {sorted(unknown)}")
    return cls(**values) if version is None else cls(version=version, **values)


def encode_response(api_key: int, api_version: int, correlation_id: int,
                    fields: dict[str, Any]) -> bytes:
    """The framed response (size, header, body)."""
    cls = RESPONSES[api_key]
    body = build(cls, fields, api_version).encode()
    flexible_header = api_key != API_VERSIONS and cls.flexible_version_q(api_version)
    header = struct.pack(">i", correlation_id) + (b"\x00" if flexible_header else b"")
    return struct.pack(">i", len(header) + len(body)) + header + body


def unsupported_version_response(frame: RequestFrame) -> bytes | None:
    """UNSUPPORTED_VERSION for a version the gateway does not serve: ApiVersions answers in
    v0 with the versions it does serve (what clients retry with); another API, when the
    version is one Kafka defines, with the error in its top-level error code. None: no answer
    can be made (the connection is then closed)."""
    if frame.api_key == API_VERSIONS:
        return encode_response(API_VERSIONS, 0, frame.correlation_id, api_versions_body(
            ERRORS["UNSUPPORTED_VERSION"]))
    cls = RESPONSES.get(frame.api_key)
    if cls is None or not 0 <= frame.api_version <= cls.max_version:
        return None
    fields = cls._struct.fields
    if "error_code" not in fields or not fields["error_code"].for_version_q(frame.api_version):
        return None
    return encode_response(frame.api_key, frame.api_version, frame.correlation_id,
                           {"error_code": ERRORS["UNSUPPORTED_VERSION"]})


def api_versions_body(error_code: int = 0) -> dict[str, Any]:
    return {"error_code": error_code, "throttle_time_ms": 0,
            "api_keys": [{"api_key": key, "min_version": low, "max_version": high}
                         for key, (low, high) in sorted((SUPPORTED | ADVERTISED_ONLY).items())]}


def _compact_string(text: str | None) -> bytes:
    if text is None:
        return b"\x00"
    data = text.encode()
    return _uvarint(len(data) + 1) + data


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def new_group_protocol_refusal(frame: RequestFrame, error_code: int,
                               message: str = NEW_PROTOCOL_REFUSAL) -> bytes | None:
    """The framed answer to a ConsumerGroupHeartbeat (v0-1) or ShareGroupHeartbeat (v0-1):
    `error_code` and `message`, no member. Both are flexible from v0 and share this layout:
    header v1 (correlation id, no tagged fields); throttle time, error code, error message,
    member id (null), member epoch (-1), heartbeat interval, assignment (null), no tagged
    fields. None for a version with no known layout (the connection is then closed)."""
    if frame.api_key not in NEW_GROUP_PROTOCOLS or not 0 <= frame.api_version <= 1:
        return None
    header = struct.pack(">i", frame.correlation_id) + b"\x00"
    body = (struct.pack(">ih", 0, error_code) + _compact_string(message) + _compact_string(None)
            + struct.pack(">iib", -1, 5000, -1) + b"\x00")
    return struct.pack(">i", len(header) + len(body)) + header + body
