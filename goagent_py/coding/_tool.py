"""The tool shape the coding toolkits share: a definition, a ``mutating`` flag, an async body.

Private: the public names are re-exported from :mod:`goagent_py.coding`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from goagent_py.errors import GoAgentError, ToolArgumentsError
from goagent_py.messages import ContentBlock, TextBlock
from goagent_py.tools import ToolDefinition, validate_tool_name

__all__ = ["CodingTool", "CodingToolError", "PathQueue", "is_mutating"]

_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "boolean": bool,
    "array": list,
    "number": (int, float),
}


class CodingToolError(GoAgentError):
    """A coding tool refused or failed; the message is what the model reads."""


class CodingTool:
    """A tool of the coding toolkits: what it is shown as, whether it changes anything, its body.

    Attributes:
        mutating: True when the tool can change files or run programs (an approval policy asks
            for these); False for tools that only read.
    """

    __slots__ = ("_body", "_definition", "mutating")

    def __init__(
        self,
        name: str,
        description: str,
        parameters: dict[str, Any],
        body: Callable[[dict[str, Any]], Awaitable[str]],
        *,
        mutating: bool,
    ) -> None:
        validate_tool_name(name)
        self._definition = ToolDefinition(name, description, parameters)
        self._body = body
        self.mutating = mutating

    @property
    def definition(self) -> ToolDefinition:
        """The name, description and JSON schema shown to the model."""
        return self._definition

    def validate_arguments(self, args: dict[str, Any]) -> dict[str, Any]:
        """``args`` checked against the schema (required names, basic types, no unknown names).

        Raises:
            ToolArgumentsError: the model's arguments do not fit (it reads why and retries).
        """
        schema = self._definition.parameters
        props: dict[str, Any] = schema.get("properties", {})
        name = self._definition.name
        for key in schema.get("required", []):
            if key not in args:
                raise ToolArgumentsError(name, f"missing required argument {key!r}")
        for key, value in args.items():
            if key not in props:
                raise ToolArgumentsError(name, f"unknown argument {key!r}")
            want = _TYPES.get(props[key].get("type", ""))
            bad_bool = isinstance(value, bool) and props[key].get("type") in ("integer", "number")
            if want is not None and (not isinstance(value, want) or bad_bool):
                raise ToolArgumentsError(name, f"{key!r} must be a {props[key]['type']}")
            if isinstance(value, list) and not all(isinstance(v, str) for v in value):
                raise ToolArgumentsError(name, f"{key!r} must be a list of strings")
        return dict(args)

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        """Validate ``args`` and run the tool; a refusal raises :class:`CodingToolError`."""
        return [TextBlock(await self._body(self.validate_arguments(args)))]

    def __repr__(self) -> str:
        kind = "mutating" if self.mutating else "read-only"
        return f"CodingTool({self._definition.name!r}, {kind})"


def is_mutating(tool: object) -> bool:
    """Whether ``tool`` can change something: its ``mutating`` attribute, True when it has none.

    A tool that does not say is treated as mutating, so an approval policy asks about it
    rather than letting it through.
    """
    value = getattr(tool, "mutating", True)
    return value if isinstance(value, bool) else True


class PathQueue:
    """One queue per resolved path: the writers of one file run one after another, in order.

    The agent runs a turn's calls concurrently. A mutating tool joins its path's queue the
    moment its body starts (before any ``await``), so the order is the order the calls started,
    which is the order the model gave them (the loop starts a turn's calls in that order).
    Calls on different paths do not wait for each other.
    """

    def __init__(self) -> None:
        self._tails: dict[Path, asyncio.Future[None]] = {}

    async def run(self, path: Path, body: Callable[[], Awaitable[str]]) -> str:
        """Run ``body`` after every call queued on ``path`` before it."""
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        before = self._tails.get(path)
        self._tails[path] = mine  # taken synchronously: this is the call's place in line

        def finish(_: object = None) -> None:
            if not mine.done():
                mine.set_result(None)
            if self._tails.get(path) is mine:
                del self._tails[path]

        try:
            if before is not None and not before.done():
                # Shielded: a cancelled waiter must not cancel the turn of the one before it.
                await asyncio.shield(before)
            return await body()
        finally:
            if before is None or before.done():
                finish()
            else:  # cancelled while waiting: the next in line still waits for ours' turn
                before.add_done_callback(finish)
