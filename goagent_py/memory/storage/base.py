"""The storage protocol behind short-term memory."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from goagent_py.errors import ConfigurationError
from goagent_py.messages import Message

__all__ = ["Storage"]


def check_append_key(key: object) -> None:
    """Refuse what cannot key an ``append_once`` (the storages that have one share the rule).

    Raises:
        ConfigurationError: ``key`` is not a non-empty string.
    """
    if not isinstance(key, str) or not key:
        raise ConfigurationError(f"append_once: key must be a non-empty string, got {key!r}")


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
        """Forget the conversation.

        A storage that others can clear (another process, another task) should refuse, with
        :class:`~goagent_py.errors.ConversationClearedError`, an append whose caller loaded
        the conversation before the clear, as the storages of this package do
        (docs/sessions.md "A conversation cleared under a run"): the rest of a cleared turn
        would otherwise open the conversation on an assistant message or a tool result.
        """
        ...
