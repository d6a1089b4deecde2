"""Tool pinning: a hash of each tool's name, description and schema, checked on every listing.

A server can change a tool's description (where prompt injections hide) or schema after it was
reviewed. Each connection keeps the hash it first saw per tool (or the hashes you give it, e.g.
loaded from a file you reviewed), tells ``on_tool_changed`` when a listed tool no longer matches,
and with ``block_changed=True`` withholds the tool until ``approve(name)``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolChange", "definition_hash"]

_log = logging.getLogger("goagent_py.mcp")


def definition_hash(name: str, description: str, schema: Mapping[str, Any]) -> str:
    """sha256 (hex) of the tool's name, description and input schema, as canonical JSON."""
    canonical = json.dumps(
        {"name": name, "description": description, "schema": schema},
        sort_keys=True,
        separators=(",", ":"),
        ensure_ascii=False,
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolChange:
    """A pinned tool whose definition changed.

    Attributes:
        server: the connection's name.
        tool: the tool's name on the server.
        old_hash: the pinned hash.
        new_hash: the hash of the definition the server lists now.
        description: the new description, as the server sent it (not capped).
        parameters: the new input schema.
        blocked: True when the tool is withheld until ``approve(tool)``.
    """

    server: str
    tool: str
    old_hash: str
    new_hash: str
    description: str
    parameters: dict[str, Any] = field(default_factory=dict)
    blocked: bool = False


class _Pins:
    """The pins of one connection (the mapping may be the caller's, to persist)."""

    def __init__(
        self,
        server: str,
        pins: MutableMapping[str, str] | None,
        on_changed: Callable[[ToolChange], Any] | None,
        block_changed: bool,
    ) -> None:
        self.server = server
        self.pins: MutableMapping[str, str] = {} if pins is None else pins
        self.on_changed = on_changed
        self.block_changed = block_changed
        self.blocked: dict[str, str] = {}  # tool -> the hash waiting for approval
        self._reported: set[tuple[str, str]] = set()

    def check(self, name: str, description: str, schema: dict[str, Any]) -> bool:
        """Pin a tool seen for the first time; report a change once. True when it may be used."""
        new = definition_hash(name, description, schema)
        old = self.pins.get(name)
        if old is None:
            self.pins[name] = new
            return True
        if old == new:
            self.blocked.pop(name, None)
            return True
        if self.block_changed:
            self.blocked[name] = new
        else:
            # Not blocking: the change is reported once, then the new definition is the pin.
            self.pins[name] = new
        if (name, new) not in self._reported:
            self._reported.add((name, new))
            change = ToolChange(
                server=self.server,
                tool=name,
                old_hash=old,
                new_hash=new,
                description=description,
                parameters=schema,
                blocked=self.block_changed,
            )
            _log.warning(
                "MCP server %r changed tool %r (hash %s -> %s)%s",
                self.server,
                name,
                old[:12],
                new[:12],
                "; blocked until approved" if self.block_changed else "",
            )
            if self.on_changed is not None:
                try:
                    self.on_changed(change)
                except Exception:  # a hook never breaks the connection
                    _log.exception("on_tool_changed raised")
        return not self.block_changed

    def approve(self, name: str) -> bool:
        """Pin the blocked definition of ``name``; True if there was one."""
        new = self.blocked.pop(name, None)
        if new is None:
            return False
        self.pins[name] = new
        return True
