"""The `tidemq.client` package loads its exported names on first use.

`tidemq.client.cli` (the `tidemq` command) and the gateways import modules of this package;
importing the package must not import every client in it. Each import check runs in a fresh
interpreter, whose `sys.modules` says what was imported.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
import tidemq.client

HEAVY = ("grpc", "pybreaker", "redis", "structlog", "google.protobuf", "opentelemetry",
         "tidemq.client.admin", "tidemq.client.producer", "tidemq.client.consumer",
         "tidemq.configclient.client", "tidemq.common.rpc", "tidemq.common.errors")


def imported_after(code: str) -> set[str]:
    """The modules a fresh interpreter has imported after running `code`."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            timeout=120, check=True)
    return set(json.loads(result.stdout.splitlines()[-1]))


def heavy_in(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


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
