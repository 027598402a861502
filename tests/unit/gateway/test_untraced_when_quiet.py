"""A traced gateway serves a request whose root span the sampler would drop (a quiet
operation such as `pop`, and no trace context from the client) with its uninstrumented app,
and every other request with its instrumented one; the live quiet list decides. Run in a child
interpreter: the global tracer provider can be set once per process."""

from __future__ import annotations

import subprocess
import sys
import textwrap

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
