"""The errors of the MCP client, in the goagent-py error tree.

Errors of one tool call are also :class:`~goagent_py.errors.ToolError`\\ s named after the tool as
the agent knows it, so the model reads their message as is (``Error: <message>``)::

    GoAgentError
    └── MCPError                         base: ``server`` names the connection
        ├── MCPConnectionError           the server could not be started or reached, or went away
        │   └── MCPServerRestartedError  (also a ToolError) the connection broke under a call that
        │                                is not idempotent, so it was not retried
        ├── MCPToolError                 (also a ToolError) the server answered ``isError``
        ├── MCPCallTimeoutError          (also a ToolTimeoutError) no answer within the
        │                                connection's ``call_timeout``; cancelled on the server
        ├── MCPToolChangedError          (also a ToolError) a pinned tool changed; blocked until
        │                                re-approved
        └── MCPToolUnavailableError      (also a ToolError) the server no longer offers the tool
"""

from __future__ import annotations

from typing import Any

from goagent_py.errors import GoAgentError, ToolError, ToolTimeoutError

__all__ = [
    "MCPCallTimeoutError",
    "MCPConnectionError",
    "MCPError",
    "MCPServerRestartedError",
    "MCPToolChangedError",
    "MCPToolError",
    "MCPToolUnavailableError",
]


class MCPError(GoAgentError):
    """Base of the MCP client's errors; ``server`` is the connection's name."""

    def __init__(self, server: str, message: str) -> None:
        self.server = server
        self.detail = message
        super().__init__(f"MCP server {server!r}: {message}")

    def __reduce__(self) -> Any:
        return self._reduce_with(self.server, self.detail)


class MCPConnectionError(MCPError):
    """The server could not be started or reached, or the connection broke."""


class MCPServerRestartedError(MCPConnectionError, ToolError):
    """The connection broke under a call to a tool that is not idempotent: it was not retried,
    since the server may have run it already. The connection is re-established in the background.
    """

    def __init__(self, server: str, tool_name: str, reason: str) -> None:
        self.tool_name = tool_name
        self.reason = reason
        MCPError.__init__(
            self,
            server,
            f"the connection broke during call to tool {tool_name!r} ({reason}); the server is "
            "being restarted; call not retried because the tool is not marked idempotent",
        )

    def __reduce__(self) -> Any:
        return self._reduce_with(self.server, self.tool_name, self.reason)


class MCPToolError(MCPError, ToolError):
    """The server ran the tool and reported an error (``isError``); ``text`` is its message."""

    def __init__(self, server: str, tool_name: str, text: str) -> None:
        self.tool_name = tool_name
        self.text = text
        MCPError.__init__(self, server, f"tool {tool_name!r} failed: {text}")

    def __reduce__(self) -> Any:
        return self._reduce_with(self.server, self.tool_name, self.text)


class MCPCallTimeoutError(MCPError, ToolTimeoutError):
    """The server gave no answer to a call within the connection's ``call_timeout``: the call
    was cancelled on the server, and the connection stays up for the next one."""

    def __init__(self, server: str, tool_name: str, timeout: float) -> None:
        self.tool_name = tool_name
        self.timeout = timeout
        self.server = server
        self.detail = (
            f"tool {tool_name!r} gave no answer within call_timeout={timeout:g}s (the call "
            "was cancelled on the server)"
        )
        # Past ToolTimeoutError's __init__ (it takes other arguments) to the plain message.
        ToolError.__init__(self, f"MCP server {server!r}: {self.detail}")

    def __reduce__(self) -> Any:
        return self._reduce_with(self.server, self.tool_name, self.timeout)


class MCPToolChangedError(MCPError, ToolError):
    """The tool's definition changed since it was pinned, and changed tools are blocked until
    re-approved (``connection.approve(name)``)."""

    def __init__(self, server: str, tool_name: str) -> None:
        self.tool_name = tool_name
        MCPError.__init__(
            self,
            server,
            f"tool {tool_name!r} changed since it was approved (name, description or schema); "
            "it is blocked until re-approved",
        )

    def __reduce__(self) -> Any:
        return self._reduce_with(self.server, self.tool_name)


class MCPToolUnavailableError(MCPError, ToolError):
    """The server no longer offers the tool (its tool list changed)."""

    def __init__(self, server: str, tool_name: str, available: tuple[str, ...] = ()) -> None:
        self.tool_name = tool_name
        self.available = available
        names = ", ".join(available) if available else "none"
        MCPError.__init__(
            self,
            server,
            f"tool {tool_name!r} is no longer offered by this server (its tool list changed); "
            f"its tools now: {names}",
        )

    def __reduce__(self) -> Any:
        return self._reduce_with(self.server, self.tool_name, self.available)
