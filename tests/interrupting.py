"""Waiting until a process's main thread sleeps in its event loop, for the tests that send a
signal to another of its threads (tests/coding/test_coding_prompt_interrupt.py,
tests/cli/test_cli_interrupt_threads.py).

A signal caught by another thread while the main thread still runs Python code is handled at
its next instruction anyway; the defect those tests pin shows only once the main thread
sleeps in ``epoll_wait`` with nothing to wake it. Linux says what a thread waits in through
``/proc/self/task/<id>/wchan``; where that is not readable the wait gives up at its deadline
and the signal goes at once (the test still passes on correct code, and may not fail on the
defect).
"""

from __future__ import annotations

import time

__all__ = ["asleep_in_the_event_loop"]

# Linux's system calls an asyncio event loop sleeps in: epoll_wait, epoll_pwait, epoll_pwait2
# (x86_64 numbers; aarch64's epoll_pwait is 22).
_EPOLL_CALLS = {"232", "281", "441", "22"}


def asleep_in_the_event_loop(native_id: int, timeout: float = 30.0) -> bool:
    """Wait until the thread ``native_id`` of this process sleeps in ``epoll_wait``; whether it
    was seen to (False: not seen within ``timeout`` seconds, or the kernel does not say)."""
    task = f"/proc/self/task/{native_id}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with open(f"{task}/wchan") as f:
                wchan = f.read()
            with open(f"{task}/syscall") as f:
                call = f.read().split(maxsplit=1)[0]
        except OSError:
            return False
        if "epoll" in wchan or call in _EPOLL_CALLS:
            return True
        time.sleep(0.001)  # polling a condition, not timing: the deadline only bounds it
    return False
