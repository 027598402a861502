"""What the common layer imports only when it is used, not when a process imports it.

Each service and each `tidemq` command is a new process: structlog (with rich's traceback and
pygments), pybreaker (which imports redis-py when that is installed) and PyYAML are imported
where they are first needed, so a process that never logs, never calls another service or reads
no YAML file does not pay for them. Each check runs in a fresh interpreter, whose `sys.modules`
says what was imported.
"""

from __future__ import annotations

import json
import subprocess
import sys


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True)


def imported_after(code: str) -> set[str]:
    """The modules a fresh interpreter has imported after running `code`."""
    result = run(f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))")
    return set(json.loads(result.stdout.splitlines()[-1]))


def test_logging_imports_structlog_on_first_use():
    result = run("from tidemq.common.logs import get_logger\n"
                 "import sys\n"
                 "log = get_logger('probe')\n"
                 "assert 'structlog' not in sys.modules\n"
                 "log.info('first line', n=1)")
    assert "first line" in result.stdout and "n=1" in result.stdout


def test_a_logger_logs_as_structlog_does():
    from structlog.testing import capture_logs
    from tidemq.common.logs import get_logger

    log = get_logger("probe")
    with capture_logs() as logs:
        log.bind(queue=3).warning("held", offset=7)
    assert logs == [{"queue": 3, "offset": 7, "event": "held", "log_level": "warning"}]


def test_a_service_imports_pybreaker_with_its_first_client_only():
    """tidemq.common.server (every service's runtime) takes its gRPC options and security from
    tidemq.common.rpc; a name server without a config center never makes a client."""
    served = imported_after("import tidemq.common.server")
    assert not {"pybreaker", "redis", "yaml"} & served
    called = imported_after("from tidemq.common import rpc\n"
                            "from tidemq.v1.nameserver_pb2_grpc import NameServerServiceStub\n"
                            "rpc.RpcClient('127.0.0.1:1', NameServerServiceStub)")
    assert "pybreaker" in called


def test_the_health_probe_imports_grpc_and_its_stubs_only():
    """Compose runs `python -m tidemq.common.healthcheck` in every container every few seconds
    for as long as the stack runs: it must not pay for the breaker, Redis, logging or YAML."""
    probed = imported_after("from tidemq.common import healthcheck\n"
                            "healthcheck.grpc_healthy('127.0.0.1:1', timeout=0.2)\n"
                            "healthcheck.http_healthy('http://127.0.0.1:1/', timeout=0.2)")
    assert "grpc_health.v1.health_pb2_grpc" in probed
    assert not {"pybreaker", "redis", "structlog", "yaml", "opentelemetry"} & {
        name.split(".")[0] for name in probed}
