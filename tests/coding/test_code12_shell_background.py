"""A shell call ends when its program ends, whatever it left running in the background (code12).

A child that inherits the output pipe (``sleep 100 &``, a daemon the command starts) held the
call until its timeout, which then said "killed after N seconds" of a command that had ended.
"""

from __future__ import annotations

import os
import select
import sys
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import shell_tool
from goagent_py.coding._sandbox import sandbox_available

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")
PY = os.path.realpath(sys.executable)
SANDBOX, WHY_NOT = sandbox_available()
needs_sandbox = pytest.mark.skipif(not SANDBOX, reason=f"no shell sandbox here: {WHY_NOT}")


async def _run(tool: Any, **args: Any) -> str:
    blocks = await tool.execute(args)
    return "".join(getattr(b, "text", "") for b in blocks)


def _exited(pid: int) -> bool:
    """Whether ``pid`` has ended (its pidfd turns readable at exit: an event, not a poll)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 30)[0])
    finally:
        os.close(fd)


async def test_a_background_child_holding_the_pipe_does_not_hold_the_call(tmp_path: Path) -> None:
    # The tool's limit is far above what the test can wait for: on a call held until its
    # timeout the answer would say "killed after 600 seconds".
    sh = shell_tool(tmp_path, timeout=600, allow_shell=True)
    out = await _run(sh, command="sleep 100 & echo started $!; echo done", timeout=600)
    assert "killed after" not in out
    assert out.endswith("done\nexit code: 0")
    pid = int(out.split()[1])
    assert _exited(pid), "the background child outlived the call"


async def test_output_the_program_wrote_before_it_ended_is_all_kept(tmp_path: Path) -> None:
    # A background child that holds the pipe; the program writes a lot, then ends.
    code = (
        "import subprocess, sys\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
        "sys.stdout.write('x' * 200000 + '\\nend\\n')\n"
    )
    sh = shell_tool(tmp_path, timeout=600, max_output_chars=1_000_000)
    out = await _run(sh, argv=[PY, "-c", code])
    assert out == "x" * 200000 + "\nend\nexit code: 0"


async def test_a_daemon_that_left_the_group_does_not_hold_the_call(tmp_path: Path) -> None:
    # setsid: out of the process group, out of reach of the kill; it keeps the pipe open. The
    # program ends only once the daemon has left the group (it closes the "left" pipe then).
    daemon = "import os, sys, time; os.setsid(); os.close(int(sys.argv[1])); time.sleep(60)"
    code = (
        "import os, subprocess, sys\n"
        "r, w = os.pipe()\n"
        f"p = subprocess.Popen([sys.executable, '-c', {daemon!r}, str(w)], pass_fds=[w])\n"
        "os.close(w)\n"
        "os.read(r, 1)\n"
        "print('daemon', p.pid, flush=True)\n"
    )
    sh = shell_tool(tmp_path, timeout=600)
    out = await _run(sh, argv=[PY, "-c", code])
    assert "killed after" not in out
    assert "left its process group (setsid) and still runs" in out
    assert out.endswith("exit code: 0")
    os.kill(int(out.split()[1]), 9)  # not the tool's to kill (documented): the test's


@needs_sandbox
async def test_a_sandboxed_background_child_ends_with_the_command(tmp_path: Path) -> None:
    sh = shell_tool(tmp_path, timeout=600, allow_shell=True, sandbox=True)
    out = await _run(sh, command="sleep 100 & echo started; echo done", timeout=600)
    assert "killed after" not in out
    assert out.endswith("done\nexit code: 0")


async def test_the_timeout_still_kills_a_program_that_runs_on(tmp_path: Path) -> None:
    sh = shell_tool(tmp_path, timeout=1)
    out = await _run(sh, argv=[PY, "-c", "print('up', flush=True); import time; time.sleep(600)"])
    assert out.startswith("up\n[killed after 1 seconds (timeout)]")
