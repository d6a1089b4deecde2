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
