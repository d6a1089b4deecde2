"""The served app of the ``serve --workers`` tests, run in real worker processes.

Run as the parent: ``python workers14_app.py DB PORTS_DIR N`` binds a socket, prints
``listening PORT`` and starts N workers (``goagent_py.serve._supervise.supervise``); each
worker serves the app on the shared socket and, as a test hook, on one more socket of its own
whose port it writes to ``PORTS_DIR/<pid>`` (requests there are public requests that land on
that worker: the test picks the worker instead of hoping the kernel spreads connections).

The model answers ``pid=<worker> n=<messages it got> saw: <the last user text>``; a message
``hold FIFO`` makes it wait until something is written to the named pipe FIFO; ``approve``
makes it call a tool that needs the person's approval; ``client tool`` calls the OpenAI
client's tool ``lookup``.

``python workers14_app.py DB PORTS_DIR N crash '{"_CRASH_WINDOW": 3600}'`` starts workers that
end (exit code 3) as soon as they are ready, with the parent's crash-loop settings given
(names of ``goagent_py.serve._supervise``'s constants).
"""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from typing import Any

from goagent_py import Agent, tool
from goagent_py.messages import Role
from goagent_py.serve import ThreadContext, TokenAuth
from goagent_py.testing import FunctionProvider, tool_call_response

TOKENS = {"alice-token-0123456789": "alice", "bob-token-0123456789ab": "bob"}


@tool(requires_approval=True)
def guarded() -> str:
    """A tool that needs approval."""
    return f"guarded ran in {os.getpid()}"


def _wait_for(fifo: str) -> None:
    with open(fifo, "rb") as f:  # returns once the test writes to it
        f.read()


async def _answer(request: Any) -> Any:
    last = request.messages[-1]
    if last.role != Role.USER or not last.text:
        return f"pid={os.getpid()} n={len(request.messages)} after the tool"
    text = last.text
    if text.startswith("hold "):
        fifo = text[5:]
        await asyncio.to_thread(_wait_for, fifo)
        return f"pid={os.getpid()} n={len(request.messages)} held"
    if text == "approve":
        return tool_call_response(("guarded", {}))
    if text == "client tool":  # a tool of the OpenAI client's (a /v1 request's tools)
        return tool_call_response(("lookup", {}))
    return f"pid={os.getpid()} n={len(request.messages)} saw: {text}"


def _factory(ctx: ThreadContext) -> Agent:
    return Agent(
        provider=FunctionProvider(_answer),
        model="scripted",
        tools=[guarded],
        short_term_memory=ctx.short_term_memory,
    )


def serve(payload: dict[str, Any]) -> int:
    """A worker: the app on the parent's socket, its private one and its own test port."""
    import uvicorn

    from goagent_py.serve import create_app
    from goagent_py.serve.run import serve_in_worker

    own = socket.create_server(("127.0.0.1", 0))
    with open(os.path.join(payload["ports"], str(os.getpid())), "w") as f:
        f.write(str(own.getsockname()[1]))

    async def main() -> int:
        app = create_app(_factory, storage_path=payload["db"], auth=TokenAuth(dict(TOKENS)))
        config = uvicorn.Config(app, log_level="warning")
        return await serve_in_worker(app, config, also=[own])

    return asyncio.run(main())


def crash(payload: dict[str, Any]) -> int:
    """A worker that says it is ready, then ends at once."""
    from goagent_py.serve._supervise import ready, worker_context

    ctx = worker_context()
    assert ctx is not None
    ready(ctx)
    return 3


if __name__ == "__main__":
    import json

    from goagent_py.serve import _supervise
    from goagent_py.serve._supervise import supervise

    db, ports, workers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    target = sys.argv[4] if len(sys.argv) > 4 else "serve"
    for name, value in (json.loads(sys.argv[5]) if len(sys.argv) > 5 else {}).items():
        setattr(_supervise, name, value)
    listening = socket.create_server(("127.0.0.1", 0))
    print(f"listening {listening.getsockname()[1]}", flush=True)

    def announce(pids: list[int]) -> None:
        print("ready " + " ".join(map(str, pids)), flush=True)

    sys.exit(
        supervise(
            f"workers14_app:{target}",
            {"db": db, "ports": ports},
            listening=listening,
            workers=workers,
            announce=announce,
        )
    )
