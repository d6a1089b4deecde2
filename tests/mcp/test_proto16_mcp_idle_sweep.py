"""An idle MCP server forgets too (docs/mcp.md, "How long a session is kept"): the HTTP app's
lifespan sweeps the sessions idle past ``forget_after`` with no ask arriving. The clock and the
sweep's waits are the test's (tests/sweep_ticks.py)."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from mcp_helpers import serving
from sweep_ticks import Ticks  # tests/sweep_ticks.py

from goagent_py import Agent
from goagent_py.mcp.server import http_app, serve_agent
from goagent_py.memory import ShortTermMemory, SQLiteStorage
from goagent_py.testing import FunctionProvider

pytestmark = pytest.mark.slow


def _sessions(path: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT DISTINCT session_id FROM goagent_messages")}


async def test_an_idle_http_server_forgets_a_session_idle_past_forget_after(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from mcp import Client

    ticks = Ticks(monkeypatch)
    path = str(tmp_path / "mcp.db")
    memory = ShortTermMemory(SQLiteStorage(path, session_id="helper"))
    agent = Agent(provider=FunctionProvider(lambda r: "ok"), model="m", short_term_memory=memory)
    async with serving(http_app(serve_agent(agent, forget_after=100))) as port:
        assert await ticks.next_wait() == 100
        async with Client(f"http://127.0.0.1:{port}/mcp", mode="legacy") as client:
            result = await client.call_tool("ask", {"prompt": "hi"})
        assert not result.is_error, result
        assert [s for s in _sessions(path) if s.startswith("helper/mcp/")]
        await ticks.sweep_after(101)  # no ask arrives
        assert not [s for s in _sessions(path) if s.startswith("helper/mcp/")]
    await memory.storage.aclose()
