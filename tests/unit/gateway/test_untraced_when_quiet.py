"""A traced gateway serves a request whose root span the sampler would drop (a quiet
operation such as `pop`, and no trace context from the client) with its uninstrumented app,
and every other request with its instrumented one; the live quiet list decides. Run in a child
interpreter: the global tracer provider can be set once per process."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent('''
    from tidemq.common import tracing
    from tidemq.gateway.app import untraced_when_quiet

    def named(name):
        def app(environ, start_response):
            return [name]
        return app

    serve = untraced_when_quiet(named(b"traced"), named(b"plain"))

    def served(method, path, **headers):
        environ = {"REQUEST_METHOD": method, "PATH_INFO": path, **headers}
        return serve(environ, None)[0].decode()

    POP = "/v1/groups/billing/topics/orders/pop"
    ACK = "/v1/groups/billing/topics/orders/ack"
    seen = [served("POST", POP)]  # before init_tracing: no sampler, nothing is quiet
    tracing.init_tracing("untraced-when-quiet", instrument_grpc=False)
    parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    seen += [served("POST", POP), served("POST", POP, HTTP_TRACEPARENT=parent),
             served("POST", ACK), served("GET", "/healthz"), served("POST", "/v1/topics/pop/messages")]
    tracing.set_quiet_operations(["healthz"])  # the live setting: pops are traced again
    seen += [served("POST", POP), served("GET", "/healthz")]
    print(seen)
''')


def test_quiet_roots_without_trace_context_skip_the_instrumentation():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == str(
        ["traced", "plain", "traced", "traced", "plain", "traced", "traced", "plain"])


TRACE_ID_SCRIPT = textwrap.dedent('''
    from opentelemetry.instrumentation.flask import FlaskInstrumentor
    from tidemq.common import tracing
    from tidemq.gateway.app import create_app
    from tidemq.gateway.settings import GatewaySettings

    from tests.unit.gateway.test_http_api import MAX_MESSAGE_SIZE, StubBackend

    tracing.init_tracing("x-trace-id", instrument_grpc=False)  # a provider, no exporter
    app = create_app(StubBackend(), GatewaySettings(max_message_size=MAX_MESSAGE_SIZE))
    FlaskInstrumentor().instrument_app(app)
    client = app.test_client()
    parent = {"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
    print([client.get("/v1/topics").headers.get("X-Trace-Id", ""),
           client.get("/healthz").headers.get("X-Trace-Id", ""),
           client.get("/healthz", headers=parent).headers.get("X-Trace-Id", "")])
''')


def test_x_trace_id_is_answered_only_for_a_recorded_trace():
    """docs/http-api.md: no X-Trace-Id for a request whose trace the sampler drops (a quiet
    `healthz` without trace context); a sampled request, or a quiet one under a sampled
    `traceparent`, answers its trace id."""
    done = subprocess.run([sys.executable, "-c", TRACE_ID_SCRIPT], capture_output=True,
                          text=True, timeout=60, cwd=Path(__file__).resolve().parents[3])
    assert done.returncode == 0, done.stderr
    sampled, quiet, under_parent = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert re.fullmatch(r"[0-9a-f]{32}", sampled), sampled
    assert quiet == ""
    assert under_parent == "0af7651916cd43dd8448eb211c80319c"
