"""The chat's line reader (goagent_py/cli/_input.py) on a terminal."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import pytest

from goagent_py.cli import _input


async def test_ctrl_c_still_reaches_the_chat_after_a_prompt_toolkit_prompt(tmp_path: Path) -> None:
    """prompt_toolkit's prompt replaced the chat's SIGINT handler while it read a line and
    removed it afterwards: Ctrl-C during an answer then did nothing (issue 37, seen in tmux)."""
    pytest.importorskip("prompt_toolkit")
    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    loop = asyncio.get_running_loop()
    pressed = asyncio.Event()
    loop.add_signal_handler(signal.SIGINT, pressed.set)  # what chat_loop installs
    try:
        with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
            pipe.send_text("hello\r")
            lines = _input._prompt_toolkit_lines("you> ", tmp_path / "history")
            assert await anext(lines) == "hello"
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C while the answer streams
            await asyncio.wait_for(pressed.wait(), 30)
            await lines.aclose()  # type: ignore[attr-defined]
    finally:
        loop.remove_signal_handler(signal.SIGINT)


async def test_ctrl_c_at_the_prompt_toolkit_prompt_ends_the_chat_as_interrupted(
    tmp_path: Path,
) -> None:
    """Ctrl-C at the prompt quits with 130 (docs/cli.md), as with the readline reader; the
    prompt_toolkit reader ended its lines like Ctrl-D and the chat exited 0."""
    pytest.importorskip("prompt_toolkit")
    import io

    from prompt_toolkit.application import create_app_session
    from prompt_toolkit.input import create_pipe_input
    from prompt_toolkit.output import DummyOutput

    from goagent_py import Agent
    from goagent_py.cli import main as cli
    from goagent_py.testing import ScriptedProvider

    console = cli.Console(io.StringIO(), io.StringIO(), interactive=False)
    agent = Agent(provider=ScriptedProvider(), model="m")
    with create_pipe_input() as pipe, create_app_session(input=pipe, output=DummyOutput()):
        pipe.send_text("\x03")  # Ctrl-C, a key at the raw-mode prompt
        lines = _input._prompt_toolkit_lines("you> ", tmp_path / "history")
        code = await cli.chat_loop(agent, lines, console, cli.ChatState(), None)
    assert code == cli.EXIT_INTERRUPTED


def test_a_pipes_lines_are_read_whole_and_in_order_by_the_fd_reader(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``code --plain`` on a pipe reads with ``os.read`` (no lock of ``sys.stdin``'s buffer
    held while it waits): lines split at newlines across reads, the prompt shown, a last line
    without a newline kept, then the end."""
    read_fd, write_fd = os.pipe()
    try:
        os.write(write_fd, "first\nsecond ✓\nthi".encode())
        read = _input._FdLines(read_fd)
        assert read("> ") == "first"
        assert read("> ") == "second ✓"
        os.write(write_fd, b"rd\r\nlast")
        os.close(write_fd)
        write_fd = -1
        assert read("> ") == "third\r"  # as input() gives it: only the newline goes
        assert read("") == "last"
        with pytest.raises(EOFError):
            read("> ")
    finally:
        os.close(read_fd)
        if write_fd >= 0:
            os.close(write_fd)
    assert capsys.readouterr().out == "> " * 4
