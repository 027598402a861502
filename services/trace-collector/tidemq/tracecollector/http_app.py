"""Flask adapter: JSON query API, health, metrics and the dashboard pages over a SpanStore.

Views only parse the request, call one store method and render; every error becomes an
application/problem+json reply in one handler (tidemq.common.problems, as in the gateway).
"""

from __future__ import annotations

import time

import prometheus_client
from flask import Flask, Response, jsonify, render_template, request
from tidemq.common import problems
from tidemq.common.errors import NotFound, TideMQError
from tidemq.tracecollector import metrics, query
from tidemq.tracecollector.model import parse_trace_id
from tidemq.tracecollector.store import SpanStore
from tidemq.tracecollector.waterfall import build_waterfall

DASHBOARD_TRACE_LIMIT = 50
# /metrics must list the collector's counters even before the first Export call.
_COLLECTOR_COUNTERS = (metrics.SPANS_RECEIVED, metrics.SPANS_STORED)


def _trace_spans(store: SpanStore, raw_trace_id: str):
    trace_id = parse_trace_id(raw_trace_id)
    spans = store.trace(trace_id)
    if not spans:
        raise NotFound(f"trace {trace_id} is not stored (never received, or expired)")
    return trace_id, spans


def create_app(store: SpanStore) -> Flask:
    app = Flask(__name__)
    app.json.sort_keys = False
    app.jinja_env.globals.update(
        format_duration=query.format_duration,
        format_time=query.format_time,
    )

    @app.context_processor
    def palette():
        colours = query.service_colours(store.services())
        return {"service_colour": lambda name: query.service_colour(name, colours)}

    problems.install(app)

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
        traces = store.recent_traces(
            service=request.args.get("service") or None,
            limit=query.parse_limit(request.args.get("limit")),
            since_ns=query.parse_since(request.args.get("since"), time.time_ns()),
        )
        return jsonify({"traces": [summary.to_json() for summary in traces]})

    @app.get("/api/traces/<raw_trace_id>")
    def api_trace(raw_trace_id: str):
        trace_id, spans = _trace_spans(store, raw_trace_id)
        return jsonify({"trace_id": trace_id, "spans": [span.to_json() for span in spans]})

    @app.get("/")
    def dashboard():
        service = request.args.get("service") or None
        traces = store.recent_traces(
            service=service,
            limit=query.parse_limit(request.args.get("limit") or str(DASHBOARD_TRACE_LIMIT)),
        )
        longest = max((summary.duration_ns for summary in traces), default=0)
        return render_template(
            "traces.html", traces=traces, services=store.services(), service=service,
            longest_ns=max(1, longest),
        )

    @app.get("/trace/<raw_trace_id>")
    def trace_page(raw_trace_id: str):
        try:
            trace_id, spans = _trace_spans(store, raw_trace_id)
        except TideMQError as exc:  # a person is reading this page: answer in HTML
            page = render_template(
                "error.html", status=exc.http_status, code=exc.code, detail=exc.message
            )
            return page, exc.http_status
        waterfall = build_waterfall(spans)
        services = sorted({span.service_name for span in spans})
        return render_template(
            "trace.html", trace_id=trace_id, waterfall=waterfall, services=services,
            errors=sum(span.status_code == "ERROR" for span in spans),
        )

    return app
