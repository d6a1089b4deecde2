"""Helpers shared by the MCP tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from goagent_py import Agent
from goagent_py.messages import Message, Role
from goagent_py.testing import ScriptedProvider


async def answer(agent: Agent, prompt: str) -> str:
    """The agent's answer, whether ``run`` returns the text or a RunResult."""
    return text_of(await agent.run(prompt))


async def run_result(agent: Agent, prompt: str) -> Any:
    """The run's RunResult (``run_detailed`` here, ``run`` on the newer API)."""
    run = getattr(agent, "run_detailed", None) or agent.run
    return await run(prompt)


def text_of(result: Any) -> str:
    """The answer text of a ``run``/``run_sync`` return value (str or RunResult)."""
    return result if isinstance(result, str) else str(result.text)


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


@contextlib.asynccontextmanager
async def serving(app: Any) -> AsyncIterator[int]:
    """Serve the ASGI ``app`` with uvicorn on a free localhost port; yields the port.

    The socket is bound and listening before the server starts, so clients can connect at once.
    """
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(web.serve(sockets=[sock]))
    try:
        yield port
    finally:
        web.should_exit = True
        await task
        sock.close()
