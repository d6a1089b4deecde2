"""Ctrl-C during ``Agent.run_sync`` while a sync tool runs in its worker thread.

The kernel hands a process's SIGINT to any thread; when it picked the tool's worker, the main
thread slept in the event loop with nothing to wake it, and ``asyncio.run``'s handler waited
until the tool returned (for a tool that waits on input: for ever). ``run_sync`` now hears it
through the loop (goagent_py/_interrupt.py). Run in a child interpreter: a Ctrl-C the code
failed to take would end the test process itself.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GENEROUS = 120.0  # seconds; the machine may be at load 10+

_PROGRAM = """
import os, signal, sys, threading

from goagent_py import Agent, ToolCall, tool
from goagent_py.testing import ScriptedProvider, tool_call_response
from tests.interrupting import asleep_in_the_event_loop

r, w = os.pipe()


@tool
def wait_for_the_user() -> str:
    '''Waits for a line nobody types; Ctrl-C is caught in this thread.'''
    asleep_in_the_event_loop(threading.main_thread().native_id)
    signal.pthread_kill(threading.get_ident(), signal.SIGINT)
    return os.read(r, 1).decode()


model = ScriptedProvider(tool_call_response(ToolCall("c1", "wait_for_the_user", {})), "done")
agent = Agent(provider=model, model="any", tools=[wait_for_the_user])
try:
    agent.run_sync("go")
except KeyboardInterrupt:
    print("interrupted")
    sys.exit(130)
print("ended without the interrupt")
"""


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_caught_by_a_sync_tools_thread_interrupts_run_sync() -> None:
    try:
        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(_PROGRAM)],
            capture_output=True,
            text=True,
            timeout=GENEROUS,
            cwd=ROOT,
            env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        )
    except subprocess.TimeoutExpired:  # was: the run waited for the tool, which waits for ever
        pytest.fail(f"run_sync still running {GENEROUS} s after Ctrl-C")
    assert done.returncode == 130, done
    assert done.stdout.strip() == "interrupted", done
