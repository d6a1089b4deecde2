"""Ctrl-C at ``goagent-py code --plain``'s ``>`` prompt ends the command at once (exit 130).

Before review7b the prompt's ``input()`` ran in the executor, and ``asyncio.run`` waited for
that thread: the process ended only after the user pressed Enter. The real command runs in a
subprocess (the entry point as pip's script runs it) on a scripted provider, with its stdin a
pipe that stays open, so nothing but the signal can end the read.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_SCRIPTED = """
import goagent_py.cli._common as common
from goagent_py.testing import ScriptedProvider

async def pick(spec, base_url=None):
    return common.Picked(ScriptedProvider(), "scripted", "scripted-model", "test")

common.pick_provider = pick
import sys
sys.argv[1:] = {argv!r}
"""

GENEROUS = 120.0  # seconds; the machine may be at load 10+


def _console_script() -> str:
    """The text pip's installer writes for the ``goagent-py`` entry point."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["goagent-py"].split(":")
    return f"import sys\nfrom {module} import {function}\nsys.exit({function}())\n"


def _read_until(fd: int, wanted: bytes, deadline: float) -> bytes:
    """Read ``fd`` until ``wanted`` ends what was read (the prompt has no newline)."""
    seen = b""
    while not seen.endswith(wanted):
        left = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(left, 0))
        if not ready:
            raise AssertionError(f"no {wanted!r} within {GENEROUS} s; stdout so far: {seen!r}")
        chunk = os.read(fd, 4096)
        if not chunk:
            raise AssertionError(f"stdout closed before {wanted!r}: {seen!r}")
        seen += chunk
    return seen


def _program(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    root = tmp_path / "work"
    root.mkdir()
    program = _SCRIPTED.format(argv=["code", "--plain", "--root", str(root)]) + _console_script()
    env = {**os.environ, "GOAGENT_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    env.pop("PYTHONSTARTUP", None)
    return [sys.executable, "-c", program], env


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_at_the_prompt_ends_code_plain_at_once_with_130(tmp_path: Path) -> None:
    """Stdin a pipe that stays open (a driver, a script): the read was ``input()`` through
    ``sys.stdin``'s buffer, and the interpreter aborted at exit (SIGABRT, "Fatal Python error:
    _enter_buffered_busy") because the reading thread held the buffer's lock."""
    argv, env = _program(tmp_path)
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,  # kept open: the prompt's read never sees a line or an end
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=tmp_path,
    ) as proc:
        assert proc.stdout is not None
        assert proc.stderr is not None
        try:
            # The prompt is printed by the read itself, after asyncio.run has installed its
            # SIGINT handler: from here on, Ctrl-C is the user's at the prompt.
            shown = _read_until(proc.stdout.fileno(), b"\n> ", time.monotonic() + GENEROUS)
            proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
            code = proc.wait(timeout=GENEROUS)  # was: waited for a line that never came
        finally:
            if proc.poll() is None:
                proc.kill()
        rest = proc.stdout.read()
        err = proc.stderr.read().decode()
    assert code == 130, (code, err)
    assert b"session " in shown
    assert "Traceback" not in err, err
    assert err.strip() == "", err
    assert rest.strip() == b"", rest


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and terminals")
def test_ctrl_c_at_the_prompt_of_a_terminal_ends_code_plain_at_once_with_130(
    tmp_path: Path,
) -> None:
    """On a terminal (a pseudo-terminal for stdin, stdout and stderr): ``input()`` in a daemon
    thread, which ``asyncio.run`` does not wait for (review7b; an executor thread made the
    process wait for Enter)."""
    import pty

    argv, env = _program(tmp_path)
    terminal, user_side = pty.openpty()
    try:
        with subprocess.Popen(
            argv, stdin=user_side, stdout=user_side, stderr=user_side, env=env, cwd=tmp_path
        ) as proc:
            os.close(user_side)
            user_side = -1
            try:
                shown = _read_until(terminal, b"\n> ", time.monotonic() + GENEROUS)
                proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
                code = proc.wait(timeout=GENEROUS)
            finally:
                if proc.poll() is None:
                    proc.kill()
        rest = b""
        with contextlib.suppress(OSError):  # EIO once the terminal's last user has gone
            while select.select([terminal], [], [], 0)[0]:
                chunk = os.read(terminal, 4096)
                if not chunk:
                    break
                rest += chunk
    finally:
        os.close(terminal)
        if user_side >= 0:
            os.close(user_side)
    assert code == 130, (code, rest)
    assert b"session " in shown
    assert rest.strip() == b"", rest  # no traceback, no fatal error
