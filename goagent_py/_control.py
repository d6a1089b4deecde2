"""The levers a session holds on its runs: steering and follow-up queues, and abort."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import Literal

from goagent_py.messages import Message

__all__ = ["AbortMode", "QueueMode", "RunControl"]

AbortMode = Literal["now", "after_tools", "after_turn"]
QueueMode = Literal["one_at_a_time", "all"]


class RunControl:
    """The levers a session holds on its runs: queues and abort. Thread-safe.

    The run calls :meth:`take_steering` / :meth:`take_follow_ups` at its drain points and reads
    :attr:`abort_mode`; :meth:`abort` wakes a run waiting on the model or on tools.
    """

    def __init__(
        self,
        *,
        steering_mode: QueueMode = "one_at_a_time",
        follow_up_mode: QueueMode = "one_at_a_time",
        on_change: Callable[[str, int], None] | None = None,
    ) -> None:
        self.steering_mode: QueueMode = steering_mode
        self.follow_up_mode: QueueMode = follow_up_mode
        self._lock = threading.Lock()
        self._steering: list[Message] = []
        self._follow_ups: list[Message] = []
        self.abort_mode: AbortMode | None = None
        self.abort_reason = ""
        self._on_change = on_change
        self._wake: Callable[[], None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- queues ------------------------------------------------------------------------------

    def push(self, queue: Literal["steering", "follow_up"], message: Message) -> None:
        """Queue ``message`` (from any thread or task)."""
        with self._lock:
            target = self._steering if queue == "steering" else self._follow_ups
            target.append(message)
            size = len(target)
        if self._on_change is not None:
            self._on_change(queue, size)

    def _take(self, queue: Literal["steering", "follow_up"]) -> list[Message]:
        with self._lock:
            target = self._steering if queue == "steering" else self._follow_ups
            mode = self.steering_mode if queue == "steering" else self.follow_up_mode
            if not target:
                return []
            taken = list(target) if mode == "all" else [target[0]]
            del target[: len(taken)]
            size = len(target)
        if self._on_change is not None:
            self._on_change(queue, size)
        return taken

    def take_steering(self) -> list[Message]:
        """The steering messages to inject now (one, or all, by the queue's mode)."""
        return self._take("steering")

    def take_follow_ups(self) -> list[Message]:
        """The follow-up messages to inject now (one, or all, by the queue's mode)."""
        return self._take("follow_up")

    def sizes(self) -> tuple[int, int]:
        """(steering, follow-up) queue sizes."""
        with self._lock:
            return len(self._steering), len(self._follow_ups)

    def peek(self) -> tuple[list[Message], list[Message]]:
        """Copies of the (steering, follow-up) queues."""
        with self._lock:
            return list(self._steering), list(self._follow_ups)

    def clear(self, queue: Literal["steering", "follow_up"] | None = None) -> None:
        """Drop queued messages (both queues when ``queue`` is None)."""
        with self._lock:
            if queue in (None, "steering"):
                self._steering.clear()
            if queue in (None, "follow_up"):
                self._follow_ups.clear()
        if self._on_change is not None:
            for name in ("steering", "follow_up") if queue is None else (queue,):
                self._on_change(name, 0)

    def guards_taken(self) -> bool:
        """Whether the input guardrails check the queued messages a run takes (always, here;
        a durable workflow replaying a history recorded before they did says no)."""
        return True

    def said_taken(self) -> bool:
        """Whether a run treats the queued messages it takes as the user's words for long-term
        memory (recalled for, stored through the write policy: always, here; a durable
        workflow replaying a history recorded before it did says no)."""
        return True

    # -- abort -------------------------------------------------------------------------------

    def abort(self, mode: AbortMode = "now", reason: str = "") -> None:
        """Ask the current run to stop (from any thread or task)."""
        self.abort_mode = mode
        self.abort_reason = reason
        wake, loop = self._wake, self._loop
        if wake is None or loop is None or loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            wake()
        else:
            loop.call_soon_threadsafe(wake)

    def _attach(self, wake: Callable[[], None] | None) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = wake
