"""An SSE response bound to a run (the AG-UI stream and the OpenAI-compatible streams)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from sse_starlette.sse import EventSourceResponse
from starlette.types import Receive, Scope, Send

from goagent_py.serve._server import Run, Server

__all__ = ["RunStream"]


class RunStream(EventSourceResponse):
    """An SSE response for a run that aborts the run when the stream ends before it does.

    Leaving ``server.events`` early aborts the run, but only once that generator has started:
    a client gone before the first frame (the server noticed the disconnect first, or the
    response start could not be sent, ASGI 2.4 servers raise ``OSError`` there) never starts
    it, and the run would go on with nobody listening.
    """

    def __init__(self, server: Server, run: Run, content: AsyncIterator[Any]) -> None:
        super().__init__(content, ping=15)
        self._server = server
        self._run = run

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if not self._run.done.is_set() and not self._run.parked:
                self._server.stop(self._run)
