"""What the agent needs from memory: the protocols, and the long-term write policies."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from goagent_py.messages import ContentBlock, Message, ScoredMessage

__all__ = [
    "LongTermMemoryProtocol",
    "ShortTermMemoryProtocol",
    "WritePolicy",
    "min_length",
    "store_always",
]


@runtime_checkable
class ShortTermMemoryProtocol(Protocol):
    """The conversation so far: what the agent loads before a run and appends after it."""

    async def messages(self) -> list[Message]:
        """The history to send, oldest first (after any window policy)."""
        ...

    async def append(self, *messages: Message) -> None:
        """Add the messages of a finished turn, atomically."""
        ...


@runtime_checkable
class LongTermMemoryProtocol(Protocol):
    """Semantic memory across sessions: store what matters, recall what is relevant."""

    async def retrieve(
        self, query: list[ContentBlock], *, top_k: int, session: str = ""
    ) -> list[ScoredMessage]:
        """The ``top_k`` stored messages most relevant to ``query``, best first.

        ``session`` is the agent's name ("" for none): only that session's memories come back.
        A query with nothing to embed (an image for a text embedder) returns ``[]``.
        """
        ...

    async def store(self, messages: list[Message], *, session: str = "") -> None:
        """Store ``messages`` under ``session``."""
        ...


WritePolicy = Callable[[Message, Message], list[Message] | None]
"""Decides what a finished turn leaves in long-term memory.

Called with the user message and the final assistant message; returns ``None`` to store nothing
(long-term ``store`` is not called), or the list of messages to store (``[]`` calls ``store`` with
nothing).
"""


def store_always(user: Message, assistant: Message) -> list[Message] | None:
    """Store the user message and the final answer of every turn."""
    return [user, assistant]


def min_length(n: int) -> WritePolicy:
    """Store a turn only when its text is longer than ``n`` UTF-8 bytes (user + answer)."""
    if n < 0:
        raise ValueError(f"min_length({n}): n must be >= 0")

    def policy(user: Message, assistant: Message) -> list[Message] | None:
        size = len(user.text.encode()) + len(assistant.text.encode())
        return [user, assistant] if size > n else None

    return policy
