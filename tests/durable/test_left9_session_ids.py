"""A durable session id may not hold the unit separator (``\\x1f``): it marks a session's
parts, so ``a\\x1fb`` would be read as a part of ``a`` (and cleared with it). Such an id is
refused before anything runs; the parts themselves still read (docs/scaling-out.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent
from goagent_py.durable import DurableAgent
from goagent_py.errors import ConfigurationError
from goagent_py.memory.storage._parts import part_session
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import user_message
from goagent_py.testing import ScriptedProvider


def _durable() -> DurableAgent:
    return DurableAgent(Agent(provider=ScriptedProvider(), name="calc"), provider="fn:x")


class _NoClient:
    """Fails on any use: the id is refused before the client is touched."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the client was used ({name})")


@pytest.mark.parametrize("method", ["start", "execute"])
async def test_a_session_id_holding_the_part_separator_is_refused(method: str) -> None:
    # was: the run started, and its conversation was a part of session "a"
    with pytest.raises(ConfigurationError, match=r"session_id .*\\x1f"):
        await getattr(_durable(), method)(_NoClient(), "hi", session_id="a\x1fb")


async def test_run_in_a_workflow_refuses_it_too() -> None:
    with pytest.raises(ConfigurationError, match=r"session_id .*\\x1f"):
        await _durable().run("hi", session_id="a\x1fb")


async def test_a_part_stored_before_still_reads(tmp_path: Path) -> None:
    db = str(tmp_path / "m.db")
    part = SQLiteStorage(db, session_id=part_session("s", "ref-1"))
    await part.append([user_message("kept")])
    await part.aclose()
    again = SQLiteStorage(db, session_id=part_session("s", "ref-1"))
    try:
        assert [m.text for m in await again.load()] == ["kept"]
    finally:
        await again.aclose()
