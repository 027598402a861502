"""Errors as RFC 9457 `application/problem+json`: the one renderer of every HTTP service (the
gateway, the trace collector), installed as the app's one error handler, not per view.

A TideMQError keeps its stable code and HTTP status; an HTTP error of the framework
(werkzeug's HTTPException: 404 route, 405, 413 over MAX_CONTENT_LENGTH, ...) gets the same
shape; anything else is logged and answered as 500 INTERNAL_ERROR without leaking internals.
Flask is imported only by `install`, which only the HTTP services call.
"""

from __future__ import annotations

import json
from typing import Any

from tidemq.common.errors import TideMQError
from tidemq.common.logs import get_logger

log = get_logger(__name__)

PROBLEM_MIMETYPE = "application/problem+json"
TYPE_BASE = "https://tidemq.dev/problems/"

HTTP_CODES = {
    400: "BAD_REQUEST", 404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 406: "NOT_ACCEPTABLE",
    409: "CONFLICT", 411: "LENGTH_REQUIRED", 413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE", 429: "TOO_MANY_REQUESTS", 500: "INTERNAL_ERROR",
    503: "SERVICE_UNAVAILABLE", 504: "DEADLINE_EXCEEDED",
}


def problem_body(status: int, code: str, detail: str, title: str | None = None) -> dict:
    return {
        "type": TYPE_BASE + code.lower().replace("_", "-"),
        "title": title or code.replace("_", " ").capitalize(),
        "status": status,
        "code": code,
        "detail": detail,
    }


def problem_for(exc: BaseException, *, max_request_bytes: int | None = None,
                ) -> tuple[int, dict, dict[str, str]]:
    """(status, body, headers) for any exception a view raised; a request over the app's
    `max_request_bytes` is told the limit (werkzeug's own text does not say it)."""
    if isinstance(exc, TideMQError):
        if exc.http_status >= 500:
            log.warning("request failed", code=exc.code, detail=exc.message)
        retry_after = getattr(exc, "retry_after_s", None)
        headers = {"Retry-After": str(retry_after)} if retry_after else {}
        return exc.http_status, problem_body(exc.http_status, exc.code, exc.message), headers
    status = getattr(exc, "code", None)
    if isinstance(status, int) and hasattr(exc, "description"):  # werkzeug's HTTPException
        name = getattr(exc, "name", None)
        detail = exc.description or name or ""
        if status == 413 and max_request_bytes:
            detail = (f"the request body is over the limit of {max_request_bytes} bytes "
                      f"({max_request_bytes / 1048576:.1f} MiB): send fewer or smaller messages "
                      "per request")
        body = problem_body(status, HTTP_CODES.get(status, f"HTTP_{status}"), detail, name)
        valid_methods = getattr(exc, "valid_methods", None)
        headers = {"Allow": ", ".join(valid_methods)} if status == 405 and valid_methods else {}
        return status, body, headers
    log.exception("unhandled error", error_type=type(exc).__name__)
    return 500, problem_body(500, "INTERNAL_ERROR",
                             "the service hit an unexpected error; see its logs"), {}


def install(app: Any) -> None:
    """Render every error of the Flask `app` as problem+json."""
    from flask import Response

    def render(exc: BaseException) -> Response:
        status, body, headers = problem_for(
            exc, max_request_bytes=app.config.get("MAX_CONTENT_LENGTH"))
        return Response(json.dumps(body), status=status, mimetype=PROBLEM_MIMETYPE,
                        headers=headers)

    app.register_error_handler(Exception, render)
