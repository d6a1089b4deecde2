"""One A2A server worker for the tests of workers sharing a storage (run as a script):
``python a2a_worker.py <sqlite file>``.

It serves an agent whose conversations are kept in the SQLite file on a free localhost port and
tells the test, one line each on stdout: ``port <n>`` once listening; ``started`` when its model
is asked (the model then answers ``answer from <pid>`` when the test writes a line to stdin);
``waiting`` when a message it got is being answered by another worker (the first pause of the
claim's wait, docs/a2a.md "A message sent again"). No sleep: the test drives it by lines.
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from typing import Any

import uvicorn

from goagent_py import Agent
from goagent_py.a2a import _sent, a2a_app
from goagent_py.memory import ShortTermMemory, SQLiteStorage
from goagent_py.testing import FunctionProvider


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _told_when_waiting() -> None:
    """Say ``waiting`` on the claim's first pause (the seam ``_sent.claim_wait``)."""
    original = getattr(_sent, "claim_wait", None)
    if original is None:  # a version without claims across workers: nothing ever waits
        return
    told = False

    async def claim_wait(attempt: int) -> None:
        nonlocal told
        if not told:
            told = True
            _say("waiting")
        await original(attempt)

    _sent.claim_wait = claim_wait


async def _model(request: Any) -> str:
    _say("started")
    await asyncio.to_thread(sys.stdin.readline)  # the test says when to answer
    return f"answer from {os.getpid()}"


async def main(path: str) -> None:
    _told_when_waiting()
    memory = ShortTermMemory(SQLiteStorage(path, session_id="served"))
    agent = Agent(provider=FunctionProvider(_model), model="m", short_term_memory=memory)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    port = sock.getsockname()[1]
    app = a2a_app(agent, url=f"http://127.0.0.1:{port}")
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    _say(f"port {port}")  # listening: a request sent now is answered once the app is up
    await server.serve(sockets=[sock])


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
