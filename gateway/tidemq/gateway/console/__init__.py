"""The web console at `/console`: server-rendered pages (Jinja, autoescaped) over the gateway's
own HTTP API (console/api.py). No frontend build, no script needed to read a page; forms that
change state are POSTs with a confirmation step (docs/console.md)."""

from tidemq.gateway.console import login  # noqa: F401  (its routes join the blueprint)
from tidemq.gateway.console.views import console_bp

__all__ = ["console_bp"]
