"""``goagent-py code --plain`` reads the terminal one line at a time, whoever asked for it.

``input()`` runs in a thread; a question the Ctrl-C abandoned (the approval asked during the
turn it aborted) leaves that ``input()`` waiting. It swallowed the user's next line (a second
``input()`` read the one after), and an executor thread made a Ctrl-C at the prompt wait for
Enter. A fake terminal stands in for ``input`` here: it blocks until the test types a line.
"""

from __future__ import annotations

import asyncio
import builtins
import queue
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding.repl import build_parser, code_main
from goagent_py.testing import ScriptedProvider, tool_call_response

_EOF = object()


class _Terminal:
    """``input`` as a terminal gives it: each call waits for the next line typed."""

    def __init__(self) -> None:
        self.typed: queue.Queue[object] = queue.Queue()
        self.prompts: queue.Queue[str] = queue.Queue()
        self.returned = threading.Event()

    def input(self, prompt: str = "") -> str:
        self.prompts.put(prompt)
        try:
            line = self.typed.get(timeout=180)  # never left blocked past the test
        finally:
            self.returned.set()
        if line is _EOF:
            raise EOFError
        assert isinstance(line, str)
        return line

    async def prompt(self) -> str:
        return await asyncio.to_thread(self.prompts.get, timeout=60)


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[_Terminal]:
    monkeypatch.setenv("GOAGENT_HOME", str(tmp_path / "home"))
    term = _Terminal()
    monkeypatch.setattr(builtins, "input", term.input)
    yield term
    for _ in range(4):  # end any read still waiting
        term.typed.put(_EOF)


async def test_a_line_typed_after_ctrl_c_at_the_approval_question_reaches_the_next_prompt(
    terminal: _Terminal, tmp_path: Path
) -> None:
    provider = ScriptedProvider(
        tool_call_response(("write_file", {"path": "new.py", "content": "print(1)\n"})),
        "the second answer",
    )
    ns = build_parser().parse_args(["--root", str(tmp_path), "--plain"])
    sessions: list[Any] = []
    turn_over = asyncio.Event()

    def write(text: str) -> None:
        if text.startswith("["):  # the status line after each turn
            turn_over.set()

    main = asyncio.create_task(
        code_main(ns, provider=provider, write=write, on_session=sessions.append)
    )
    assert await terminal.prompt() == "> "
    terminal.typed.put("make a file")
    assert (await terminal.prompt()).startswith("allow write_file new.py?")
    sessions[0].abort("now", reason="Ctrl-C")  # what Ctrl-C does during a turn
    await turn_over.wait()
    terminal.typed.put("second question")
    terminal.typed.put(_EOF)
    assert await asyncio.wait_for(main, 60) == 0
    assert not (tmp_path / "new.py").exists()
    asked = [r.messages[-1].text for r in provider.requests]
    assert asked[-1] == "second question", asked
