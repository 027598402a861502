"""The live quiet list in a traced process (a child interpreter: the global tracer provider
can be set once per process): before init_tracing nothing changes; after it, a new list —
as the gateway's and broker's dynamic-setting hooks apply it — decides the next root span."""

from __future__ import annotations

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent('''
    from opentelemetry import trace
    from tidemq.common import tracing
    from tidemq.common.setting_rules import TRACE_QUIET_OPERATIONS, parse_quiet_operations
    from tidemq.gateway.dynamic import apply_breaker_setting

    assert tracing.set_quiet_operations(["Pull"]) is False  # no provider yet
    tracing.init_tracing("live-quiet", instrument_grpc=False)
    tracer = trace.get_tracer("test")

    def recorded(name):
        with tracer.start_as_current_span(name) as span:
            return span.is_recording()

    seen = [recorded("/tidemq.v1.NameServerService/RegisterBroker"), recorded("GET /healthz")]
    apply_breaker_setting(TRACE_QUIET_OPERATIONS, parse_quiet_operations("healthz"))
    seen += [recorded("/tidemq.v1.NameServerService/RegisterBroker"), recorded("GET /healthz")]
    assert tracing.set_quiet_operations(()) is True
    seen.append(recorded("GET /healthz"))
    print(seen)
''')


def test_a_new_quiet_list_decides_the_next_root_span():
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[False, False, True, False, True]"
