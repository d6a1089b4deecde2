"""Vector-store fixtures: every backend behind one factory (`pg_dsn` is in tests/conftest.py)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from goagent_py.memory.vector.base import VectorStore

BACKENDS = ("memory", "memory-int8", "sqlite", "sqlite-int8", "pgvector", "qdrant", "chroma")
# The module each backend needs, and the extra that installs it.
BACKEND_EXTRAS = {
    "sqlite": ("sqlite_vec", "vector"),
    "memory-int8": ("simsimd", "simd"),
    "pgvector": ("psycopg", "postgres"),
    "qdrant": ("qdrant_client", "qdrant"),
    "chroma": ("chromadb", "chroma"),
}

StoreFactory = Callable[..., Awaitable[Any]]  # (dimensions=3, metric="cosine") -> store


def unique_name() -> str:
    return f"t_{uuid.uuid4().hex[:12]}"


async def open_store(
    backend: str,
    dimensions: int,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    metric: str = "cosine",
) -> Any:
    """A fresh, empty store of ``backend`` (the test is skipped when its extra is missing)."""
    if backend in BACKEND_EXTRAS:
        module, extra = BACKEND_EXTRAS[backend]
        pytest.importorskip(module, reason=f'needs the "{extra}" extra')
    if backend.endswith("-int8"):
        if metric != "cosine":
            pytest.skip("quantization='int8' is for the cosine metric")
        if backend == "sqlite-int8":
            pytest.importorskip("sqlite_vec", reason='needs the "vector" extra')
        pytest.importorskip("simsimd", reason='needs the "simd" extra')
    if backend == "memory-int8":
        from goagent_py.memory.vector.in_memory import InMemoryVectorStore

        return InMemoryVectorStore(dimensions=dimensions, quantization="int8")
    if backend == "sqlite-int8":
        from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

        return SqliteVecStore(
            tmp_path / "vectors.db",
            table=unique_name(),
            dimensions=dimensions,
            quantization="int8",
        )
    if backend == "memory":
        from goagent_py.memory.vector.in_memory import InMemoryVectorStore

        return InMemoryVectorStore(dimensions=dimensions, metric=metric)
    if backend == "sqlite":
        from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

        return SqliteVecStore(
            tmp_path / "vectors.db",
            table=unique_name(),
            dimensions=dimensions,
            metric=metric,
        )
    if backend == "pgvector":
        from goagent_py.memory.vector.pgvector import PgVectorStore

        dsn = request.getfixturevalue("pg_dsn")
        return PgVectorStore(dsn, table=unique_name(), dimensions=dimensions, metric=metric)
    if backend == "qdrant":
        from goagent_py.memory.vector.qdrant import QdrantStore

        path = tmp_path / f"qdrant-{uuid.uuid4().hex[:8]}"
        return QdrantStore(
            str(path),
            collection=unique_name(),
            dimensions=dimensions,
            metric=metric,
        )
    if backend == "chroma":
        pytest.importorskip("chromadb", reason="the chroma extra is not installed")
        from goagent_py.memory.vector.chroma import ChromaStore

        return ChromaStore(
            tmp_path / f"chroma-{uuid.uuid4().hex[:8]}",
            collection=unique_name(),
            dimensions=dimensions,
            metric=metric,
        )
    raise AssertionError(backend)


@pytest.fixture(params=BACKENDS)
async def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[StoreFactory]:
    """A factory of fresh stores of one backend (each test runs once per backend)."""
    opened: list[VectorStore] = []

    async def make(dimensions: int = 3, metric: str = "cosine") -> Any:
        store = await open_store(request.param, dimensions, tmp_path, request, metric)
        opened.append(store)
        return store

    yield make
    for store in opened:
        close = getattr(store, "aclose", None)
        if close is not None:
            await close()
