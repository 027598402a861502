"""The Flask app: the blueprints mounted over a GatewayBackend; every error rendered as
problem+json by one handler.

Endpoints (docs/http-api.md has examples):
  GET  /                                         a browser: to /console; a client: an index
  GET  /healthz, /metrics                        liveness; Prometheus text, all workers (here)
  /v1/topics...                                  topics and messages (topic_routes.py)
  /v1/groups...                                  subscription-group definitions (group_routes.py)
  /v1/groups/<g>/topics/<t>/pop|ack|invisible    pop consumption (consume_routes.py)
  /v1/groups/<g>/dlq[/redrive]                   dead letters (consume_routes.py)
  /v1/transactions[/<id>/commit|rollback]        transactions (transaction_routes.py)
  GET /openapi.json                              this API, generated from the routes (openapi.py)
  /v1/config/...                                 the config center's keys (config_routes.py)
  /v1/cluster[/control-plane], /v1/consumer-groups..., /v1/messages/<id>,
  GET /v1/topics/<t>/messages
                                                 the operator's reads (admin_routes.py)
  /console/...                                   the web console, HTML over this API (console/)
"""

from __future__ import annotations

import re
import time

from flask import Blueprint, Flask, Response, g, jsonify, redirect, request
from opentelemetry import trace
from tidemq.common import problems, tracing
from tidemq.common.auth.guard import AuthGuard, StaticAcl
from tidemq.common.auth.signature import Credentials
from tidemq.gateway import auth, config_routes, metrics, quotas, topic_routes
from tidemq.gateway.admin_routes import admin_bp
from tidemq.gateway.config_routes import config_bp
from tidemq.gateway.console import console_bp
from tidemq.gateway.consume_routes import consume_bp
from tidemq.gateway.group_routes import groups_bp
from tidemq.gateway.jsonio import OrjsonProvider
from tidemq.gateway.openapi import openapi_bp
from tidemq.gateway.settings import GatewaySettings
from tidemq.gateway.topic_routes import topics_bp
from tidemq.gateway.transaction_routes import transactions_bp

MAX_SERIES = 1024  # (method, route, status) metric children kept per worker
_CONVERTER = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")
ops_bp = Blueprint("tidemq_ops", __name__)


# What `GET /` lists: where a newcomer goes from the address `make up` prints.
INDEX = {
    "service": "TideMQ HTTP gateway",
    "console": "/console/",
    "openapi": "/openapi.json",
    "health": "/healthz",
    "metrics": "/metrics",
    "api": "/v1",
    "docs": "docs/http-api.md",
}


@ops_bp.get("/")
def index():
    """Where to go from here: a browser to the console, a client an index of what is served.
    ---
    get:
      responses:
        "200":
          description: the index (console, OpenAPI document, health, metrics); a client that
            prefers text/html over JSON is redirected (302) to /console instead
          content:
            application/json:
              schema:
                type: object
                properties:
                  service: {type: string}
                  console: {type: string}
                  openapi: {type: string}
                  health: {type: string}
                  metrics: {type: string}
                  api: {type: string}
                  docs: {type: string}
        "302":
          description: a browser (Accept prefers text/html) is sent to the console
    """
    accepted = request.accept_mimetypes
    if accepted["text/html"] > accepted["application/json"]:
        return redirect("/console/", code=302)
    return jsonify(INDEX)


@ops_bp.get("/healthz")
def healthz():
    return jsonify({"status": "ok"})


@ops_bp.get("/metrics")
def prometheus_metrics():
    payload, content_type = metrics.exposition()
    return Response(payload, content_type=content_type)


def readable_route(rule: str) -> str:
    """Flask's `/v1/topics/<topic>/queues/<broker>/<int:queue_id>/messages` as the docs write
    it, `/v1/topics/{topic}/queues/{broker}/{queue_id}/messages` (trace names)."""
    return _CONVERTER.sub(r"{\1}", rule)


def create_app(backend, settings: GatewaySettings | None = None) -> Flask:
    """Build the app around `backend` (a GatewayBackend or a test stand-in)."""
    settings = settings or GatewaySettings()
    app = Flask("tidemq.gateway")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_bytes
    app.json = OrjsonProvider(app)  # jsonio.py: orjson, answering what Flask's would
    app.extensions[topic_routes.BACKEND] = backend
    app.extensions[topic_routes.SETTINGS] = settings
    if getattr(backend, "config", None) is not None:
        app.extensions[config_routes.EXTENSION] = backend.config
    problems.install(app)
    if settings.auth_enabled:  # docs/security.md
        acl = getattr(backend, "acl", None) or StaticAcl()
        auth.install(app, AuthGuard("gateway-http", acl, skew_s=settings.auth_skew_s,
                                    trusted=Credentials(settings.access_key, settings.secret_key)))
    if getattr(backend, "quotas", None) is not None:  # after auth: it charges the user
        quotas.install(app, backend.quotas)
    for blueprint in (ops_bp, topics_bp, groups_bp, consume_bp, transactions_bp, config_bp,
                      openapi_bp, admin_bp, console_bp):
        app.register_blueprint(blueprint)

    @app.before_request
    def start_timer():
        g.started = time.perf_counter()

    # (method, route, status) -> its request counter and latency histogram, looked up once
    series: dict[tuple[str, str, int], tuple] = {}

    @app.after_request
    def observe(response: Response):
        current = request._get_current_object()  # one proxy look-up, not one per attribute
        rule = current.url_rule
        key = (current.method, rule.rule if rule is not None else "unmatched",
               response.status_code)
        counted = series.get(key)
        if counted is None:
            counted = (metrics.REQUESTS.labels(key[0], key[1], str(key[2])),
                       metrics.LATENCY.labels(key[0], key[1]))
            if len(series) < MAX_SERIES:  # a client's made-up methods must not grow it
                series[key] = counted
        counted[0].inc()
        started = g.get("started")
        counted[1].observe(time.perf_counter() - started if started else 0.0)
        span = trace.get_current_span()
        if rule is not None and span.is_recording():
            span.update_name(f"{current.method} {readable_route(rule.rule)}")
        context = span.get_span_context()
        if context.is_valid and context.trace_flags.sampled:  # a trace the collector will have
            response.headers["X-Trace-Id"] = f"{context.trace_id:032x}"
        return response

    return app


def untraced_when_quiet(traced: Flask, plain: Flask):
    """The WSGI app of a gateway that exports spans: a request whose root span the sampler
    would drop (a quiet operation, e.g. `pop`, `healthz`: tidemq.common.sampling) and that
    carries no trace context is served by `plain`, the same app over the same backend without
    OpenTelemetry's Flask instrumentation; every other request by `traced`.

    Why: the instrumentation builds a request's attributes, starts the span, extracts and
    attaches its context and wraps the answer before the sampler's verdict matters, and a
    dropped root drops every span under it anyway (the broker's Pop follows its unsampled
    parent, or is itself a quiet root): about 80 µs per pop in the traced gateway's profile,
    for nothing anyone sees (docs/http-api.md, "What a request costs"). A pop that found messages
    still records its `receive` span, as a trace of its own; a client that sends `traceparent`
    gets the traced app, and the quiet list is read live (`trace_quiet_operations`)."""

    def serve(environ, start_response):
        if "HTTP_TRACEPARENT" not in environ and tracing.quiet_root(
                f"{environ.get('REQUEST_METHOD', '')} {environ.get('PATH_INFO', '')}"):
            return plain(environ, start_response)
        return traced(environ, start_response)

    return serve
