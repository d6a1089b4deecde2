"""goagent-py's own MCP server over stdio, with a scripted model (started by the tests).

The agent answers "What is 2 + 3?" by calling its ``add`` tool, then says "2 + 3 = 5.".
"""

from __future__ import annotations

import asyncio

from goagent_py import Agent, tool
from goagent_py.mcp.server import run_stdio, serve_agent
from goagent_py.testing import ScriptedProvider, tool_call_response


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


def build_agent() -> Agent:
    """The scripted agent (one question's worth of script)."""
    provider = ScriptedProvider(tool_call_response(("add", {"a": 2, "b": 3})), "2 + 3 = 5.")
    return Agent(provider=provider, model="scripted", name="calc", tools=[add])


if __name__ == "__main__":
    asyncio.run(run_stdio(serve_agent(build_agent(), expose="both")))
