"""What the agent needs of a server that offers tools (an MCP server, or any other source).

The agent knows servers only through :class:`ToolServer`: it lists their tools before each turn
and closes them with itself. :mod:`goagent_py.mcp` implements the protocol; this module keeps
the agent's tool list in step with the servers, so the core never imports an integration
(docs/architecture.md, "Layers").
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterator, Mapping, MutableMapping, MutableSet, Sequence
from typing import Protocol, runtime_checkable

from goagent_py.tools import Tool

__all__ = [
    "JoinedTools",
    "ServerTool",
    "ToolServer",
    "admit_outside_tools",
    "server_tools",
    "sync_server_tools",
]

_log = logging.getLogger(__name__)


@runtime_checkable
class ToolServer(Protocol):
    """A source of tools the agent lists before each turn (``MCPStdio``, ``MCPHttp``, ...)."""

    @property
    def name(self) -> str: ...

    async def tools(self) -> list[Tool]:
        """The tools offered now (connecting first if needed)."""
        ...

    async def aclose(self) -> None: ...


@runtime_checkable
class ServerTool(Protocol):
    """A tool that a :class:`ToolServer` offers (as opposed to the agent's own tools)."""

    @property
    def server_name(self) -> str: ...


def admit_outside_tools(
    taken: Collection[str],
    offered: Sequence[tuple[str, Tool]],
    holders: Mapping[str, str] | None = None,
    *,
    log: logging.Logger | None = None,
    warned: MutableSet[tuple[str, str, str]] | None = None,
) -> dict[str, Tool]:
    """The tools from outside the process (servers, connectors) the agent takes, by name.

    A tool from outside never takes a name from a local tool, nor from the source that held
    it (``holders``: name -> source) or, for a new name, from an earlier source in ``offered``
    (pairs of source name and tool, in the agent's order). A tool that would is left out with
    a warning: a server cannot end runs, nor take a tool over, by naming its tools
    (docs/mcp.md, "Name clashes").

    ``warned`` (the clashes warned about so far, kept by the caller between syncs) makes each
    clash warned about once while it lasts; it is left holding the clashes found now, so one
    that ends and comes back is warned about again.
    """
    log = log or _log
    held = holders or {}
    clashes: set[tuple[str, str, str]] = set()  # (name, source left out, the name's holder)
    chosen: dict[str, Tool] = {}
    for source, t in offered:  # incumbents first: a name stays with the source that held it
        name = t.definition.name
        if name not in taken and name not in chosen and held.get(name) == source:
            chosen[name] = t
    owner = {name: held[name] for name in chosen}
    for source, t in offered:
        name = t.definition.name
        if chosen.get(name) is t:
            continue
        if name in taken:
            clash = (name, source, "")
            if clash not in clashes and (warned is None or clash not in warned):
                log.warning(
                    "tool %r of %r left out: the agent has a local tool of that name (give the "
                    "server a prefix= to offer both)",
                    name,
                    source,
                )
            clashes.add(clash)
        elif name in chosen:
            clash = (name, source, owner[name])
            if clash not in clashes and (warned is None or clash not in warned):
                log.warning(
                    "tool %r of %r left out: %r offers a tool of that name (give one of them a "
                    "prefix= to offer both)",
                    name,
                    source,
                    owner[name],
                )
            clashes.add(clash)
        else:
            chosen[name] = t
            owner[name] = source
    if warned is not None:
        warned.clear()
        warned |= clashes
    order = {id(t): i for i, (_, t) in enumerate(offered)}
    return dict(sorted(chosen.items(), key=lambda item: order[id(item[1])]))


async def server_tools(*servers: ToolServer) -> list[Tool]:
    """Every server's tools, each name once: a tool named like one of an earlier server is
    left out with a warning (see :func:`admit_outside_tools`)."""
    offered = [(server.name, t) for server in servers for t in await server.tools()]
    return list(admit_outside_tools((), offered).values())


async def sync_server_tools(
    tools: MutableMapping[str, Tool],
    servers: Sequence[ToolServer],
    *,
    log: logging.Logger | None = None,
    warned: MutableSet[tuple[str, str, str]] | None = None,
) -> bool:
    """Bring the server tools in ``tools`` (an agent's tools by name) up to date with ``servers``.

    The agent calls this before each run and between turns (never during a tool batch): it
    connects lazily, picks up changed tool lists, and leaves local tools alone. A server's tool
    named like a local tool, or like a tool another server holds, is left out with a warning
    (:func:`admit_outside_tools`; pass the same ``warned`` set at every sync to warn about
    each clash once while it lasts). Returns True when the set of tool definitions changed.

    Raises:
        MCPConnectionError: a server could not be started or reached; nothing is changed then.
    """
    offered = [(server.name, t) for server in servers for t in await server.tools()]
    before = {n: t for n, t in tools.items() if isinstance(t, ServerTool)}
    local = {n for n, t in tools.items() if not isinstance(t, ServerTool)}
    holders = {n: t.server_name for n, t in before.items() if isinstance(t, ServerTool)}
    after = admit_outside_tools(local, offered, holders, log=log, warned=warned)
    for name in before:
        del tools[name]
    tools.update(after)
    return {n: t.definition for n, t in before.items()} != {
        n: t.definition for n, t in after.items()
    }


class JoinedTools(MutableMapping[str, Tool]):
    """The tools of an agent and a client's own for one run, read through (the agent's, as
    they are now: its MCP servers' tools change between turns), the agent's first and winning
    a name both have. Read only: the agent's own are changed on the agent."""

    __slots__ = ("_extra", "_own")

    def __init__(self, own: Mapping[str, Tool], extra: Mapping[str, Tool]) -> None:
        self._own = own
        self._extra = extra

    def __getitem__(self, name: str) -> Tool:
        found = self._own.get(name)
        return self._extra[name] if found is None else found

    def __contains__(self, name: object) -> bool:
        return name in self._own or name in self._extra

    def __iter__(self) -> Iterator[str]:
        yield from self._own
        yield from (name for name in self._extra if name not in self._own)

    def __len__(self) -> int:
        return len(self._own) + sum(1 for name in self._extra if name not in self._own)

    def __setitem__(self, name: str, tool: Tool) -> None:
        raise TypeError("a client's run reads the served agent's tools: change them there")

    def __delitem__(self, name: str) -> None:
        raise TypeError("a client's run reads the served agent's tools: change them there")
