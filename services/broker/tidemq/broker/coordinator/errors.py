"""Coordinator error codes (Kafka's names) and their transport mapping.

A `CoordinatorError` is a `TideMQError`, so the broker's server runtime turns it into a gRPC
status plus the `tidemq-code` trailer without any per-RPC mapping code; clients branch on
`.code` (e.g. rejoin on REBALANCE_IN_PROGRESS, reset the member id on UNKNOWN_MEMBER_ID).
"""

from __future__ import annotations

from tidemq.common.errors import (
    Conflict,
    InvalidArgument,
    NotFound,
    PreconditionFailed,
    ServiceUnavailable,
    TideMQError,
)

UNKNOWN_MEMBER_ID = "UNKNOWN_MEMBER_ID"
ILLEGAL_GENERATION = "ILLEGAL_GENERATION"
REBALANCE_IN_PROGRESS = "REBALANCE_IN_PROGRESS"
INCONSISTENT_GROUP_PROTOCOL = "INCONSISTENT_GROUP_PROTOCOL"
INVALID_SESSION_TIMEOUT = "INVALID_SESSION_TIMEOUT"
INVALID_GROUP_ID = "INVALID_GROUP_ID"
COORDINATOR_NOT_AVAILABLE = "COORDINATOR_NOT_AVAILABLE"
NOT_COORDINATOR = "NOT_COORDINATOR"
NON_EMPTY_GROUP = "NON_EMPTY_GROUP"
GROUP_ID_NOT_FOUND = "GROUP_ID_NOT_FOUND"
UNKNOWN_ASSIGNOR = "UNKNOWN_ASSIGNOR"

# code -> the shared error class whose gRPC/HTTP status it borrows (no grpc import here:
# domain code stays transport-free). Retryable conflicts are `Conflict` (ABORTED/409).
_TRANSPORT: dict[str, type[TideMQError]] = {
    UNKNOWN_MEMBER_ID: NotFound,
    ILLEGAL_GENERATION: Conflict,
    REBALANCE_IN_PROGRESS: Conflict,
    INCONSISTENT_GROUP_PROTOCOL: PreconditionFailed,
    INVALID_SESSION_TIMEOUT: InvalidArgument,
    INVALID_GROUP_ID: InvalidArgument,
    COORDINATOR_NOT_AVAILABLE: ServiceUnavailable,
    NOT_COORDINATOR: ServiceUnavailable,
    NON_EMPTY_GROUP: PreconditionFailed,
    GROUP_ID_NOT_FOUND: NotFound,
    UNKNOWN_ASSIGNOR: InvalidArgument,
}

ERROR_CODES = frozenset(_TRANSPORT)


class CoordinatorError(TideMQError):
    """A group-protocol error: `code` is one of `ERROR_CODES`, `message` says why in a sentence."""

    def __init__(self, code: str, message: str) -> None:
        if code not in _TRANSPORT:
            raise ValueError(f"unknown coordinator error code {code!r}")
        super().__init__(message, code=code)
        like = _TRANSPORT[code]
        self.grpc_status = like.grpc_status
        self.http_status = like.http_status

    def __repr__(self) -> str:
        return f"CoordinatorError({self.code!r}, {self.message!r})"
