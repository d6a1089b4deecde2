"""Serve agents to people: an HTTP API (AG-UI events over SSE), a built-in web chat and an
OpenAI-compatible endpoint, with the server owning each user's threads.

Needs the ``serve`` extra (starlette, uvicorn, sse-starlette), imported when used::

    from goagent_py.serve import create_app
    app = create_app(lambda ctx: Agent(provider=..., short_term_memory=ctx.short_term_memory),
                     storage_path="chat.db")
"""

from goagent_py.serve._auth import (
    Auth,
    NoAuth,
    TokenAuth,
    TrustedProxyAuth,
    UsersFileAuth,
    hash_password,
    verify_password,
)
from goagent_py.serve.app import (
    AgentFactory,
    HttpError,
    ServeApp,
    ThreadContext,
    create_app,
    memory_scope,
)
from goagent_py.serve.run import run_serve

__all__ = [
    "AgentFactory",
    "Auth",
    "HttpError",
    "NoAuth",
    "ServeApp",
    "ThreadContext",
    "TokenAuth",
    "TrustedProxyAuth",
    "UsersFileAuth",
    "create_app",
    "hash_password",
    "memory_scope",
    "run_serve",
    "verify_password",
]
