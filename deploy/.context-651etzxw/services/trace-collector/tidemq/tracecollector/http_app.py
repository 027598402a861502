"""Flask adapter: JSON query API, health, metrics and the dashboard pages over a SpanStore.

Views only parse the request, call one store or query-module function and render; every
error becomes an application/problem+json reply in one handler (tidemq.common.problems, as in
the gateway), or an HTML error page on the pages people read.

With auth on (the collector's `auth_enabled`, users and rules from the config center as for
every service) everything but /healthz and /metrics needs a user allowed `cluster:traces`
SUB (admins are): spans name topics, groups, message ids and keys. Browsers log in with HTTP
Basic (access key / secret key, so the dashboard should be served over TLS: it is when
`tls_cert_file` is set); programs may send a tmq1 bearer token or RocketMQ's signature.
"""

from __future__ import annotations

import functools
import time

import prometheus_client
from flask import Flask, Response, jsonify, render_template, request
from tidemq.common import problems
from tidemq.common.auth.acl import Action, Permission
from tidemq.common.auth.guard import AuthGuard
from tidemq.common.auth.signature import DATE_TIME
from tidemq.common.errors import InvalidArgument, NotFound, TideMQError
from tidemq.tracecollector import map_drawing, metrics, query
from tidemq.tracecollector.journey import find_journeys
from tidemq.tracecollector.model import parse_trace_id
from tidemq.tracecollector.service_map import service_edges
from tidemq.tracecollector.store import SpanStore
from tidemq.tracecollector.waterfall import build_waterfall

DASHBOARD_TRACE_LIMIT = 50
DEFAULT_MAP_WINDOW = "15m"
MESSAGE_SELECTORS = ("msg_id", "unique_id", "key")
OPEN_PATHS = frozenset({"/healthz", "/metrics"})
READ_TRACES = Permission("cluster", "traces", Action.SUB)
CHALLENGE = 'Basic realm="tidemq traces", Bearer realm="tidemq traces"'
# /metrics must list the collector's counters even before the first Export call.
_COLLECTOR_COUNTERS = (metrics.SPANS_RECEIVED, metrics.SPANS_STORED)


def _trace_spans(store: SpanStore, raw_trace_id: str):
    trace_id = parse_trace_id(raw_trace_id)
    spans = store.trace(trace_id)
    if not spans:
        raise NotFound(f"trace {trace_id} is not stored (never received, or expired)")
    return trace_id, spans


def _message_selector() -> dict[str, str]:
    chosen = {name: (request.args.get(name) or "").strip() for name in MESSAGE_SELECTORS}
    chosen = {name: value for name, value in chosen.items() if value}
    if len(chosen) != 1:
        raise InvalidArgument("give exactly one of msg_id, unique_id or key")
    if any(len(value) > query.MAX_FILTER_CHARS for value in chosen.values()):
        raise InvalidArgument(f"a message id or key is at most {query.MAX_FILTER_CHARS} "
                              "characters")
    return chosen


def _map_window() -> tuple[int, int, str]:
    now_ns = time.time_ns()
    window = request.args.get("since") or DEFAULT_MAP_WINDOW
    return query.parse_since(window, now_ns), now_ns, window


def _html_errors(view):
    """A person is reading these pages: answer errors in HTML, not problem+json."""
    @functools.wraps(view)
    def wrapped(*args, **kwargs):
        try:
            return view(*args, **kwargs)
        except TideMQError as exc:
            page = render_template(
                "error.html", status=exc.http_status, code=exc.code, detail=exc.message
            )
            return page, exc.http_status
    return wrapped


def _install_auth(app: Flask, guard: AuthGuard) -> None:
    @app.before_request
    def authenticate() -> None:
        if request.path in OPEN_PATHS or request.url_rule is None \
                or request.path.startswith("/static/"):
            return  # unmatched routes answer 404 / 405 as without auth
        user = guard.authenticate_header(request.headers.get("Authorization", ""),
                                         request.headers.get(DATE_TIME), basic=True)
        guard.authorize(user, request.remote_addr or "", [READ_TRACES])

    @app.after_request
    def challenge(response: Response) -> Response:
        if response.status_code == 401:  # a browser then asks for the access key and secret
            response.headers["WWW-Authenticate"] = CHALLENGE
        return response


def create_app(store: SpanStore, guard: AuthGuard | None = None) -> Flask:
    app = Flask(__name__)
    app.json.sort_keys = False
    app.jinja_env.globals.update(
        format_duration=query.format_duration,
        format_time=query.format_time,
        format_bytes=query.format_bytes,
    )

    @app.context_processor
    def palette():
        colours = query.service_colours(store.services())
        return {"service_colour": lambda name: query.service_colour(name, colours)}

    problems.install(app)
    if guard is not None:
        _install_auth(app, guard)

    @app.get("/healthz")
    def healthz():
        store.services()  # proves the database is readable
        return jsonify({"status": "ok"})

    @app.get("/metrics")
    def metrics():
        return Response(
            prometheus_client.generate_latest(), mimetype=prometheus_client.CONTENT_TYPE_LATEST
        )

    @app.get("/api/services")
    def api_services():
        return jsonify({"services": store.services()})

    @app.get("/api/traces")
    def api_traces():
        traces = store.search(query.parse_trace_query(request.args, time.time_ns()))
        return jsonify({"traces": [summary.to_json() for summary in traces]})

    @app.get("/api/traces/<raw_trace_id>")
    def api_trace(raw_trace_id: str):
        trace_id, spans = _trace_spans(store, raw_trace_id)
        return jsonify({"trace_id": trace_id, "spans": [span.to_json() for span in spans]})

    @app.get("/api/messages")
    def api_messages():
        with store.reading() as db:
            journeys = find_journeys(db, **_message_selector())
        return jsonify({"messages": [journey.to_json() for journey in journeys]})

    @app.get("/api/service-map")
    def api_service_map():
        since_ns, until_ns, _ = _map_window()
        with store.reading() as db:
            edges = service_edges(db, since_ns, until_ns)
        return jsonify({"since_ns": since_ns, "until_ns": until_ns,
                        "edges": [edge.to_json() for edge in edges]})

    @app.get("/api/stats")
    def api_stats():
        stats = store.stats()
        retention = store.retention
        return jsonify({"spans": stats.span_count, "traces": stats.trace_count,
                        "size_bytes": stats.size_bytes, "file_bytes": stats.file_bytes,
                        "retention": {"max_spans": retention.max_spans,
                                      "max_age_hours": retention.max_age_hours,
                                      "max_bytes": retention.max_bytes}})

    @app.get("/")
    @_html_errors
    def dashboard():
        trace_query = query.parse_trace_query(request.args, time.time_ns(),
                                              DASHBOARD_TRACE_LIMIT)
        traces = store.search(trace_query)
        longest = max((summary.duration_ns for summary in traces), default=0)
        return render_template(
            "traces.html", traces=traces, services=store.services(), q=trace_query,
            args=request.args, longest_ns=max(1, longest), stats=store.stats(),
            retention=store.retention,
        )

    @app.get("/messages")
    @_html_errors
    def messages_page():
        selector = _message_selector()
        with store.reading() as db:
            journeys = find_journeys(db, **selector)
        [(name, value)] = selector.items()
        return render_template("messages.html", journeys=journeys, selector=name, value=value)

    @app.get("/service-map")
    @_html_errors
    def service_map_page():
        since_ns, until_ns, window = _map_window()
        with store.reading() as db:
            edges = service_edges(db, since_ns, until_ns)
        return render_template("service_map.html", edges=edges, window=window,
                               drawing=map_drawing.draw(edges))

    @app.get("/trace/<raw_trace_id>")  # the first dashboard's address, for saved links
    @app.get("/traces/<raw_trace_id>")  # registered first: url_for builds this one
    @_html_errors
    def trace_page(raw_trace_id: str):
        trace_id, spans = _trace_spans(store, raw_trace_id)
        waterfall = build_waterfall(spans)
        services = sorted({span.service_name for span in spans})
        return render_template(
            "trace.html", trace_id=trace_id, waterfall=waterfall, services=services,
            errors=sum(span.status_code == "ERROR" for span in spans),
        )

    return app
