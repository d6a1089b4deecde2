"""Compositions refuse what can only loop: an agent handing off to itself (review9b)."""

from __future__ import annotations

import pytest

from goagent_py import Agent, ConfigurationError
from goagent_py.orchestration import Handoffs
from goagent_py.testing import ScriptedProvider


def test_an_agent_may_not_hand_off_to_itself() -> None:
    a = Agent(provider=ScriptedProvider(), model="m", name="a")
    b = Agent(provider=ScriptedProvider(), model="m", name="b")
    with pytest.raises(ConfigurationError, match=r"'a' -> 'a'.*itself"):
        Handoffs([a, b], routes={"a": ["b", "a"], "b": ["a"]})
