"""The peer of ``bench/serve_load.py``: pydantic-ai's AG-UI server on the same scripted answer.

Runs in its own virtualenv, never this project's (``bench/serve_load.py --peer`` creates it
under ``$PEERBENCH_VENVS/pydantic_ai_agui`` and starts this script there)::

    python -m venv /tmp/peerbench-venvs/pydantic_ai_agui
    /tmp/peerbench-venvs/pydantic_ai_agui/bin/pip install "pydantic-ai-slim[ag-ui]" uvicorn \
        httptools uvloop
    /tmp/peerbench-venvs/pydantic_ai_agui/bin/python -P bench/peers/serve_pydantic_ai.py PORT_FILE

One Starlette route, ``POST /``, hands each AG-UI ``RunAgentInput`` to
``AGUIAdapter.dispatch_request`` (pydantic-ai's documented way to serve an agent over AG-UI);
the model is a ``FunctionModel`` that streams the same 24 words, one delta each, as the
``ScriptedProvider`` of ``bench/serve_load.py``. AG-UI's default: the client sends the whole
conversation each turn and the server keeps nothing (no storage, no auth), so the peer does
less than ours per turn (no SQLite, no token check, no thread index).
"""

from __future__ import annotations

import asyncio
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import uvicorn
from pydantic_ai import Agent
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.ui.ag_ui import AGUIAdapter
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

WORDS = [f"word{i}" for i in range(24)]


async def stream(messages: list[Any], info: AgentInfo) -> AsyncIterator[str]:
    for i, word in enumerate(WORDS):
        yield word if i == 0 else " " + word


agent = Agent(FunctionModel(stream_function=stream, model_name="scripted"))


async def run(request: Request) -> Response:
    return await AGUIAdapter.dispatch_request(request, agent=agent)


app = Starlette(routes=[Route("/", run, methods=["POST"])])


def main(port_file: str) -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    Path(port_file).write_text(str(sock.getsockname()[1]))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    import uvloop  # installed with the peer, as uvicorn[standard] brings it; ours runs on it too

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(server.serve(sockets=[sock]))


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except KeyboardInterrupt:
        pass
