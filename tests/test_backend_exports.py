"""Where backends are exported: one rule for every kind (docs/development.md, "Where backends
are exported").

1. Each kind's package exports every backend of that kind: ``goagent_py.memory.storage`` every
   ``*Storage``, ``goagent_py.memory.vector`` every ``*Store``, ``goagent_py.providers`` every
   ``*Provider`` and ``*Embedder`` (lazily where a backend needs an extra).
2. ``goagent_py.memory``, the face of memory, re-exports the whole of ``memory.storage`` and of
   ``memory.vector``: a subpackage is re-exported whole, never in part.

The backends are found by reading the source (``ast``), so a backend added without its export
fails here, and no extra needs to be installed.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import goagent_py

PACKAGE_ROOT = Path(goagent_py.__file__).parent

# The package of each kind and the name endings of its backends.
KINDS = {
    "goagent_py.memory.storage": ("Storage",),
    "goagent_py.memory.vector": ("Store",),
    "goagent_py.providers": ("Provider", "Embedder"),
}
# goagent_py.memory re-exports these subpackages whole.
REEXPORTED = ("goagent_py.memory.storage", "goagent_py.memory.vector")


def backends_defined_in(package: str, endings: tuple[str, ...]) -> set[str]:
    """The public classes named like a backend in the package's public modules."""
    folder = PACKAGE_ROOT.joinpath(*package.split(".")[1:])
    found: set[str] = set()
    for path in folder.glob("*.py"):
        if path.name.startswith("_"):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (
                isinstance(node, ast.ClassDef)
                and not node.name.startswith("_")
                and node.name.endswith(endings)
            ):
                found.add(node.name)
    return found


def test_the_backend_finder_sees_every_kind() -> None:
    """The rule's check can fail: it finds the backends named in the issue and in the docs."""
    assert {"PostgresStorage", "SQLiteStorage", "InMemoryStorage"} <= backends_defined_in(
        "goagent_py.memory.storage", KINDS["goagent_py.memory.storage"]
    )
    assert {"PgVectorStore", "ChromaStore", "QdrantStore"} <= backends_defined_in(
        "goagent_py.memory.vector", KINDS["goagent_py.memory.vector"]
    )
    assert {"LlamaCppProvider", "VoyageEmbedder"} <= backends_defined_in(
        "goagent_py.providers", KINDS["goagent_py.providers"]
    )


@pytest.mark.parametrize("package", sorted(KINDS))
def test_each_kinds_package_exports_every_backend_of_its_kind(package: str) -> None:
    module = importlib.import_module(package)
    missing = backends_defined_in(package, KINDS[package]) - set(module.__all__)
    assert not missing, f"{package} does not export {sorted(missing)}"


@pytest.mark.parametrize("subpackage", REEXPORTED)
def test_memory_reexports_each_of_its_subpackages_whole(subpackage: str) -> None:
    memory = importlib.import_module("goagent_py.memory")
    sub = importlib.import_module(subpackage)
    missing = set(sub.__all__) - set(memory.__all__)
    assert not missing, f"goagent_py.memory re-exports {subpackage} in part: add {sorted(missing)}"
    for name in sub.__all__:
        assert getattr(memory, name) is getattr(sub, name), name
