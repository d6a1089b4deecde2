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
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO

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


# The kernel hands a process's SIGINT to any thread that does not block it; this makes its
# pick the prompt's reading thread, every time (signal.pthread_kill is a signal to one thread).
_CAUGHT_BY_THE_READER = """
import signal
import threading

import goagent_py.coding.repl as repl
from tests.interrupting import asleep_in_the_event_loop

_stdin_reader = repl.stdin_reader


def stdin_reader():
    read = _stdin_reader()

    def caught_here(prompt):
        asleep_in_the_event_loop(threading.main_thread().native_id)
        signal.pthread_kill(threading.get_ident(), signal.SIGINT)  # delivered in this thread
        return read(prompt)

    return caught_here


repl.stdin_reader = stdin_reader
"""


def _program(tmp_path: Path, *, prelude: str = "") -> tuple[list[str], dict[str, str]]:
    root = tmp_path / "work"
    root.mkdir()
    program = (
        _SCRIPTED.format(argv=["code", "--plain", "--root", str(root)])
        + prelude
        + _console_script()
    )
    # PYTHONFAULTHANDLER: a child that hangs is aborted by _wait_or_dump, and its threads'
    # tracebacks go to its stderr (CI once saw this command outlive the signal by 120 s).
    env = {
        **os.environ,
        "GOAGENT_HOME": str(tmp_path / "home"),
        "PYTHONPATH": str(ROOT),
        "PYTHONFAULTHANDLER": "1",
    }
    env.pop("PYTHONSTARTUP", None)
    return [sys.executable, "-c", program], env


class _Drained:
    """Reads ``stream`` to its end in a daemon thread; :meth:`all` waits for that end."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._chunks: list[bytes] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: IO[bytes]) -> None:
        while chunk := os.read(stream.fileno(), 65536):
            self._chunks.append(chunk)

    def all(self) -> bytes:
        self._thread.join(timeout=GENEROUS)
        return b"".join(self._chunks)


@contextlib.contextmanager
def _piped(
    argv: list[str], env: dict[str, str], cwd: Path
) -> Iterator[tuple[subprocess.Popen[bytes], _Drained]]:
    """``argv`` with stdin a pipe kept open (a driver, a script: only a signal can end the
    prompt's read), stdout a pipe, and stderr read as it comes (a child writing more than a
    pipe holds must not block on it; stdin stays open, so no ``communicate()``). The child is
    killed if the block leaves before it ends; read its pipes inside the block (leaving it
    closes them)."""
    with subprocess.Popen(
        argv,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        cwd=cwd,
    ) as proc:
        assert proc.stderr is not None
        errors = _Drained(proc.stderr)
        try:
            yield proc, errors
        finally:
            if proc.poll() is None:
                proc.kill()


def _drain(terminal: int) -> bytes:
    """What the pseudo-terminal holds now."""
    rest = b""
    with contextlib.suppress(OSError):  # EIO once the terminal's last user has gone
        while select.select([terminal], [], [], 0)[0]:
            chunk = os.read(terminal, 4096)
            if not chunk:
                break
            rest += chunk
    return rest


def _wait_or_dump(proc: subprocess.Popen[bytes], read_err: Callable[[], bytes]) -> int:
    """``proc``'s exit status; if it has not ended within :data:`GENEROUS` seconds, fail with
    the tracebacks of its threads (SIGABRT makes faulthandler write them to its stderr)."""
    try:
        return proc.wait(timeout=GENEROUS)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGABRT)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        dump = read_err().decode(errors="replace")
        pytest.fail(f"still running {GENEROUS} s after Ctrl-C; its threads:\n{dump}")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_at_the_prompt_ends_code_plain_at_once_with_130(tmp_path: Path) -> None:
    """Stdin a pipe that stays open (a driver, a script): the read was ``input()`` through
    ``sys.stdin``'s buffer, and the interpreter aborted at exit (SIGABRT, "Fatal Python error:
    _enter_buffered_busy") because the reading thread held the buffer's lock."""
    argv, env = _program(tmp_path)
    with _piped(argv, env, tmp_path) as (proc, errors):
        assert proc.stdout is not None
        # The prompt is printed by the read itself, after run_command has given Ctrl-C to
        # the loop (goagent_py/_interrupt.py): from here on, Ctrl-C is the user's at the
        # prompt.
        shown = _read_until(proc.stdout.fileno(), b"\n> ", time.monotonic() + GENEROUS)
        proc.send_signal(signal.SIGINT)  # what Ctrl-C sends
        code = _wait_or_dump(proc, errors.all)  # was: waited for a line never sent
        rest = proc.stdout.read()
        err = errors.all().decode()
    assert code == 130, (code, err)
    assert b"session " in shown
    assert "Traceback" not in err, err
    assert err.strip() == "", err
    assert rest.strip() == b"", rest


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_ctrl_c_caught_by_the_reading_thread_ends_code_plain_with_130(tmp_path: Path) -> None:
    """The kernel gave the Ctrl-C to the thread reading the prompt, not the main thread: the
    main thread slept in the event loop's select() and nothing woke it, so ``asyncio.run``'s
    handler never ran and the command waited for ever (CI: one run in ~25 under load).
    Here the reader signals itself, so the delivery is the reader's on every run."""
    argv, env = _program(tmp_path, prelude=_CAUGHT_BY_THE_READER)
    with _piped(argv, env, tmp_path) as (proc, errors):
        assert proc.stdout is not None
        code = _wait_or_dump(proc, errors.all)  # was: waited for ever
        shown = proc.stdout.read()
        err = errors.all().decode()
    assert code == 130, (code, err)
    assert b"session " in shown
    assert err.strip() == "", err


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
                code = _wait_or_dump(proc, lambda: _drain(terminal))
            finally:
                if proc.poll() is None:
                    proc.kill()
        rest = _drain(terminal)
    finally:
        os.close(terminal)
        if user_side >= 0:
            os.close(user_side)
    assert code == 130, (code, rest)
    assert b"session " in shown
    assert rest.strip() == b"", rest  # no traceback, no fatal error
