"""Helpers shared by the MCP tests."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from goagent_py import Agent
from goagent_py.mcp import MCPConnection, MCPTool
from goagent_py.messages import Message, Role
from goagent_py.testing import ScriptedProvider


def tool_results(provider: ScriptedProvider, request: int) -> list[Message]:
    """The tool-result messages the model saw in request number ``request``."""
    return [m for m in provider.requests[request].messages if m.role == Role.TOOL]


def offered(provider: ScriptedProvider, request: int) -> set[str]:
    """The tool names offered to the model in request number ``request``."""
    return {t.name for t in provider.requests[request].tools}


def child_pids(command_part: str) -> list[int]:
    """Our child processes whose command line contains ``command_part`` (Linux /proc)."""
    pids: list[int] = []
    for task in Path(f"/proc/{os.getpid()}/task").iterdir():
        children = (task / "children").read_text().split()
        for pid in map(int, children):
            try:
                cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
            except OSError:
                continue
            if command_part.encode() in cmdline:
                pids.append(pid)
    return pids


class RefreshingAgent(Agent):
    """An Agent that re-reads its MCP connections' tools before every run.

    Stand-in for what ``Agent(mcp_servers=[...])`` does once it lands in agent.py (see
    docs/notes/mcp.md): ``await connection.tools()`` between turns, replacing the tools of that
    connection. It touches the agent's internals, which the real integration owns.
    """

    def __init__(self, *args: Any, connections: list[MCPConnection], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._connections = connections

    async def _run(self, content: Any, *, streaming: bool) -> Any:
        tools: dict[str, Any] = self._tools  # the dispatcher reads this dict at call time
        for name in [n for n, t in tools.items() if isinstance(t, MCPTool)]:
            del tools[name]
        for connection in self._connections:
            for t in await connection.tools():
                tools[t.definition.name] = t
        return await super()._run(content, streaming=streaming)
