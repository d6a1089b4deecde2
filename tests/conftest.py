"""Shared fixtures for the test suite."""

from __future__ import annotations

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
