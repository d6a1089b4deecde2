"""A small MCP server (the SDK's MCPServer) that the durable MCP crash test's workers start over
stdio. Every call is logged as one line in ``$GOAGENT_LOG``. ``slow`` with ``$GOAGENT_BLOCK``
set writes BLOCKED to stderr (the worker's) and never answers, so the test can kill the worker
while the call is in flight.
"""

from __future__ import annotations

import os
import sys

import anyio
from mcp.server.mcpserver import MCPServer

server = MCPServer("crashy", log_level="WARNING")


def log(line: str) -> None:
    with open(os.environ["GOAGENT_LOG"], "a", encoding="utf-8") as f:
        f.write(line + "\n")


@server.tool()
def note(text: str) -> str:
    """Write a note."""
    log(f"mcp note {text}")
    return f"noted {text}"


@server.tool()
async def slow(n: int) -> str:
    """A slow step."""
    log(f"mcp slow {n}")
    if os.environ.get("GOAGENT_BLOCK"):
        print("BLOCKED", file=sys.stderr, flush=True)
        await anyio.sleep_forever()
    return f"slow {n} done"


if __name__ == "__main__":
    server.run("stdio")
