"""Serve agents to people: an HTTP API (AG-UI events over SSE), a built-in web chat and an
OpenAI-compatible endpoint, with the server owning each user's threads.

Needs the ``serve`` extra (starlette, uvicorn, ag-ui-protocol, jsonschema), imported when used;
the names below load on first access, so ``goagent-py``'s parser can add the serve options
cheaply::

    from goagent_py.serve import create_app
    app = create_app(
        lambda ctx: Agent(provider=..., short_term_memory=ctx.short_term_memory),
        storage_path="chat.db",
    )
"""

from __future__ import annotations

import typing as _typing
from typing import Any as _Any

from goagent_py._lazy import lazy_dir as _lazy_dir
from goagent_py._lazy import lazy_load as _lazy_load

if _typing.TYPE_CHECKING:  # the names for type checkers; at run time each loads on first access
    from goagent_py.serve._auth import (
        Auth,
        Login,
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

_LAZY = {
    "Auth": "goagent_py.serve._auth",
    "Login": "goagent_py.serve._auth",
    "NoAuth": "goagent_py.serve._auth",
    "TokenAuth": "goagent_py.serve._auth",
    "TrustedProxyAuth": "goagent_py.serve._auth",
    "UsersFileAuth": "goagent_py.serve._auth",
    "hash_password": "goagent_py.serve._auth",
    "verify_password": "goagent_py.serve._auth",
    "AgentFactory": "goagent_py.serve.app",
    "HttpError": "goagent_py.serve.app",
    "ServeApp": "goagent_py.serve.app",
    "ThreadContext": "goagent_py.serve.app",
    "create_app": "goagent_py.serve.app",
    "memory_scope": "goagent_py.serve.app",
    "run_serve": "goagent_py.serve.run",
}


def __getattr__(name: str) -> _Any:
    """Load a public name's module on first access (PEP 562)."""
    return _lazy_load(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return _lazy_dir(__name__, _LAZY)


__all__ = [
    "AgentFactory",
    "Auth",
    "HttpError",
    "Login",
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
