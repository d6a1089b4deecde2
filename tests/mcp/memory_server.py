"""An agent with a SQLite short-term memory served over stdio (started by the tests): the
database path is the first argument, the scripted answers the rest."""

from __future__ import annotations

import asyncio
import sys

from goagent_py import Agent
from goagent_py.mcp.server import run_stdio, serve_agent
from goagent_py.memory import ShortTermMemory, SQLiteStorage
from goagent_py.testing import ScriptedProvider

if __name__ == "__main__":
    path, *answers = sys.argv[1:]
    memory = ShortTermMemory(SQLiteStorage(path, session_id="desktop"))
    agent = Agent(
        provider=ScriptedProvider(*answers),
        model="scripted",
        name="notes",
        short_term_memory=memory,
    )
    asyncio.run(run_stdio(serve_agent(agent)))
