"""One exception hierarchy for every TideMQ service and client.

Each error carries a stable `code` (e.g. TOPIC_NOT_EXIST) plus the gRPC
status and HTTP status it maps to. Servers raise these; the server runtime turns them into a
gRPC status with the code in trailing metadata (`tidemq-code`), and `from_rpc_error` turns
that back into the same exception class on the client side, so a gateway can answer HTTP with
the code the broker chose.
"""

from __future__ import annotations

import grpc

CODE_METADATA_KEY = "tidemq-code"


class TideMQError(Exception):
    code = "INTERNAL_ERROR"
    grpc_status = grpc.StatusCode.INTERNAL
    http_status = 500

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        if code:
            self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


class InvalidArgument(TideMQError):
    code = "INVALID_ARGUMENT"
    grpc_status = grpc.StatusCode.INVALID_ARGUMENT
    http_status = 400


class NotFound(TideMQError):
    code = "NOT_FOUND"
    grpc_status = grpc.StatusCode.NOT_FOUND
    http_status = 404


class TopicNotExist(NotFound):
    code = "TOPIC_NOT_EXIST"


class AlreadyExists(TideMQError):
    code = "ALREADY_EXISTS"
    grpc_status = grpc.StatusCode.ALREADY_EXISTS
    http_status = 409


class PayloadTooLarge(TideMQError):
    code = "MESSAGE_TOO_LARGE"
    grpc_status = grpc.StatusCode.INVALID_ARGUMENT
    http_status = 413


class PreconditionFailed(TideMQError):
    code = "PRECONDITION_FAILED"
    grpc_status = grpc.StatusCode.FAILED_PRECONDITION
    http_status = 412


class Conflict(TideMQError):
    """A state conflict the caller can resolve by retrying (e.g. REBALANCE_IN_PROGRESS)."""

    code = "CONFLICT"
    grpc_status = grpc.StatusCode.ABORTED
    http_status = 409


class ServiceUnavailable(TideMQError):
    code = "SERVICE_UNAVAILABLE"
    grpc_status = grpc.StatusCode.UNAVAILABLE
    http_status = 503


class ResourceExhausted(ServiceUnavailable):
    """A per-instance limit is reached: retry later or on another instance. Over HTTP the
    answer carries `Retry-After: retry_after_s` (whole seconds), so a client that loops backs
    off instead of asking again at once."""

    code = "RESOURCE_EXHAUSTED"
    grpc_status = grpc.StatusCode.RESOURCE_EXHAUSTED
    http_status = 429
    retry_after_s = 1


class Throttled(ResourceExhausted):
    """A caller over its quota (docs/quotas.md) whose request would have to wait past its
    deadline: nothing was done; retry after `retry_after_s`. Kafka answers throttled requests
    with a throttle time rather than an error; TideMQ does too (`throttle_time_ms`) and uses
    this only where waiting is not possible (the HTTP gateway's 429, a broker hold that
    would outlast the call)."""

    code = "THROTTLED"

    def __init__(self, message: str, *, code: str | None = None,
                 retry_after_s: float = 1.0) -> None:
        super().__init__(message, code=code)
        self.retry_after_s = max(1, int(-(-retry_after_s // 1)))  # whole seconds, rounded up


class StorageFull(ServiceUnavailable):
    """A broker whose disk is at its high-water mark (`disk_full_ratio`) refuses sends:
    nothing was stored, another broker group may take the message (Kafka's
    KAFKA_STORAGE_ERROR, RocketMQ's "disk full"). gRPC RESOURCE_EXHAUSTED (its documented
    case: "the entire file system is out of space"), HTTP 507 Insufficient Storage."""

    code = "STORAGE_FULL"
    grpc_status = grpc.StatusCode.RESOURCE_EXHAUSTED
    http_status = 507


class BreakerOpen(ServiceUnavailable):
    code = "CIRCUIT_OPEN"


class DeadlineExceeded(TideMQError):
    code = "DEADLINE_EXCEEDED"
    grpc_status = grpc.StatusCode.DEADLINE_EXCEEDED
    http_status = 504


class Unauthenticated(TideMQError):
    """No credentials, an unknown access key, a wrong signature or a stale timestamp."""

    code = "UNAUTHENTICATED"
    grpc_status = grpc.StatusCode.UNAUTHENTICATED
    http_status = 401


class PermissionDenied(TideMQError):
    """An authenticated user the ACL does not allow this action on this resource."""

    code = "PERMISSION_DENIED"
    grpc_status = grpc.StatusCode.PERMISSION_DENIED
    http_status = 403


class Internal(TideMQError):
    code = "INTERNAL_ERROR"


_BY_STATUS: dict[grpc.StatusCode, type[TideMQError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.FAILED_PRECONDITION: PreconditionFailed,
    grpc.StatusCode.ABORTED: Conflict,
    grpc.StatusCode.UNAVAILABLE: ServiceUnavailable,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ServiceUnavailable,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
}

# Codes whose class differs from the default class of their gRPC status.
_BY_CODE: dict[str, type[TideMQError]] = {
    TopicNotExist.code: TopicNotExist,
    PayloadTooLarge.code: PayloadTooLarge,
    BreakerOpen.code: BreakerOpen,
    ResourceExhausted.code: ResourceExhausted,
    Throttled.code: Throttled,
    StorageFull.code: StorageFull,
}


def from_rpc_error(exc: grpc.RpcError) -> TideMQError:
    """Rebuild the server's TideMQError from a failed call (status, details, tidemq-code)."""
    status = exc.code() if hasattr(exc, "code") else grpc.StatusCode.UNKNOWN
    details = (exc.details() if hasattr(exc, "details") else None) or str(status)
    code = None
    trailing = exc.trailing_metadata() if hasattr(exc, "trailing_metadata") else None
    for key, value in trailing or ():
        if key == CODE_METADATA_KEY:
            code = value
    return from_status(status, code, details)


def from_status(status: grpc.StatusCode, code: str | None, details: str) -> TideMQError:
    """The TideMQError a server answered with `status`, `code` and `details` (gRPC or the
    wire protocol, tidemq.common.wire)."""
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status, Internal)
    if code is None and status == grpc.StatusCode.UNAVAILABLE:
        details = f"service unreachable: {details}"
    return cls(details, code=code)
