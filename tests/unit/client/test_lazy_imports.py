"""The `tidemq` command imports a client only when a command needs one, and the `tidemq.client`
package loads its exported names on first use.

Every `tidemq` invocation is a new process, and the clients' imports (gRPC, protobuf stubs,
pybreaker, which imports redis-py when it is installed, structlog with rich's traceback and
pygments) are most of its start-up: `tidemq --help`, a command's --help and a usage error need
none of them. Each check runs in a fresh interpreter, whose `sys.modules` says what was
imported, so an eager import added back anywhere on the way fails here.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import tidemq.client

# Imported by the commands that call the clients, never to build the command line.
HEAVY = ("grpc", "pybreaker", "redis", "structlog", "google.protobuf", "opentelemetry",
         "tidemq.client.admin", "tidemq.client.producer", "tidemq.client.consumer",
         "tidemq.configclient.client", "tidemq.common.rpc", "tidemq.common.errors")


def imported_after(code: str, env: dict[str, str] | None = None,
                   cwd: Path | None = None) -> set[str]:
    """The modules a fresh interpreter has imported after running `code`."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=120, check=True, env=env, cwd=cwd)
    return set(json.loads(result.stdout.splitlines()[-1]))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


def test_importing_the_command_line_imports_no_client():
    assert heavy_in(imported_after("import tidemq.client.cli")) == []


HELP_AND_USAGE_ERRORS = [["--help"], ["topic", "create", "--help"], ["send", "--help"],
                         ["config", "get", "--help"], ["acl", "user", "add", "--help"],
                         ["consume"]]  # the last: a usage error (TOPIC missing)


def test_help_and_usage_errors_import_no_client():
    code = ("from typer.testing import CliRunner\n"
            "from tidemq.client.cli import app\n"
            f"for args in {HELP_AND_USAGE_ERRORS!r}:\n"
            "    result = CliRunner().invoke(app, args)\n"
            "    assert result.exit_code in (0, 1), (args, result.output)\n"
            "    assert 'Usage' in result.output or 'error INVALID_ARGUMENT' in result.output, "
            "(args, result.output)")
    assert heavy_in(imported_after(code)) == []


def test_a_command_that_calls_a_client_imports_it():
    """The other side: the imports moved into the commands are still made when they run."""
    code = ("from typer.testing import CliRunner\n"
            "from tidemq.client.cli import app\n"
            "result = CliRunner().invoke(app, ['--namesrv', '127.0.0.1:1', '--timeout', '0.2',"
            " 'cluster', 'list'])\n"
            "assert result.exit_code == 1, result.output")
    assert {"tidemq.client.admin", "grpc", "pybreaker"} <= imported_after(code)


def test_a_command_exports_spans_only_when_a_collector_is_known(tmp_path):
    """No endpoint (no variable, no `make up` endpoint file above the working directory): the
    OTLP exporter is never imported; TIDEMQ_OTLP_ENDPOINT: it is, and the command still ends
    (its flush gives up on a collector that does not answer)."""
    env = {name: value for name, value in os.environ.items()
           if name not in ("TIDEMQ_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT",
                           "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")}
    env["PYTHONPATH"] = os.pathsep.join(sys.path)
    code = ("from typer.testing import CliRunner\n"
            "from tidemq.client.cli import app\n"
            "result = CliRunner().invoke(app, ['--namesrv', '127.0.0.1:1', '--timeout', '0.2',"
            " 'send', 'orders', 'hello'])\n"
            "assert result.exit_code == 1, result.output")
    exporter = "opentelemetry.exporter.otlp.proto.grpc.trace_exporter"
    assert exporter not in imported_after(code, env, tmp_path)
    assert exporter in imported_after(code, {**env, "TIDEMQ_OTLP_ENDPOINT": "127.0.0.1:1"},
                                      tmp_path)


def test_the_package_names_load_on_first_use():
    assert heavy_in(imported_after("import tidemq.client")) == []
    assert "tidemq.client.producer" in imported_after("from tidemq.client import Producer")


def test_every_exported_name_is_its_modules_object():
    for name in tidemq.client.__all__:
        value = getattr(tidemq.client, name)
        module = sys.modules[f"tidemq.client.{tidemq.client._SOURCES[name]}"]
        assert value is getattr(module, name), name
    assert set(tidemq.client.__all__) <= set(dir(tidemq.client))
    with pytest.raises(AttributeError):
        tidemq.client.NoSuchName  # noqa: B018


def test_the_lazy_table_matches_the_type_checking_imports_and_all():
    """__init__.py names each export three times (the TYPE_CHECKING imports for type checkers
    and the import-graph test, _SOURCES for loading, __all__): they must agree."""
    tree = ast.parse(Path(tidemq.client.__file__).read_text())
    typed = {f"{alias.asname or alias.name}": node.module.rpartition(".")[2]
             for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
             and (node.module or "").startswith("tidemq.client.") for alias in node.names}
    assert typed == tidemq.client._SOURCES
    assert sorted(tidemq.client.__all__) == sorted(typed)
