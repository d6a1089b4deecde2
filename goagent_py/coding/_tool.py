"""The tool shape the coding toolkits share: a definition, a ``mutating`` flag, an async body.

Private: the public names are re-exported from :mod:`goagent_py.coding`.
"""

from __future__ import annotations

import asyncio
import os
import re
import unicodedata
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from goagent_py.errors import GoAgentError, ToolArgumentsError
from goagent_py.messages import ContentBlock, TextBlock, ToolCall
from goagent_py.tools import ToolDefinition, validate_tool_name

__all__ = [
    "CodingTool",
    "CodingToolError",
    "PathQueue",
    "PathRule",
    "WorkspaceRoot",
    "call_key",
    "fold",
    "is_mutating",
    "valid_text",
]

_SURROGATE = re.compile("[\ud800-\udfff]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    # A byte of a file name that is not UTF-8 (os.scandir gives it as U+DC80-U+DCFF).
    return f"\\x{code - 0xDC00:02x}" if 0xDC80 <= code <= 0xDCFF else "\ufffd"


def valid_text(text: str) -> str:
    """``text`` as text every provider, store and terminal takes: a file name's bytes that are
    not UTF-8 (lone surrogates, as ``os.scandir`` gives them) shown as ``\\xff`` escapes.

    A repository may hold any bytes in a name: listed as they came, ``bad\\udcff.txt`` could
    not be encoded, and the turn's token count, its storage and the terminal all failed.
    """
    return _SURROGATE.sub(_escaped, text) if _SURROGATE.search(text) else text


def fold(text: str) -> str:
    """``text`` in the form deny rules compare names in: case folded and Unicode-normalised.

    A case-insensitive file system (macOS, Windows) opens ``.ENV`` as ``.env``, and macOS may
    store ``é`` decomposed (NFD) where a rule was typed composed (NFC): compared as spelled, a
    deny on ``.env`` let ``.ENV`` through. Folded, a deny rule covers every spelling the file
    system may open as the named file; on a case-sensitive one it covers the other spellings too
    (a refusal too many, never one too few). Allow rules and "always" stay exact.
    """
    return unicodedata.normalize("NFC", unicodedata.normalize("NFD", text).casefold())


PathRule = Callable[[str, str], bool]
"""``rule(tool_name, path) -> True`` when ``tool_name`` must not see or touch ``path`` (relative
to the workspace root, symlinks resolved, ``/``-separated)."""

_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "boolean": bool,
    "array": list,
    "number": (int, float),
}


class CodingToolError(GoAgentError):
    """A coding tool refused or failed; the message is what the model reads."""


class WorkspaceRoot:
    """The workspace root as the folder the tools were made in, not as a name.

    Every tool opens paths under the root's name. If that name later leads to another folder
    (the project moved or renamed and another put in its place, a link to elsewhere put
    there), the tools would read, write and run in that folder: :meth:`check` refuses instead.

    Args:
        root: the root, resolved (no link in it).
    """

    def __init__(self, root: Path) -> None:
        self.root = root
        self._identity = _identity(root)

    def check(self) -> None:
        """Refuse when the root's name no longer leads to the folder it named at start-up.

        Raises:
            CodingToolError: it was moved, renamed or replaced (the message says what to do).
        """
        try:
            same = os.path.realpath(self.root) == str(self.root)
            same = same and _identity(self.root) == self._identity
        except OSError:
            same = False
        if not same:
            raise CodingToolError(
                f"the workspace root {self.root} was moved or replaced since the session "
                "started; nothing was done (the user must start the agent again in the folder)"
            )


def _identity(path: Path) -> tuple[int, int]:
    st = os.stat(path)
    return (st.st_dev, st.st_ino)


class CodingTool:
    """A tool of the coding toolkits: what it is shown as, whether it changes anything, its body.

    Attributes:
        mutating: True when the tool can change files or run programs (an approval policy asks
            for these); False for tools that only read.
    """

    __slots__ = (
        "_body",
        "_definition",
        "add_path_rule",
        "check",
        "mutating",
        "planned",
        "reserve",
        "root",
        "rule_path",
    )

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
        # reserve(call) -> release: takes the call's place in its file's write queue before an
        # approval gate may hold it (set by the file toolkit on its writing tools).
        self.reserve: Callable[[ToolCall], Callable[[], None] | None] | None = None
        # planned(call, read) -> (text, note): the file a write or edit changes as it will be
        # when the call runs (the changes approved before it applied), for its approval
        # preview; read(root) reads it as it is now (set by the file toolkit).
        self.planned: Callable[[ToolCall, Callable[[Any], tuple[str | None, str]]], Any] | None
        self.planned = None
        # rule_path(path) -> the path a rule is checked on (resolved, relative to the root), and
        # add_path_rule(rule): what walks hide and opens refuse (set by the file toolkit).
        self.rule_path: Callable[[str], str] | None = None
        self.add_path_rule: Callable[[PathRule], None] | None = None
        # check(args) raises CodingToolError for arguments the body would refuse: an approval
        # policy runs it before asking (set by the shell tool; the body runs it too).
        self.check: Callable[[dict[str, Any]], object] | None = None
        # The workspace root, checked before each run (set by the toolkits).
        self.root: WorkspaceRoot | None = None

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
        """Validate ``args`` and run the tool; a refusal raises :class:`CodingToolError`.

        What the model reads (the answer, or the refusal's message) is :func:`valid_text`.
        """
        try:
            if self.root is not None:
                self.root.check()
            text = await self._body(self.validate_arguments(args))
        except CodingToolError as exc:
            message = str(exc)
            if valid_text(message) == message:
                raise
            raise CodingToolError(valid_text(message)) from exc
        return [TextBlock(valid_text(text))]

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


def call_key(call: ToolCall) -> str:
    """The key a call's queue place is held under: the same in the gate and in the body (both
    run in the call's task, where the tool context is set)."""
    from goagent_py.tool_context import current_tool_context

    ctx = current_tool_context()
    if ctx is not None and ctx.call.id == call.id:
        return ctx.idempotency_key
    return call.id


class PathQueue:
    """One queue per resolved path: the writers of one file run one after another, in order.

    The agent runs a turn's calls concurrently, and an approval gate can delay one call and
    not the next, or answer them in any order. So the loop lets each call take its place in
    line first (:meth:`reserve`, through the tool's ``reserve``; see
    :func:`goagent_py._call_gates.take_place`), at the start of the call's task, before any
    gate: the tasks start in the order the model gave the calls. The body, when it runs, uses
    that place; a call that is blocked gives it up. A body with no place reserved (a tool
    called directly) joins the line when it starts. Calls on different paths do not wait for
    each other.
    """

    def __init__(self) -> None:
        self._tails: dict[Path, asyncio.Future[None]] = {}
        # call id -> (path, its place, the place before it): taken by reserve(), used by run().
        self._reserved: dict[str, tuple[Path, asyncio.Future[None], asyncio.Future[None] | None]]
        self._reserved = {}
        # call id -> the argument its path was resolved from (what reserved_path answers for).
        self._sources: dict[str, str] = {}

    def _take(self, path: Path) -> tuple[asyncio.Future[None], asyncio.Future[None] | None]:
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        before = self._tails.get(path)
        self._tails[path] = mine  # taken synchronously: this is the call's place in line
        return mine, before

    def _finish(
        self, path: Path, mine: asyncio.Future[None], before: asyncio.Future[None] | None
    ) -> None:
        def finish(_: object = None) -> None:
            if not mine.done():
                mine.set_result(None)
            if self._tails.get(path) is mine:
                del self._tails[path]

        if before is None or before.done():
            finish()
        else:  # left before its turn: the next in line still waits for the one before
            before.add_done_callback(finish)

    def reserve(self, path: Path, key: str, source: str = "") -> None:
        """Take a place in ``path``'s line now for the call ``key`` (its body runs later).

        The place is given up by :meth:`release` (the call was blocked), or when the task that
        reserved it ends without the body having run.
        """
        if key in self._reserved:
            return
        mine, before = self._take(path)
        self._reserved[key] = (path, mine, before)
        self._sources[key] = source
        task = asyncio.current_task()
        if task is not None:
            task.add_done_callback(lambda _: self.release(key))

    def reserved_path(self, key: str, source: str) -> Path | None:
        """The path ``key``'s place was reserved on, resolved from ``source`` when the call
        started (before any gate: the file the user was asked about), or None (no place, or
        one resolved from another argument: a ``prepare_arguments`` changed the path)."""
        held = self._reserved.get(key) if key else None
        if held is None or self._sources.get(key) != source:
            return None
        return held[0]

    def release(self, key: str) -> None:
        """Give up the place :meth:`reserve` took for ``key`` if its body has not used it."""
        held = self._reserved.pop(key, None)
        self._sources.pop(key, None)
        if held is not None:
            self._finish(*held)

    async def run(self, path: Path, body: Callable[[], Awaitable[str]], key: str = "") -> str:
        """Run ``body`` after every call queued on ``path`` before it (in ``key``'s reserved
        place when there is one)."""
        held = self._reserved.pop(key, None) if key else None
        self._sources.pop(key, None)
        if held is not None and held[0] == path:
            _, mine, before = held
        else:
            if held is not None:  # reserved for another path (cannot happen): let it go
                self._finish(*held)
            mine, before = self._take(path)
        try:
            if before is not None and not before.done():
                # Shielded: a cancelled waiter must not cancel the turn of the one before it.
                await asyncio.shield(before)
            return await body()
        finally:
            self._finish(path, mine, before)
