"""A storage in a Python list: the default, for one process and tests."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator, Callable, Sequence

from goagent_py._deepcopy import deepcopy
from goagent_py._generation import ReadFence, cleared_error
from goagent_py._run_hold import busy_error, held_in_process
from goagent_py.errors import SessionBusyError
from goagent_py.messages import Message

__all__ = ["InMemoryStorage"]


def _busy() -> SessionBusyError:
    return busy_error("this InMemoryStorage's conversation", "")


class InMemoryStorage:
    """Keeps the conversation in memory; lost when the process ends.

    Messages are deep-copied on the way in and out (binary payloads are immutable ``bytes`` and
    shared), so neither the caller's later changes nor changes to loaded messages reach what is
    stored. Safe to share between tasks and threads.

    A task that loaded the conversation before another task cleared it cannot append to it
    until it loads again (:class:`~goagent_py.errors.ConversationClearedError`: see
    docs/sessions.md "A conversation cleared under a run").
    """

    def __init__(self) -> None:
        self._messages: list[Message] = []
        self._lock = threading.Lock()
        self._generation = 0  # clears so far
        self._fence = ReadFence()

    async def load(self) -> list[Message]:
        """Copies of the stored messages, oldest first."""
        with self._lock:
            copies, generation = deepcopy(self._messages), self._generation
        self._fence.read(generation)
        return copies

    async def append(self, messages: Sequence[Message]) -> None:
        """Store copies of ``messages`` at the end.

        Raises:
            ConversationClearedError: the conversation was cleared since this task loaded it.
        """
        copies = deepcopy(list(messages))
        expected = self._fence.expected()
        with self._lock:
            if expected is not None and expected != self._generation:
                raise cleared_error("InMemoryStorage", "")
            self._messages.extend(copies)

    async def update_where(
        self, match: Callable[[Message], bool], update: Callable[[Message], Message]
    ) -> Message | None:
        """Replace the newest message ``match`` accepts with ``update(message)``, atomically
        (under the storage's lock); None when none matches.

        Raises:
            ConversationClearedError: the conversation was cleared since this task loaded it
                (the message it decided on may have come back with a refill: approve14).
        """
        expected = self._fence.expected()
        with self._lock:
            if expected is not None and expected != self._generation:
                raise cleared_error("InMemoryStorage", "")
            for i in range(len(self._messages) - 1, -1, -1):
                current = deepcopy(self._messages[i])
                if match(current):
                    new = update(current)
                    self._messages[i] = deepcopy(new)
                    return new
        return None

    async def clear(self) -> None:
        """Forget every message (a task that loaded them before cannot append until it loads
        again)."""
        with self._lock:
            self._messages.clear()
            self._generation += 1
            generation = self._generation
        self._fence.read(generation)

    @contextlib.asynccontextmanager
    async def hold_run(self) -> AsyncIterator[None]:
        """Hold this conversation for one run: no other run (another
        :class:`~goagent_py.Session` on this storage) runs in it until the ``async with``
        ends (docs/sessions.md "One run at a time").

        Raises:
            SessionBusyError: another run holds the conversation; nothing was written.
        """
        with held_in_process(("memory", id(self)), _busy):
            yield

    def __len__(self) -> int:
        return len(self._messages)

    def __repr__(self) -> str:
        return f"InMemoryStorage({len(self._messages)} messages)"
