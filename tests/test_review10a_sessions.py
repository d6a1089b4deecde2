"""Review 10a: a conversation cleared (by another process) while a session runs on it."""

from __future__ import annotations

from pathlib import Path

from goagent_py import Agent, Session, tool, validate_transcript
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.testing import ScriptedProvider, tool_call_response


async def test_a_conversation_cleared_mid_run_still_sends_a_valid_request(
    tmp_path: Path,
) -> None:
    path = tmp_path / "c.db"
    async with (
        SQLiteStorage(path, session_id="s") as other_process,
        SQLiteStorage(path, session_id="s") as storage,
    ):

        @tool
        async def deploy(target: str) -> str:
            """Deploy a target."""
            await other_process.clear()  # the conversation is deleted while the run goes on
            return f"{target} deployed"

        provider = ScriptedProvider(
            tool_call_response(("deploy", {"target": "x"})), "Done.", "Again."
        )
        session = Session(
            Agent(provider=provider, tools=[deploy], short_term_memory=ShortTermMemory(storage))
        )
        await session.prompt("first")
        await session.prompt("second")
        assert validate_transcript(list(provider.requests[-1].messages)) == []
