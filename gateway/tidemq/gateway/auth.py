"""The HTTP gateway's auth hook: the same credentials as gRPC (docs/security.md).

A request carries either RocketMQ 5's signature (`Authorization: MQv2-HMAC-SHA1 ...` and an
`x-mq-date-time` header, exactly as the gRPC metadata) or `Authorization: Bearer <token>`
(tidemq.common.auth.bearer, minted with `tidemq acl token`). The AuthGuard decides; a refusal
is a TideMQError, so the app's one error handler answers 401 / 403 problem+json. The gateway
then calls brokers with its own credentials (a trusted proxy): the user's rights were
checked here.

The web console's pages (`/console/...`) also take the token of the console's login cookie
(console/login.py), and send a browser without credentials to the login page instead of
answering 401. The cookie is never accepted by the API routes themselves, so no other site
can make a browser call the API with it.
"""

from __future__ import annotations

from typing import Any

from flask import Flask, Response, g, redirect, request, url_for
from tidemq.common import errors
from tidemq.common.auth.acl import Action, Permission
from tidemq.common.auth.guard import AuthGuard
from tidemq.common.auth.permissions import ACL_KEY_PREFIX
from tidemq.common.auth.signature import DATE_TIME

OPEN_PATHS = frozenset({"/", "/healthz", "/metrics", "/openapi.json"})
CHALLENGE = 'Bearer realm="tidemq", MQv2-HMAC-SHA1 realm="tidemq"'
GUARD = "tidemq_auth_guard"  # app.extensions key: the AuthGuard when auth is on
CONSOLE_PREFIX = "/console/"
CONSOLE_OPEN = ("/console/login", "/console/logout", "/console/static/")
CONSOLE_COOKIE = "tidemq_console"  # the console's login: a tmq1 bearer token, HttpOnly


def http_permissions(method: str, rule: str, args: dict[str, Any]) -> list[Permission]:
    """What a request to the route `rule` (Flask syntax) with path `args` needs."""
    topic, group = args.get("topic", ""), args.get("group", "")
    if rule.startswith(CONSOLE_PREFIX):
        return []  # a page's API calls are checked as the same user's (console/api.py)
    if rule.endswith("/messages"):
        action = Action.PUB if method == "POST" else Action.SUB
        return [Permission("topic", topic, action)]
    if rule.endswith(("/pop", "/ack", "/invisible")):
        return [Permission("group", group, Action.SUB), Permission("topic", topic, Action.SUB)]
    if rule.endswith("/dlq/redrive"):
        return [Permission("group", group, Action.ADMIN)]
    if rule.endswith("/dlq"):
        return [Permission("group", group, Action.SUB)]
    if rule.startswith("/v1/config/"):
        key = "/" + str(args.get("key", "")).lstrip("/")
        if method != "GET" or key.startswith(ACL_KEY_PREFIX):
            return [Permission("cluster", key, Action.ADMIN)]
        return []
    if rule.startswith("/v1/transactions"):
        return []  # its messages are sent (PUB, checked) through /v1/topics/<topic>/messages
    if method == "GET":
        return []  # listing and describing topics and groups
    if rule.startswith("/v1/topics"):
        return [Permission("topic", topic or "*", Action.ADMIN)]
    if rule.startswith("/v1/groups"):
        return [Permission("group", args.get("name", "") or "*", Action.ADMIN)]
    return [Permission("cluster", rule, Action.ADMIN)]


def credentials_header() -> str:
    """The request's Authorization header or, on a console page, its login cookie's token."""
    header = request.headers.get("Authorization", "")
    if not header and request.path.startswith(CONSOLE_PREFIX):
        token = request.cookies.get(CONSOLE_COOKIE, "")
        if token:
            return f"Bearer {token}"
    return header


def install(app: Flask, guard: AuthGuard) -> None:
    app.extensions[GUARD] = guard

    @app.before_request
    def authenticate() -> Response | None:
        if (request.path in OPEN_PATHS or request.url_rule is None
                or request.path.startswith(CONSOLE_OPEN)):
            return None  # unmatched routes answer 404 / 405 as without auth
        header = credentials_header()
        try:
            user = guard.authenticate_header(header, request.headers.get(DATE_TIME))
        except errors.Unauthenticated:
            if request.path.startswith(CONSOLE_PREFIX):
                return redirect(url_for("tidemq_console.login", next=request.full_path))
            raise
        guard.authorize(user, request.remote_addr or "", http_permissions(
            request.method, request.url_rule.rule, request.view_args or {}))
        g.tidemq_user = user.access_key   # whom client quotas charge (quotas.py)
        return None

    @app.after_request
    def challenge(response: Response) -> Response:
        if response.status_code == 401:
            response.headers["WWW-Authenticate"] = CHALLENGE
        return response
