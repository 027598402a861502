"""Errors as RFC 9457 `application/problem+json`, from ONE handler for the whole app.

A TideMQError keeps its stable code and HTTP status; a werkzeug HTTPException (404 route,
405, 413 over MAX_CONTENT_LENGTH, ...) gets the same shape; anything else is logged and
answered as 500 INTERNAL_ERROR without leaking internals.
"""

from __future__ import annotations

from flask import Flask, Response, json
from tidemq.common.errors import TideMQError
from tidemq.common.logs import get_logger
from werkzeug.exceptions import HTTPException

log = get_logger(__name__)

PROBLEM_MIMETYPE = "application/problem+json"
TYPE_BASE = "https://tidemq.dev/problems/"

HTTP_CODES = {
    400: "BAD_REQUEST", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 406: "NOT_ACCEPTABLE",
    409: "CONFLICT", 411: "LENGTH_REQUIRED", 413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE", 429: "TOO_MANY_REQUESTS", 500: "INTERNAL_ERROR",
    503: "SERVICE_UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}


def problem(status: int, code: str, detail: str, title: str | None = None) -> Response:
    body = {
        "type": TYPE_BASE + code.lower().replace("_", "-"),
        "title": title or code.replace("_", " ").capitalize(),
        "status": status,
        "code": code,
        "detail": detail,
    }
    return Response(json.dumps(body), status=status, mimetype=PROBLEM_MIMETYPE)


def render(exc: BaseException) -> Response:
    if isinstance(exc, TideMQError):
        if exc.http_status >= 500:
            log.warning("request failed", code=exc.code, detail=exc.message)
        return problem(exc.http_status, exc.code, exc.message)
    if isinstance(exc, HTTPException):
        status = exc.code or 500
        response = problem(status, HTTP_CODES.get(status, f"HTTP_{status}"),
                           exc.description or exc.name, exc.name)
        valid_methods = getattr(exc, "valid_methods", None)
        if status == 405 and valid_methods:
            response.headers["Allow"] = ", ".join(valid_methods)
        return response
    log.exception("unhandled error", error_type=type(exc).__name__)
    return problem(500, "INTERNAL_ERROR", "the gateway hit an unexpected error; see its logs")


def install(app: Flask) -> None:
    app.register_error_handler(Exception, render)
