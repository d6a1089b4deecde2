"""Over stdio a served agent has one client: its short-term memory (its storage) is that
client's conversation, kept across restarts of the server (docs/mcp.md, "One conversation per
client")."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from goagent_py.memory import SQLiteStorage

HERE = os.path.dirname(__file__)
SERVER = os.path.join(HERE, "memory_server.py")
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}


async def _ask(db: Path, prompt: str, answer: str) -> str:
    params = StdioServerParameters(command=sys.executable, args=[SERVER, str(db), answer], env=ENV)
    async with Client(params) as client:
        result = await client.call_tool("ask", {"prompt": prompt})
    return str(result.content[0].text)


@pytest.mark.slow
async def test_a_stdio_servers_conversation_is_kept_in_the_agents_own_storage(
    tmp_path: Path,
) -> None:
    db = tmp_path / "notes.db"
    assert await _ask(db, "My locker code is 4711.", "Noted.") == "Noted."
    assert await _ask(db, "What is my locker code?", "4711.") == "4711."  # a new process
    stored = await SQLiteStorage(str(db), session_id="desktop").load()
    assert [m.text for m in stored] == [
        "My locker code is 4711.",
        "Noted.",
        "What is my locker code?",
        "4711.",
    ]
