"""Helpers shared by the A2A tests: a real localhost HTTP server for an ASGI app."""

from __future__ import annotations

import asyncio
import contextlib
import socket
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
