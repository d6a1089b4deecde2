"""The storage protocol behind short-term memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from goagent_py.messages import Message

__all__ = ["Storage"]


@runtime_checkable
class Storage(Protocol):
    """Keeps one conversation, in order; implement it to put history somewhere else.

    Implementations must be safe to call from concurrent tasks, must store copies (a caller that
    mutates a message afterwards does not change what is stored) and must fail with
    :class:`~goagent_py.errors.MemoryStoreError`.
    """

    async def load(self) -> list[Message]:
        """Every stored message, oldest first (new objects the caller may mutate)."""
        ...

    async def append(self, messages: Sequence[Message]) -> None:
        """Add ``messages`` at the end, all or none of them."""
        ...

    async def clear(self) -> None:
        """Forget the conversation."""
        ...
