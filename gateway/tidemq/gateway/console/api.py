"""The console's only way to the cluster: the gateway's own HTTP API, called in process.

Each call is a WSGI request to this same app (werkzeug's client), so it goes through the same
routes, validation, error handler, metrics and tracing as a user's `curl`, and carries the
browser's headers (`Authorization`, cookies, ...) and address: the console can show nothing
and change nothing that the API would not let the same user see or change.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from flask import current_app, request
from tidemq.gateway.auth import credentials_header

# What describes the console's own request rather than the user: not passed on.
NOT_FORWARDED = frozenset({"host", "content-length", "content-type", "connection",
                           "accept-encoding", "transfer-encoding", "upgrade", "keep-alive"})


class ApiProblem(Exception):
    """A problem+json answer of the API, shown on the page that asked."""

    def __init__(self, status: int, code: str, detail: str, path: str) -> None:
        super().__init__(f"{status} {code}: {detail}")
        self.status, self.code, self.detail, self.path = status, code, detail, path


def segment(value: str) -> str:
    """One path segment, quoted (a topic or group name can hold `%` and `|`)."""
    return quote(value, safe="")


def path_of(*segments: str) -> str:
    return "/" + "/".join(segment(s) for s in segments)


def call(method: str, path: str, *, query: dict[str, Any] | None = None,
         body: Any = None) -> Any:
    """The JSON answer of `method path`; ApiProblem for any answer that is not 2xx."""
    params = {k: v for k, v in (query or {}).items() if v not in (None, "")}
    url = path + ("?" + urlencode(params) if params else "")
    headers = [(name, value) for name, value in request.headers.items()
               if name.lower() not in NOT_FORWARDED and name.lower() != "authorization"]
    if credentials := credentials_header():  # the console's login cookie becomes a bearer
        headers.append(("Authorization", credentials))
    client = current_app.test_client()
    response = client.open(url, method=method, json=body, headers=headers,
                           environ_base={"REMOTE_ADDR": request.remote_addr or "",
                                         "wsgi.url_scheme": request.scheme})
    document = response.get_json(silent=True)
    if not 200 <= response.status_code < 300:
        document = document if isinstance(document, dict) else {}
        raise ApiProblem(response.status_code, str(document.get("code", "HTTP_ERROR")),
                         str(document.get("detail", response.status)), path)
    return document


def get(path: str, **query: Any) -> Any:
    return call("GET", path, query=query)


def post(path: str, body: Any) -> Any:
    return call("POST", path, body=body)
