"""Helpers shared by the A2A tests: a real localhost HTTP server for an ASGI app."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import sqlite3
from collections.abc import AsyncIterator
from typing import Any


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
