"""Where a memory's text came from: its provenance, and how far from the user that is.

Every stored entry records it under :data:`PROVENANCE_KEY` (see :mod:`goagent_py.memory.long_term`,
which re-exports these names): ``"user"``, ``"assistant"``, ``"tool"`` or ``"retrieved"``. A
message is given the least trusted of its role's and any declared provenance, so a declaration
can lower trust but never raise it.
"""

from __future__ import annotations

from typing import Literal

from goagent_py.messages import Message, ScoredMessage

__all__ = [
    "DISTRUST",
    "PROVENANCES",
    "PROVENANCE_KEY",
    "Provenance",
    "provenance_of",
    "with_provenance",
]

PROVENANCE_KEY = "goagent.provenance"
"""The metadata key of a memory's provenance (see the module docstring)."""

Provenance = Literal["user", "assistant", "tool", "retrieved"]
"""Where a memory's text came from; ``"tool"`` and ``"retrieved"`` are untrusted."""

PROVENANCES: tuple[Provenance, ...] = ("user", "assistant", "tool", "retrieved")

# How far each provenance is from the user: a message is given the least trusted of its role's
# and any declared provenance, so a declaration can lower trust but never raise it.
DISTRUST: dict[str, int] = {"user": 0, "assistant": 1, "tool": 2, "retrieved": 2}

_ROLE_PROVENANCE: dict[str, Provenance] = {
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "document": "retrieved",
}


def provenance_of(message: Message, declared: str | None = None) -> Provenance:
    """The provenance to record for ``message``: the least trusted of what its role implies
    (an unknown role counts as retrieved), its metadata's :data:`PROVENANCE_KEY` and
    ``declared``; invalid metadata values are ignored."""
    found: Provenance = _ROLE_PROVENANCE.get(str(message.role), "retrieved")
    for value in (message.metadata.get(PROVENANCE_KEY), declared):
        if isinstance(value, str) and DISTRUST.get(value, -1) >= DISTRUST[found]:
            found = value  # type: ignore[assignment]  # checked against DISTRUST
    return found


def with_provenance(scored: ScoredMessage) -> ScoredMessage:
    """``scored`` with a valid provenance (entries stored before it existed get their role's)."""
    message = scored.message
    recorded = message.metadata.get(PROVENANCE_KEY)
    if isinstance(recorded, str) and recorded in DISTRUST:
        return scored
    message.metadata = {**message.metadata, PROVENANCE_KEY: provenance_of(message)}
    return scored
