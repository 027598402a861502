"""TideMQ errors -> apache.rocketmq.v2 Status codes.

RocketMQ 5 answers failures inside the response (`status`), not as gRPC statuses, and its
clients pick exceptions by code (BadRequest, NotFound, TooManyRequests, ...). The precise
TideMQ code decides first, then the error class.
"""

from __future__ import annotations

from rocketmq.grpc_protocol import definition_pb2 as pb
from tidemq.common import errors

BY_CODE = {
    "INVALID_TOPIC": pb.ILLEGAL_TOPIC,
    "TOPIC_NOT_EXIST": pb.TOPIC_NOT_FOUND,
    "INVALID_MESSAGE": pb.BAD_REQUEST,
    "MESSAGE_BODY_EMPTY": pb.MESSAGE_BODY_EMPTY,
    "MESSAGE_TOO_LARGE": pb.MESSAGE_BODY_TOO_LARGE,
    "MESSAGE_CORRUPTED": pb.MESSAGE_CORRUPTED,
    "MESSAGE_PROPERTY_CONFLICT": pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
    "INVALID_DELAY": pb.ILLEGAL_DELIVERY_TIME,
    "TRANSACTION_WITH_DELAY": pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
    "INVALID_FILTER": pb.ILLEGAL_FILTER_EXPRESSION,
    "INVALID_RECEIPT_HANDLE": pb.INVALID_RECEIPT_HANDLE,
    "INVALID_RECALL_HANDLE": pb.BAD_REQUEST,
    "MESSAGE_NOT_FOUND": pb.NOT_FOUND,
    "MESSAGE_ALREADY_DELIVERED": pb.BAD_REQUEST,
    "ILLEGAL_OFFSET": pb.ILLEGAL_OFFSET,
    "OFFSET_NOT_FOUND": pb.OFFSET_NOT_FOUND,
    "SUBSCRIPTION_GROUP_NOT_CONSUMABLE": pb.FORBIDDEN,
    # the proxy's answer to an ack whose invisible time ran out first
    "RECEIPT_HANDLE_EXPIRED": pb.INVALID_RECEIPT_HANDLE,
    # another group's handle, or one never handed out: the proxy's INVALID_RECEIPT_HANDLE
    "RECEIPT_HANDLE_NOT_FOUND": pb.INVALID_RECEIPT_HANDLE,
    "UNSUPPORTED_DIGEST": pb.UNSUPPORTED,
    "INVALID_TRANSACTION_ID": pb.INVALID_TRANSACTION_ID,
    "TRANSACTION_NOT_FOUND": pb.INVALID_TRANSACTION_ID,
    "TRANSACTION_ALREADY_RESOLVED": pb.BAD_REQUEST,
    "INVALID_CONSUMER_GROUP": pb.ILLEGAL_CONSUMER_GROUP,
    "INVALID_INVISIBLE_TIME": pb.ILLEGAL_INVISIBLE_TIME,
    "INVALID_INVISIBLE_DURATION": pb.ILLEGAL_INVISIBLE_TIME,   # the broker's ChangeInvisibleDuration
    "NOT_IMPLEMENTED": pb.NOT_IMPLEMENTED,
    "UNSUPPORTED": pb.UNSUPPORTED,
}
BY_CLASS = (
    (errors.NotFound, pb.NOT_FOUND),
    (errors.InvalidArgument, pb.BAD_REQUEST),
    (errors.PayloadTooLarge, pb.MESSAGE_BODY_TOO_LARGE),
    (errors.ResourceExhausted, pb.TOO_MANY_REQUESTS),
    (errors.DeadlineExceeded, pb.PROXY_TIMEOUT),
    (errors.PreconditionFailed, pb.BAD_REQUEST),
    (errors.Conflict, pb.BAD_REQUEST),
)


def not_implemented(what: str) -> errors.TideMQError:
    return errors.PreconditionFailed(f"{what} is not implemented by TideMQ's gateway-grpc "
                                     "(docs/rocketmq-compat.md)", code="NOT_IMPLEMENTED")


def code_of(exc: errors.TideMQError) -> int:
    code = BY_CODE.get(exc.code)
    if code is not None:
        return code
    for cls, mapped in BY_CLASS:
        if isinstance(exc, cls):
            return mapped
    return pb.INTERNAL_SERVER_ERROR


def ok() -> pb.Status:
    return pb.Status(code=pb.OK, message="OK")


def status_of(exc: errors.TideMQError) -> pb.Status:
    return pb.Status(code=code_of(exc), message=f"{exc.code}: {exc.message}")
