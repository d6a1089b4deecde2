"""The one place that imports the ``mcp`` SDK (lazily), so a missing extra is a clear error.

goagent-py targets the SDK's current major (2.x): ``mcp.Client``, ``mcp_types`` and
``mcp.server.mcpserver.MCPServer``. The 1.x line is not supported (its ``FastMCP`` server and
camelCase result fields differ); a 1.x install gets a clear error here, not a failure deep inside.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version
from types import ModuleType
from typing import Any

from goagent_py.errors import ConfigurationError, MissingExtraError

__all__ = ["CONNECTION_CLOSED", "describe", "is_lost", "is_modern", "require", "sdk_version"]

# JSON-RPC error code the SDK uses for a transport that closed (mcp_types.CONNECTION_CLOSED).
CONNECTION_CLOSED = -32000


def sdk_version() -> str:
    """The installed SDK's version, or "" when it is not installed."""
    try:
        return version("mcp")
    except PackageNotFoundError:
        return ""


def require(module: str = "mcp") -> ModuleType:
    """Import ``module`` of the SDK, or raise :class:`MissingExtraError` (not installed) or
    :class:`ConfigurationError` (an SDK older than 2.x)."""
    installed = sdk_version()
    if not installed:
        raise MissingExtraError("mcp", "mcp", feature="MCP servers")
    if installed.split(".", 1)[0] in ("0", "1"):
        raise ConfigurationError(
            f"goagent_py.mcp needs the mcp SDK 2.x, found {installed}: "
            'pip install -U "goagent-py[mcp]"'
        )
    return import_module(module)


def closed_code() -> int:
    """The SDK's CONNECTION_CLOSED code (checked against ours once)."""
    types: Any = require("mcp_types")
    return int(getattr(types, "CONNECTION_CLOSED", CONNECTION_CLOSED))


def is_modern(client: Any) -> bool:
    """Whether the connection speaks the 2026-07-28 protocol (subscriptions/listen)."""
    version = getattr(client, "protocol_version", "") or ""
    return version >= "2026-07-28"


def _leaf(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


# What the SDK itself writes, under CONNECTION_CLOSED, for a transport that closed or a stream
# that ended without an answer. The code alone does not say it: -32000 opens JSON-RPC's range
# for servers' own errors, and a server's error answer with it is the server's, over a working
# connection (taken for a loss, every such answer restarted the server).
_SDK_CLOSED_TEXTS = ("Connection closed", "SSE stream ", "server answered a request with 202")

_DESCRIBED_CHARS = 2000


def is_lost(exc: BaseException) -> bool:
    """Whether ``exc`` says the transport is gone (the server died or closed the stream)."""
    exc = _leaf(exc)
    error = getattr(exc, "error", None)
    if getattr(error, "code", None) == closed_code():
        message = str(getattr(error, "message", ""))
        return message.startswith(_SDK_CLOSED_TEXTS)
    name = type(exc).__name__
    return name in {"ClosedResourceError", "BrokenResourceError", "EndOfStream"}


def describe(exc: BaseException, limit: int = _DESCRIBED_CHARS) -> str:
    """One line for an error: its type and message (single-error groups unwrapped), the
    message cut at ``limit`` characters (a server's text reaches logs and errors through it)."""
    exc = _leaf(exc)
    text = str(exc).strip()
    if len(text) > limit:
        text = text[:limit] + f" [truncated: {len(text)} characters]"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
