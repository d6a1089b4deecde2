"""Ctrl-C heard whichever thread the kernel hands it to.

A Ctrl-C is a SIGINT sent to the process, and the kernel delivers it to any of its threads
that does not block it. Python runs a handler installed with ``signal.signal`` in the main
thread only, and only when that thread next runs Python code. A command waiting at its prompt
has its main thread asleep in the event loop's ``select()``; when the kernel handed the signal
to another thread (the prompt's reader, an executor worker), nothing woke the main thread, and
``asyncio.run``'s handler never ran: CI saw ``goagent-py code --plain`` outlive a Ctrl-C by
120 s, one run in about twenty-five on a loaded machine
(tests/coding/test_coding_prompt_interrupt.py forces the delivery to the reader thread).

The event loop's own signal handling (``loop.add_signal_handler``) does not have this gap: the
C-level handler, in whatever thread catches the signal, writes the signal's number to the
loop's wakeup pipe, and the loop wakes and calls the handler. So every command with a prompt
hears Ctrl-C through the loop, and so does ``Agent.run_sync`` (a sync tool runs in a worker
thread, which the kernel may pick as well):

- :func:`run_command` runs a coroutine as ``asyncio.run`` does, Ctrl-C included (the first
  cancels it, and it then ends with ``KeyboardInterrupt``; a second raises
  ``KeyboardInterrupt`` at once), but through the loop. As ``asyncio.run``, it leaves a SIGINT
  handler the program installed itself alone.
- :func:`on_interrupt` lets a block (a REPL, a turn) take Ctrl-C over, and gives it back to the
  handler before it when the block ends (``loop.remove_signal_handler`` would put back
  Python's default handler instead, and take away the wakeup pipe with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import threading
import weakref
from collections.abc import Callable, Coroutine, Iterator
from typing import Any, TypeVar

__all__ = ["on_interrupt", "run_command"]

T = TypeVar("T")

# Per loop, the handlers of the blocks that took Ctrl-C over, innermost last.
_taken: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, list[Callable[[], None]]] = (
    weakref.WeakKeyDictionary()
)


@contextlib.contextmanager
def on_interrupt(handler: Callable[[], None]) -> Iterator[None]:
    """Ctrl-C calls ``handler`` (on the running loop) while the block runs.

    Blocks nest: the innermost block's handler is called, and when it ends the handler of the
    block around it is called again. Where the loop cannot handle signals (Windows, a thread
    other than the main one), the block runs and Ctrl-C stays whatever it was.
    """
    loop = asyncio.get_running_loop()
    if sys.platform == "win32" or threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = _taken.setdefault(loop, [])
    # The program's own wakeup descriptor, if it set one: the loop's replaces it while the
    # loop hears Ctrl-C, and removing the loop's handler sets none (-1) instead of it.
    program_wakeup = _wakeup_fd() if not taken else -1
    try:
        loop.add_signal_handler(signal.SIGINT, handler)
    except (NotImplementedError, RuntimeError, ValueError):
        yield
        return
    entry = _Entry(handler)
    taken.append(entry)
    try:
        yield
    finally:
        taken.remove(entry)  # by identity: the same function may have taken it twice
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
            if taken:
                loop.add_signal_handler(signal.SIGINT, taken[-1])
            else:
                loop.remove_signal_handler(signal.SIGINT)
                if program_wakeup != -1 and _wakeup_fd() == -1:  # the loop has let go of it
                    signal.set_wakeup_fd(program_wakeup)


def _wakeup_fd() -> int:
    """The descriptor ``signal.set_wakeup_fd`` last set (-1: none), left as it was."""
    fd = signal.set_wakeup_fd(-1)
    signal.set_wakeup_fd(fd)
    return fd


class _Entry:
    """One block's handler: compared by identity, so two blocks with one function differ."""

    __slots__ = ("_handler",)

    def __init__(self, handler: Callable[[], None]) -> None:
        self._handler = handler

    def __call__(self) -> None:
        self._handler()


def run_command(
    main: Coroutine[Any, Any, T],
    *,
    loop_factory: Callable[[], asyncio.AbstractEventLoop] | None = None,
) -> T:
    """Run ``main`` to its end on a new event loop, as ``asyncio.run`` does, with Ctrl-C heard
    through the loop (see the module's docstring): the first cancels ``main``, which ends with
    ``KeyboardInterrupt`` once its cleanup has run; a second, while that cleanup still runs,
    raises ``KeyboardInterrupt`` at once. Where SIGINT has a handler other than Python's
    default (the program's own), it is left to that handler, as ``asyncio.run`` leaves it."""
    ours = signal.getsignal(signal.SIGINT) is signal.default_int_handler
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        return runner.run(_interruptible(main) if ours else main)


async def _interruptible(main: Coroutine[Any, Any, T]) -> T:
    task = asyncio.current_task()
    assert task is not None
    presses = 0

    def interrupted() -> None:
        nonlocal presses
        presses += 1
        if presses == 1 and not task.done():
            task.cancel()
            return
        raise KeyboardInterrupt

    with on_interrupt(interrupted):
        try:
            return await main
        except asyncio.CancelledError:
            if presses and task.uncancel() == 0:  # our cancel, not one of the command's own
                raise KeyboardInterrupt from None
            raise
