"""A served agent's client is forgotten only when no run holds its conversation
(goagent_py/memory/_clients.py ``forget_client``; docs/a2a.md "How long a context is kept"): a
server's ledger knows its own messages only, so a client idle in its view may be running on
another worker on the same storage (here: another storage of the same SQLite conversation).
Before, its conversation was deleted under that run."""

from __future__ import annotations

from pathlib import Path

from goagent_py import Agent
from goagent_py.memory import ShortTermMemory, SQLiteStorage
from goagent_py.memory._clients import client_session_id, forget_client
from goagent_py.messages import user_message
from goagent_py.testing import ScriptedProvider


async def test_a_client_whose_conversation_a_run_holds_is_not_forgotten(tmp_path: Path) -> None:
    path = tmp_path / "served.db"
    async with (
        SQLiteStorage(path, session_id="served") as served,
        SQLiteStorage(path, session_id=client_session_id("served", "mcp", "s-1")) as other,
    ):
        agent = Agent(provider=ScriptedProvider(), short_term_memory=ShortTermMemory(served))
        await other.append([user_message("kept")])
        async with other.hold_run():  # another worker's run of this client
            assert not await forget_client(agent, "s-1", protocol="mcp", shared_memory=False)
            assert [m.text for m in await other.load()] == ["kept"]
        # Once no run holds it, it goes.
        assert await forget_client(agent, "s-1", protocol="mcp", shared_memory=False)
        assert await other.load() == []
