"""A clock and a wait the A2A and MCP servers' idle sweep uses in tests
(``goagent_py.memory._clients.CLOCK`` and ``sweep_wait``): the test moves the clock and lets
each wait end, and learns when the sweep waits again (it has swept). No sleep. Not a test
module."""

from __future__ import annotations

import asyncio

import pytest

from goagent_py.memory import _clients


class Ticks:
    """The wall clock the ledgers read, and the sweep's waits, driven by the test."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, now: float = 1_000_000.0) -> None:
        self.now = now
        self.waits: asyncio.Queue[float] = asyncio.Queue()  # what each wait was asked for
        self._go: asyncio.Queue[None] = asyncio.Queue()
        monkeypatch.setattr(_clients, "CLOCK", self.clock)
        monkeypatch.setattr(_clients, "sweep_wait", self.wait)

    def clock(self) -> float:
        return self.now

    async def wait(self, seconds: float) -> None:
        self.waits.put_nowait(seconds)
        await self._go.get()

    async def sweep_after(self, seconds: float) -> float:
        """Move the clock ``seconds`` on, end the sweep's wait, and return once it has swept:
        how long it waits next."""
        self.now += seconds
        self._go.put_nowait(None)
        return await self.next_wait()

    async def next_wait(self) -> float:
        """How long the sweep waits next, once it does (a bound only for a sweep that never
        comes: a failure, not a timing)."""
        return await asyncio.wait_for(self.waits.get(), 300)
