"""The console's login, for a gateway with auth on (docs/security.md).

A browser cannot sign each request, so the login form takes the user's access key and secret
key once, checks them by minting a tmq1 bearer token (tidemq.common.auth.bearer) and
authenticating it like any API call, and keeps only the token: an HttpOnly, SameSite=Strict
cookie scoped to `/console`, which the auth hook accepts on console pages only (auth.py).
The secret is never stored. With auth off there is nothing to log in to.
"""

from __future__ import annotations

from flask import current_app, redirect, render_template, request, url_for
from tidemq.common.auth.bearer import make_token
from tidemq.common.auth.signature import Credentials
from tidemq.common.errors import Unauthenticated
from tidemq.gateway.auth import CONSOLE_COOKIE, CONSOLE_PREFIX, GUARD
from tidemq.gateway.console.views import console_bp

SESSION_S = 8 * 3600  # the token's lifetime: a working day, then log in again


def _next_page() -> str:
    """Where to go after the login: a console page only (never another site)."""
    target = request.values.get("next", "")
    if target.startswith(CONSOLE_PREFIX) and not target.startswith(CONSOLE_PREFIX + "/"):
        return target
    return url_for("tidemq_console.cluster")


@console_bp.route("/login", methods=["GET", "POST"])
def login():
    guard = current_app.extensions.get(GUARD)
    target = _next_page()
    if guard is None:
        return redirect(target)
    if request.method == "GET":
        return render_template("console/login.html", next=target, error=None)
    access_key = request.form.get("access_key", "").strip()
    token = make_token(Credentials(access_key, request.form.get("secret_key", "")),
                       ttl_s=SESSION_S)
    try:
        guard.authenticate_bearer(token)
    except Unauthenticated:  # one sentence for an unknown user and a wrong secret
        return render_template("console/login.html", next=target, access_key=access_key,
                               error="wrong access key or secret key"), 401
    response = redirect(target)
    response.set_cookie(CONSOLE_COOKIE, token, max_age=SESSION_S, path="/console",
                        httponly=True, samesite="Strict", secure=request.is_secure)
    return response


@console_bp.post("/logout")
def logout():
    response = redirect(url_for("tidemq_console.login"))
    response.delete_cookie(CONSOLE_COOKIE, path="/console", httponly=True, samesite="Strict",
                           secure=request.is_secure)
    return response
