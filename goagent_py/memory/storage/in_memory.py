"""A storage in a Python list: the default, for one process and tests."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence

from goagent_py._deepcopy import deepcopy
from goagent_py.messages import Message

__all__ = ["InMemoryStorage"]


class InMemoryStorage:
    """Keeps the conversation in memory; lost when the process ends.

    Messages are deep-copied on the way in and out (binary payloads are immutable ``bytes`` and
    shared), so neither the caller's later changes nor changes to loaded messages reach what is
    stored. Safe to share between tasks and threads.
    """

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._lock = threading.Lock()

    async def load(self) -> list[Message]:
        """Copies of the stored messages, oldest first."""
        with self._lock:
            return deepcopy(self._messages)

    async def append(self, messages: Sequence[Message]) -> None:
        """Store copies of ``messages`` at the end."""
        copies = deepcopy(list(messages))
        with self._lock:
            self._messages.extend(copies)

    async def update_where(
        self, match: Callable[[Message], bool], update: Callable[[Message], Message]
    ) -> Message | None:
        """Replace the newest message ``match`` accepts with ``update(message)``, atomically
        (under the storage's lock); None when none matches."""
        with self._lock:
            for i in range(len(self._messages) - 1, -1, -1):
                current = deepcopy(self._messages[i])
                if match(current):
                    new = update(current)
                    self._messages[i] = deepcopy(new)
                    return new
        return None

    async def clear(self) -> None:
        """Forget every message."""
        with self._lock:
            self._messages.clear()

    def __len__(self) -> int:
        return len(self._messages)

    def __repr__(self) -> str:
        return f"InMemoryStorage({len(self._messages)} messages)"
