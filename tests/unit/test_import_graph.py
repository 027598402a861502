"""No import circles in the product code, and callers reach brokers only through the channel.

The graph is read with the standard library's `ast` from every module of the workspace's
`tidemq.*` packages (generated protobuf code left out): every `import` and `from ... import`
counts, at module level, inside functions and under `if TYPE_CHECKING:` alike, because each
is a place where one module needs another. A circle is reported as the modules it passes
through, so the failure says which imports to look at. Callers of brokers (the SDK, the
gateways, the Spark source and sink) import neither the wire protocol nor the BrokerService
stubs: the broker channel (tidemq.common.channel) alone chooses how a call travels. Run alone:

    uv run pytest -q tests/unit/test_import_graph.py
"""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GENERATED = "tidemq.v1"  # protoc output (make proto)


def workspace_members() -> list[str]:
    """The uv workspace's member patterns (pyproject.toml), each holding part of `tidemq`."""
    with (ROOT / "pyproject.toml").open("rb") as file:
        return tomllib.load(file)["tool"]["uv"]["workspace"]["members"]


def product_modules() -> dict[str, Path]:
    """Module name -> file, for every product module of the `tidemq` namespace."""
    modules: dict[str, Path] = {}
    for pattern in workspace_members():
        for member in sorted(ROOT.glob(pattern)):
            for path in sorted((member / "tidemq").rglob("*.py")):
                parts = path.relative_to(member).with_suffix("").parts
                if parts[-1] == "__init__":
                    parts = parts[:-1]
                name = ".".join(parts)
                if name != GENERATED and not name.startswith(GENERATED + "."):
                    modules[name] = path
    return modules


def imported_names(module: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    """Every module an import statement in `path` asks for (relative ones resolved): `from
    pkg import name` asks for `pkg.name` where that is a module, else for `pkg`."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[:len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                yield f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    """Module -> the product modules it imports."""
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets = {name for name in imported_names(module, path, modules) if name in modules}
        graph[module] = targets - {module}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each as one
    circle through them: its first module, the path back to it."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[set[str]] = []

    def visit(node: str) -> None:  # recursion depth is bounded by the module count
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                components.append(component)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return [one_circle(graph, component) for component in components]


def one_circle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest path from the component's first module back to itself (breadth first)."""
    start = min(component)
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for target in sorted(graph[node] & component):
                if target == start:
                    return paths[node] + [start]
                if target not in paths:
                    paths[target] = paths[node] + [target]
                    following.append(target)
        frontier = following
    raise AssertionError(f"{sorted(component)} is not strongly connected")


def test_the_graph_sees_the_product_code():
    modules = product_modules()
    graph = import_graph(modules)
    assert {"tidemq.common.server", "tidemq.broker.app", "tidemq.client.producer",
            "tidemq.configclient.client", "tidemq.gateway.app", "tidemq.analytics.source",
            "tidemq.configcenter.servicer", "tidemq.nameserver.registry",
            "tidemq.gatewaygrpc.servicer"} <= set(modules)
    assert "tidemq.broker.store.commitlog" in graph["tidemq.broker.store.store"]  # relative
    assert "tidemq.common.errors" in graph["tidemq.common.server"]  # `from pkg import mod`


def test_a_circle_is_found_and_printed():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert circles(graph) == [["a", "b", "c", "a"]]


def test_no_import_circles():
    found = circles(import_graph(product_modules()))
    assert not found, "import circles in the product code:\n" + "\n".join(
        "  " + " -> ".join(circle) for circle in found)


def test_the_common_library_imports_nothing_above_it():
    graph = import_graph(product_modules())
    above = {f"{module} -> {target}" for module, targets in graph.items()
             if module.startswith("tidemq.common") for target in targets
             if not target.startswith("tidemq.common")}
    assert not above, "tidemq.common imports packages above it:\n  " + "\n  ".join(sorted(above))


CALLERS = ("tidemq.client", "tidemq.gateway", "tidemq.gatewaygrpc", "tidemq.gatewaykafka",
           "tidemq.analytics")
TRANSPORTS = ("tidemq.common.wire", "tidemq.v1.broker_pb2_grpc")


def asked_for(path: Path) -> Iterator[str]:
    """Every dotted name an import in `path` asks for, generated modules included: `from pkg
    import name` asks for `pkg` and for `pkg.name`."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def transport_imports(modules: dict[str, Path]) -> set[str]:
    return {f"{module} -> {name}" for module, path in modules.items()
            if module.startswith(CALLERS) for name in asked_for(path)
            if name.startswith(TRANSPORTS)}


def test_callers_reach_brokers_only_through_the_channel():
    found = transport_imports(product_modules())
    assert not found, ("import the broker channel (tidemq.common.channel) instead of a "
                       "transport:\n  " + "\n  ".join(sorted(found)))


def test_a_caller_importing_a_transport_is_found(tmp_path):
    wired = tmp_path / "wired.py"
    wired.write_text("from tidemq.common.wire.client import WireConnection\n")
    stubbed = tmp_path / "stubbed.py"
    stubbed.write_text("from tidemq.v1 import broker_pb2, broker_pb2_grpc\n")
    plain = tmp_path / "plain.py"
    plain.write_text("from tidemq.v1 import broker_pb2\nfrom tidemq.common import channel\n")
    assert transport_imports({"tidemq.client.wired": wired, "tidemq.gateway.stubbed": stubbed,
                              "tidemq.analytics.plain": plain}) == {
        "tidemq.client.wired -> tidemq.common.wire.client",
        "tidemq.client.wired -> tidemq.common.wire.client.WireConnection",
        "tidemq.gateway.stubbed -> tidemq.v1.broker_pb2_grpc"}
