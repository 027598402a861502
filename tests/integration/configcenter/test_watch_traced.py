"""A watch closes cleanly in a traced process: with the gRPC client instrumentation on (as in
every ServiceRuntime), the stream must still be the cancellable gRPC call, not a wrapper
generator without cancel() (which made close() raise and leak the stream)."""

from __future__ import annotations

import subprocess
import sys

from tests.support.processes import dead_endpoint

SCRIPT = """
import sys
from tidemq.common.tracing import init_tracing
init_tracing("watch-test", sys.argv[2])  # instrumented only when exporting
from tidemq.client.config import ConfigClient
with ConfigClient(sys.argv[1]) as config:
    written = config.put("/traced/a", b"1")
    with config.watch("/traced/", start_revision=written.revision) as watch:
        event = watch.poll(10)
        assert event is not None and event.kv.key == "/traced/a", event
print("closed")
"""


def test_watch_closes_in_a_traced_process(config_center):
    done = subprocess.run([sys.executable, "-c", SCRIPT, config_center.addr,
                           dead_endpoint()],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "closed"
