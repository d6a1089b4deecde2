"""The package's import graph: no circles, and no import upward across the layers.

docs/architecture.md, "Layers", is the rule this file checks. Every import counts: top-level,
inside functions and under ``TYPE_CHECKING``. A circle is broken by moving the shared piece down
into a module both sides may import, never by hiding the import.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "goagent_py"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (by file: a package means its __init__)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".")
                    if not is_package:
                        anchor = anchor[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in node.names:
                    sub = f"{base}.{alias.name}"
                    targets.append(sub if sub in modules else base)
            graph[name].update(t for t in targets if t in modules and t != name)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


# Bottom to top: a module may import its own layer and the ones below, never one above.
LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("core", ("goagent_py", "goagent_py.resilience")),  # the top-level modules
    ("memory", ("goagent_py.memory",)),
    ("small models", ("goagent_py.small_models",)),
    ("providers", ("goagent_py.providers",)),
    ("rag", ("goagent_py.rag",)),
    ("orchestration", ("goagent_py.orchestration",)),
    ("integrations", ("goagent_py.mcp", "goagent_py.a2a", "goagent_py.otel", "goagent_py.durable")),
    ("applications", ("goagent_py.cli", "goagent_py.coding", "goagent_py.serve")),
]
# The core programs against the memory contracts (the protocols in memory/base.py), which live
# with the memory they describe: the one import of the core into a higher layer.
CONTRACTS = {"goagent_py.memory.base"}
# The public face re-exports from every layer, and an entry point may start any application.
ANYWHERE = {"goagent_py"}


def layer_of(module: str) -> int:
    if module.split(".")[-1] == "__main__":
        return len(LAYERS) - 1  # an entry point is an application
    best = (-1, 0)
    for rank, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                best = max(best, (len(prefix), rank))
    return best[1]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    found = []
    for module, targets in sorted(graph.items()):
        if module in ANYWHERE:
            continue
        for target in sorted(targets):
            if target in CONTRACTS and layer_of(module) == 0:
                continue
            if layer_of(target) > layer_of(module):
                found.append(
                    f"{module} ({LAYERS[layer_of(module)][0]}) imports {target} "
                    f"({LAYERS[layer_of(target)][0]})"
                )
    return found


def test_layers_are_assigned_by_the_longest_prefix() -> None:
    assert LAYERS[layer_of("goagent_py.agent")][0] == "core"
    assert LAYERS[layer_of("goagent_py.resilience._retry")][0] == "core"
    assert LAYERS[layer_of("goagent_py.memory.vector.base")][0] == "memory"
    assert LAYERS[layer_of("goagent_py.cli._common")][0] == "applications"
    assert LAYERS[layer_of("goagent_py.mcp.__main__")][0] == "applications"


def test_an_upward_import_is_found() -> None:
    graph = {"goagent_py.agent": {"goagent_py.serve.app"}, "goagent_py.serve.app": set()}
    assert len(upward_imports(graph)) == 1


def test_no_module_imports_a_layer_above_its_own() -> None:
    found = upward_imports(import_graph())
    assert found == [], "imports across the layers, upward:\n" + "\n".join(found)


def test_the_graph_sees_imports_of_every_kind() -> None:
    graph = import_graph()
    assert "goagent_py.messages" in graph["goagent_py.agent"]  # a top-level import
    assert len(graph) > 50


def test_a_circle_is_found() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_package_has_no_import_circles() -> None:
    found = circles(import_graph())
    assert found == [], "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)
