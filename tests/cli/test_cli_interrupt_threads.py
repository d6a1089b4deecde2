"""Ctrl-C heard whichever thread the kernel hands it to (goagent_py/_interrupt.py).

Each case runs in a child interpreter: a SIGINT the code under test failed to take would end
the test process itself. ``signal.pthread_kill`` sends the signal to one chosen thread, which
is what the kernel does with a process's SIGINT when it picks a thread other than the main one.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GENEROUS = 120.0  # seconds; the machine may be at load 10+

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")


def _child(program: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(program)],
        capture_output=True,
        text=True,
        timeout=GENEROUS,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )


_SIGNAL_FROM = """
import asyncio, os, signal, sys, threading
from tests.interrupting import asleep_in_the_event_loop

def signal_from_a_thread():
    '''A thread that catches SIGINT (sent to itself) while it blocks in a read, as the prompt's
    reader does; the main thread sleeps in the event loop meanwhile.'''
    r, w = os.pipe()
    started = threading.Event()

    def read():
        started.set()
        asleep_in_the_event_loop(threading.main_thread().native_id)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)
        os.read(r, 1)  # never answered

    threading.Thread(target=read, daemon=True).start()
    started.wait()
"""


def test_run_command_ends_with_keyboard_interrupt_when_another_thread_catches_ctrl_c() -> None:
    """asyncio.run's handler runs only when the main thread wakes, and nothing woke it."""
    done = _child(
        _SIGNAL_FROM
        + """
from goagent_py._interrupt import run_command

cleaned = []

async def command():
    signal_from_a_thread()
    try:
        await asyncio.get_running_loop().create_future()  # a prompt nobody answers
    finally:
        cleaned.append("cleanup ran")

try:
    run_command(command())
except KeyboardInterrupt:
    print("interrupted", cleaned)
    sys.exit(130)
"""
    )
    assert done.returncode == 130, done
    assert done.stdout.strip() == "interrupted ['cleanup ran']", done
    assert done.stderr == "", done


def test_a_block_takes_ctrl_c_over_and_gives_it_back_when_it_ends() -> None:
    """Nested blocks: the innermost hears Ctrl-C; when it ends the one before hears it again
    (``loop.remove_signal_handler`` put Python's default back instead, and no thread but the
    main one could then wake the loop)."""
    done = _child(
        _SIGNAL_FROM
        + """
from goagent_py._interrupt import on_interrupt, run_command

heard = []

async def command():
    outer_got = asyncio.Event()
    inner_got = asyncio.Event()
    with on_interrupt(lambda: (heard.append("outer"), outer_got.set())):
        with on_interrupt(lambda: (heard.append("inner"), inner_got.set())):
            signal_from_a_thread()
            await inner_got.wait()
        signal_from_a_thread()
        await outer_got.wait()
    signal_from_a_thread()  # the command's own: it ends
    await asyncio.get_running_loop().create_future()

try:
    run_command(command())
except KeyboardInterrupt:
    print(heard)
    sys.exit(130)
"""
    )
    assert done.returncode == 130, done
    assert done.stdout.strip() == "['inner', 'outer']", done


def test_a_second_ctrl_c_during_the_cleanup_ends_it_at_once() -> None:
    """As asyncio.run: the first Ctrl-C cancels the command, a second interrupts its cleanup."""
    done = _child(
        _SIGNAL_FROM
        + """
from goagent_py._interrupt import run_command

async def command():
    signal_from_a_thread()
    try:
        await asyncio.get_running_loop().create_future()
    finally:
        signal_from_a_thread()
        await asyncio.get_running_loop().create_future()  # a cleanup that would never end

try:
    run_command(command())
except KeyboardInterrupt:
    print("interrupted twice")
    sys.exit(130)
"""
    )
    assert done.returncode == 130, done
    assert done.stdout.strip() == "interrupted twice", done


def test_a_cancel_that_is_not_ctrl_c_stays_a_cancel() -> None:
    """The command cancelled by its own code ends with CancelledError, not KeyboardInterrupt."""
    done = _child(
        """
import asyncio, sys
from goagent_py._interrupt import run_command

async def command():
    asyncio.current_task().cancel()
    await asyncio.sleep(0)

try:
    run_command(command())
except asyncio.CancelledError:
    print("cancelled")
except KeyboardInterrupt:
    print("interrupted")
"""
    )
    assert done.returncode == 0, done
    assert done.stdout.strip() == "cancelled", done


def test_the_programs_own_wakeup_descriptor_is_put_back() -> None:
    """A program that set ``signal.set_wakeup_fd`` itself gets it back after the command (the
    loop's removal of its handler set none)."""
    done = _child(
        """
import asyncio, os, signal
from goagent_py._interrupt import run_command

r, w = os.pipe()
os.set_blocking(w, False)
signal.set_wakeup_fd(w)

async def command():
    return "ran"

print(run_command(command()), signal.set_wakeup_fd(-1) == w)
"""
    )
    assert done.returncode == 0, done
    assert done.stdout.strip() == "ran True", done


def test_a_programs_own_sigint_handler_is_left_to_it() -> None:
    """As asyncio.run: a SIGINT handler the program installed is not replaced."""
    done = _child(
        """
import asyncio, signal
from goagent_py._interrupt import run_command

heard = []

def own(signum, frame):
    heard.append("own")

signal.signal(signal.SIGINT, own)

async def command():
    signal.raise_signal(signal.SIGINT)
    await asyncio.sleep(0)
    return "ran"

print(run_command(command()), heard, signal.getsignal(signal.SIGINT) is own)
"""
    )
    assert done.returncode == 0, done
    assert done.stdout.strip() == "ran ['own'] True", done
