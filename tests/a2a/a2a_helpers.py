"""Helpers shared by the A2A tests: a real localhost HTTP server for an ASGI app, the JSON-RPC
bodies and answers the tests send and read, a server restarted on one SQLite file."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx


def free_socket() -> socket.socket:
    """A listening socket on a free localhost port (clients can connect before serving)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    return sock


@contextlib.asynccontextmanager
async def serving(app: Any, sock: socket.socket) -> AsyncIterator[str]:
    """Serve the ASGI ``app`` with uvicorn on ``sock``; yields its base URL."""
    import uvicorn

    web = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    task = asyncio.create_task(web.serve(sockets=[sock]))
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        web.should_exit = True
        await task
        sock.close()


def stored_sessions(path: str) -> set[str]:
    """The conversation ids stored in the SQLite file at ``path``."""
    with sqlite3.connect(path) as conn:
        return {r[0] for r in conn.execute("SELECT DISTINCT session_id FROM goagent_messages")}


def send_message(text: str, message_id: str, context_id: str) -> Any:
    """A JSON-RPC ``SendMessage`` body (A2A 1.0) of one user text."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {
                "role": "ROLE_USER",
                "messageId": message_id,
                "contextId": context_id,
                "parts": [{"text": text}],
            }
        },
    }


# -- JSON-RPC over real HTTP, and a server restarted on one SQLite file ---------------------------


def url_of(sock: socket.socket) -> str:
    """The base URL :func:`serving` gives for ``sock`` (for an app that must know its URL)."""
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


async def post_task(http: httpx.AsyncClient, url: str, body: Any) -> Any:
    """POST the JSON-RPC ``body`` (A2A 1.0) to the server at ``url``; the task it answers."""
    answer = (await http.post(url + "/", json=body, headers={"A2A-Version": "1.0"})).json()
    assert "result" in answer, answer
    return answer["result"]["task"]


def answer_of(task: Any) -> str:
    """The text of a task's artifacts (a task as JSON)."""
    return "".join(p["text"] for a in task.get("artifacts", []) for p in a["parts"])


def message_send_0_3(text: str, message_id: str) -> Any:
    """A JSON-RPC ``message/send`` body (A2A 0.3) of one user text."""
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": message_id,
                "parts": [{"kind": "text", "text": text}],
            }
        },
    }


async def answered_across_a_restart(
    path: str, provider: Any, send: Callable[[httpx.AsyncClient, str], Awaitable[Any]]
) -> list[Any]:
    """What ``send(http, url)`` gets from a server of an agent on ``provider`` whose memory is
    the SQLite file at ``path`` (conversation "helper"), then from a second one on the same
    file after the first stopped (a restart)."""
    from goagent_py import Agent
    from goagent_py.a2a import a2a_app
    from goagent_py.memory import ShortTermMemory, SQLiteStorage

    answers = []
    for _ in range(2):
        memory = ShortTermMemory(SQLiteStorage(path, session_id="helper"))
        agent = Agent(provider=provider, model="m", short_term_memory=memory)
        sock = free_socket()
        async with (
            serving(a2a_app(agent, url=url_of(sock)), sock) as url,
            httpx.AsyncClient(timeout=60) as http,
        ):
            answers.append(await send(http, url))
        await memory.storage.aclose()
    return answers
