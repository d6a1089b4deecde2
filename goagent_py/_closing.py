"""Closing the async generators a run drives, when the run may be dropped unclosed.

A durable worker that lets go of a workflow without evicting it (a worker of yours, Temporal's
own ``Worker``, that stops while it holds a run the server closed from outside) leaves the run's
coroutines and generators to the garbage collector, which closes them one by one, in no order,
wherever it runs next: another workflow's thread, another event loop, none. There nothing can be
awaited (no loop drives the run), no generator closed (the one a frame awaited stays mid-step:
"aclose(): asynchronous generator is already running") and no context restored (another one is
current). So whoever drives a generator closes it only on its own loop, and only when it is not
mid-step; each frame of a dropped run ends doing nothing (docs/scaling-out.md, "Tracing durable
runs").
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import AsyncGenerator, Iterator
from typing import Any, Generic, TypeVar

__all__ = ["Closing", "away", "close", "scoped"]

G = TypeVar("G", bound=AsyncGenerator[Any, None])


def away(loop: asyncio.AbstractEventLoop | None) -> bool:
    """Whether this frame is being closed away from ``loop``, the loop its run runs on (see the
    module docstring): a frame of a dropped run, closed by the garbage collector."""
    try:
        return asyncio.get_running_loop() is not loop
    except RuntimeError:  # no loop at all: a thread's garbage collection
        return True


async def close(gen: AsyncGenerator[Any, None], loop: asyncio.AbstractEventLoop | None) -> None:
    """``await gen.aclose()`` unless ``gen`` is mid-step or the run is dropped (:func:`away`):
    its own finalizer closes it then, as it closes the frame that drove it."""
    if getattr(gen, "ag_running", False) or away(loop):
        return
    await gen.aclose()


class Closing(Generic[G]):
    """``contextlib.aclosing`` for a generator a run drives, closed by :func:`close`: on the loop
    it was entered on (or ``loop``)."""

    __slots__ = ("gen", "loop")

    def __init__(self, gen: G, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.gen = gen
        self.loop = loop

    async def __aenter__(self) -> G:
        if self.loop is None:
            self.loop = asyncio.get_running_loop()
        return self.gen

    async def __aexit__(self, *exc_info: object) -> None:
        await close(self.gen, self.loop)


@contextlib.contextmanager
def scoped(var: contextvars.ContextVar[Any], value: Any) -> Iterator[None]:
    """``var`` set to ``value`` inside the block and reset on the way out, but not in a frame
    of a dropped run (``GeneratorExit``): the context current there is not the one it was set
    in (see the module docstring). For code off the loop's hot path; the loop and dispatch
    spell the same rule out inline."""
    token = var.set(value)
    try:
        yield
    except GeneratorExit:
        raise
    except BaseException:
        var.reset(token)
        raise
    var.reset(token)
