"""A sub-agent's tool calls are seen while they run, not after (code12).

The ``explore`` sub-agent's run is not streaming, so its lone call ran inline and its start
event was delivered only with its end: the user saw nothing until the sub-agent returned.
Each test's tool waits until the watcher has seen its start; before the fix it waited in vain
(the wait is bounded, so the test fails instead of hanging).
"""

from __future__ import annotations

import argparse
import asyncio
import threading
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent, Session
from goagent_py.events import ToolExecutionStart, ToolExecutionUpdate
from goagent_py.testing import ScriptedProvider, tool_call_response
from goagent_py.tools import tool

BOUND = 60.0  # only reached when the start is never shown (the defect)


async def test_a_sub_agent_s_call_start_reaches_the_parent_s_stream_while_it_runs() -> None:
    seen = asyncio.Event()

    async def probe() -> str:
        """Wait until the start of this call was seen."""
        await asyncio.wait_for(seen.wait(), BOUND)
        return "seen live"

    provider = ScriptedProvider(
        tool_call_response(("helper", {"prompt": "look"})),
        tool_call_response(("probe", {})),
        "the helper's report",
        "done",
    )
    child = Agent(provider=provider, name="helper", tools=[tool(probe)])
    lead = Agent(provider=provider, tools=[child.as_tool(name="helper", description="helps")])
    async for ev in Session(lead).stream("go"):
        inner = ev.update if isinstance(ev, ToolExecutionUpdate) else None
        if isinstance(inner, ToolExecutionStart) and inner.call.name == "probe":
            assert inner.path == ("helper",)
            seen.set()
    assert seen.is_set()
    assert "seen live" in repr(provider.requests[2].messages[-1])  # the probe did not time out


async def test_the_line_mode_shows_the_explore_call_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from goagent_py.coding.files import FileToolkit
    from goagent_py.coding.repl import code_main

    (tmp_path / "app.py").write_text("def handler():\n    return 42\n")
    shown = threading.Event()
    real = FileToolkit._grep_sync
    waited: list[bool] = []

    def grep(self: FileToolkit, args: dict[str, Any], cancelled: Any = None) -> str:
        waited.append(shown.wait(BOUND))  # the worker thread: the line is already out, or not
        return real(self, args, cancelled)

    monkeypatch.setattr(FileToolkit, "_grep_sync", grep)
    provider = ScriptedProvider(
        tool_call_response(("explore", {"prompt": "where is handler?"})),
        tool_call_response(("grep", {"pattern": "def handler"})),
        "app.py line 1 defines handler.",
        "handler is in app.py.",
    )
    lines = iter(["where is handler?", "/exit"])
    out: list[str] = []

    def write(line: str) -> None:
        out.append(line)
        if "grep pattern='def handler'" in line:
            shown.set()

    async def read_line(prompt: str) -> str | None:
        return next(lines, None)

    ns = argparse.Namespace(
        root=str(tmp_path), provider=None, plain=True, db=str(tmp_path / "code.db"),
        session=None, resume=False, shell=False, yes=False, max_iterations=10, mcp=[],
    )  # fmt: skip
    await code_main(ns, provider=provider, read_line=read_line, write=write)
    assert waited == [True]
    # Marked as the sub-agent's: nested under its call, and named.
    assert "    • [explore] grep pattern='def handler'" in out


async def test_the_window_shows_the_explore_call_while_it_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("textual")
    from goagent_py.coding.files import FileToolkit
    from goagent_py.coding.repl import build_parser
    from goagent_py.coding.tui import make_app

    root = tmp_path / "ws"
    root.mkdir()
    (root / "app.py").write_text("def handler():\n    return 42\n")
    shown = threading.Event()
    real = FileToolkit._grep_sync
    waited: list[bool] = []

    def grep(self: FileToolkit, args: dict[str, Any], cancelled: Any = None) -> str:
        waited.append(shown.wait(BOUND))
        return real(self, args, cancelled)

    monkeypatch.setattr(FileToolkit, "_grep_sync", grep)
    provider = ScriptedProvider(
        tool_call_response(("explore", {"prompt": "where is handler?"})),
        tool_call_response(("grep", {"pattern": "def handler"})),
        "app.py line 1 defines handler.",
        "handler is in app.py.",
    )
    argv = ["--root", str(root), "--db", str(tmp_path / "c.db")]
    app = make_app(build_parser().parse_args(argv), provider=provider)
    live: list[tuple[str, str]] = []
    render = app._render

    def watching(ev: Any, box: Any = None) -> None:
        render(ev, box)
        views = {w.name_: w for w in app.query("Collapsible") if hasattr(w, "name_")}
        explore = views.get("explore")
        if explore is not None and "· now grep" in str(explore.title) and not shown.is_set():
            live.append((str(explore.title), app.code.status.line()))
            shown.set()

    app._render = watching
    async with app.run_test() as pilot:
        assert await app.prompts.get() == "> "
        app.query_one("#prompt").value = "where is handler?"
        await pilot.press("enter")
        assert await app.prompts.get() == "> "
        assert waited == [True]
        title, status = live[0]
        assert title == "• explore prompt='where is handler?' · now grep pattern='def handler'"
        assert "working: [explore] grep pattern='def handler'" in status
        assert "  • [explore] grep pattern='def handler'" in app.output
        views = {w.name_: w for w in app.query("Collapsible") if hasattr(w, "name_")}
        assert views["explore"].title.startswith("✓ explore prompt='where is handler?' · ")
        app.query_one("#prompt").value = "/exit"
        await pilot.press("enter")
        while app.return_code is None:
            await pilot.pause()


async def test_a_question_keeps_the_status_line_while_a_sub_agent_works(tmp_path: Path) -> None:
    # The lead edits (asked about) and explores at once; the sub-agent's call starts while the
    # question waits: the status line must keep saying so, not "working: [explore] grep".
    pytest.importorskip("textual")
    from goagent_py.coding.repl import build_parser
    from goagent_py.coding.tui import make_app
    from goagent_py.messages import Role
    from goagent_py.testing import FunctionProvider

    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("hello\n")
    asked = asyncio.Event()

    async def model(request: Any) -> Any:
        answered = request.messages[-1].role is Role.TOOL
        if request.system_prompt.startswith("You explore"):
            if answered:
                return "a.txt holds hello."
            await asyncio.wait_for(asked.wait(), BOUND)
            return tool_call_response(("grep", {"pattern": "hello"}))
        if answered:
            return "done"
        edit = {"path": "a.txt", "old_string": "hello", "new_string": "bye"}
        return tool_call_response(("edit_file", edit), ("explore", {"prompt": "what is there?"}))

    argv = ["--root", str(root), "--db", str(tmp_path / "c.db")]
    app = make_app(build_parser().parse_args(argv), provider=FunctionProvider(model))
    during: list[str] = []
    render = app._render

    def watching(ev: Any, box: Any = None) -> None:
        render(ev, box)
        inner = ev.update if isinstance(ev, ToolExecutionUpdate) else None
        if isinstance(inner, ToolExecutionStart) and inner.call.name == "grep":
            during.append(app.code.status.line())

    app._render = watching
    async with app.run_test() as pilot:
        assert await app.prompts.get() == "> "
        app.query_one("#prompt").value = "change a.txt and look around"
        await pilot.press("enter")
        assert (await app.prompts.get()).startswith("allow edit_file a.txt?")
        asked.set()
        while not during:
            await pilot.pause()
        assert during[0].endswith("waiting for you")
        app.query_one("#prompt").value = "n"
        await pilot.press("enter")
        assert await app.prompts.get() == "> "
        app.query_one("#prompt").value = "/exit"
        await pilot.press("enter")
        while app.return_code is None:
            await pilot.pause()
