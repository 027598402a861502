"""The Flask app: thin views over GatewayBackend; errors rendered by problems.render.

Endpoints (docs/http-api.md has examples):
  GET  /healthz                                  liveness
  GET  /metrics                                  Prometheus text, all workers
  POST /v1/topics                                create {"name", "queues"}
  GET  /v1/topics                                list
  GET  /v1/topics/<topic>                        route + per-queue min/max offsets
  POST /v1/topics/<topic>/messages               send {"messages": [...]}
  GET  /v1/topics/<topic>/queues/<broker>/<queue_id>/messages?offset=&max=&wait_ms=
  POST/GET /v1/groups, GET/PATCH/DELETE /v1/groups/<name>   subscription-group definitions
"""

from __future__ import annotations

import importlib
import importlib.util
import time

from flask import Flask, Response, g, jsonify, request
from opentelemetry import trace
from tidemq.common import errors
from tidemq.gateway import metrics, problems, validation
from tidemq.gateway.group_routes import groups_bp
from tidemq.gateway.settings import GatewaySettings


def create_app(backend, settings: GatewaySettings | None = None) -> Flask:
    """Build the app around `backend` (a GatewayBackend or a test stand-in)."""
    settings = settings or GatewaySettings()
    app = Flask("tidemq.gateway")
    app.config["MAX_CONTENT_LENGTH"] = settings.max_request_bytes
    app.json.sort_keys = False
    app.extensions["tidemq_backend"] = backend
    problems.install(app)
    _register_config_routes(app, getattr(backend, "config", None))
    app.register_blueprint(groups_bp)

    @app.before_request
    def start_timer():
        g.started = time.perf_counter()

    @app.after_request
    def observe(response: Response):
        endpoint = request.url_rule.rule if request.url_rule else "unmatched"
        metrics.REQUESTS.labels(request.method, endpoint, str(response.status_code)).inc()
        metrics.LATENCY.labels(request.method, endpoint).observe(
            time.perf_counter() - g.get("started", time.perf_counter()))
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            response.headers["X-Trace-Id"] = f"{context.trace_id:032x}"
        return response

    @app.get("/healthz")
    def healthz():
        return jsonify({"status": "ok"})

    @app.get("/metrics")
    def prometheus_metrics():
        payload, content_type = metrics.exposition()
        return Response(payload, content_type=content_type)

    @app.post("/v1/topics")
    def create_topic():
        name, queues = validation.parse_topic_create(validation.parse_json(request.get_data()))
        created = backend.create_topic(name, queues)
        body = {"name": name, "queues": queues, "brokers": created.brokers}
        if created.visible:
            return jsonify(body), 201, {"Location": f"/v1/topics/{name}"}
        body["note"] = ("the topic is defined in the config center but its route is not yet "
                        "visible on every broker group; sends may fail with TOPIC_NOT_EXIST "
                        "until brokers have published it")
        return jsonify(body), 202, {"Location": f"/v1/topics/{name}"}

    @app.get("/v1/topics")
    def list_topics():
        return jsonify({"topics": backend.list_topics()})

    @app.get("/v1/topics/<topic>")
    def describe_topic(topic: str):
        validation.validate_topic_name(topic)
        route = backend.route(topic)
        brokers, queues, unavailable = [], [], []
        for layout in route.queues:
            group = route.brokers.get(layout.broker_name)
            brokers.append({
                "broker_name": layout.broker_name, "cluster": group.cluster if group else "",
                "addrs": {str(k): v for k, v in (group.addrs if group else {}).items()},
                "read_queue_nums": layout.read_queue_nums,
                "write_queue_nums": layout.write_queue_nums, "perm": layout.perm,
            })
            try:
                offsets = backend.queue_offsets(topic, layout.broker_name)
            except (errors.ServiceUnavailable, errors.DeadlineExceeded) as exc:
                unavailable.append({"broker_name": layout.broker_name, "code": exc.code,
                                    "detail": exc.message})
                continue
            queues.extend({"broker_name": layout.broker_name, "queue_id": queue_id,
                           "min_offset": low, "max_offset": high}
                          for queue_id, (low, high) in sorted(offsets.items()))
        return jsonify({"name": topic, "brokers": brokers, "queues": queues,
                        "unavailable_brokers": unavailable})

    @app.post("/v1/topics/<topic>/messages")
    def send_messages(topic: str):
        messages = validation.parse_messages(topic, validation.parse_json(request.get_data()),
                                             settings.max_message_size)
        results = backend.send(messages)
        metrics.MESSAGES_SENT.inc(len(results))
        return jsonify({"results": [{
            "status": r.status.name, "msg_id": r.msg_id, "unique_id": r.unique_id,
            "broker_name": r.broker_name, "queue_id": r.queue_id, "queue_offset": r.queue_offset,
        } for r in results]}), 201

    @app.get("/v1/topics/<topic>/queues/<broker_name>/<int(signed=True):queue_id>/messages")
    def fetch_messages(topic: str, broker_name: str, queue_id: int):
        validation.validate_topic_name(topic)
        offset = validation.parse_int(request.args, "offset", 0, 0, 2**63 - 1)
        max_messages = validation.parse_int(request.args, "max", 32, 1,
                                            settings.max_pull_messages)
        wait_ms = validation.parse_int(request.args, "wait_ms", 0, 0, settings.max_pull_wait_ms)
        if queue_id < 0:
            raise errors.InvalidArgument(f"queue id must be >= 0, got {queue_id}")
        result = backend.pull(topic, broker_name, queue_id, offset, max_messages, wait_ms)
        metrics.MESSAGES_FETCHED.inc(len(result.messages))
        return jsonify({
            "status": result.status.name,
            "messages": [validation.message_json(m) for m in result.messages],
            "next_offset": result.next_offset,
            "min_offset": result.min_offset,
            "max_offset": result.max_offset,
        })

    return app


CONFIG_ROUTES_MODULE = "tidemq.gateway.config_routes"


def _register_config_routes(app: Flask, config_client) -> None:
    """Mount the config-center endpoints (/v1/config/...) when that module is installed.

    Absent module: the gateway runs without them. Present but broken: the import error
    propagates, so a bad deploy fails at start instead of silently losing endpoints.
    """
    if importlib.util.find_spec(CONFIG_ROUTES_MODULE) is None:
        return
    module = importlib.import_module(CONFIG_ROUTES_MODULE)
    if config_client is not None:
        app.extensions[getattr(module, "EXTENSION", "tidemq.config_client")] = config_client
    app.register_blueprint(module.config_bp)
