"""An aborted tool call keeps how long it ran: in its result (stored, streamed) and on screen
(code11). It was shown as "✗ 0.00s": the abort's result was made without the call's start."""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent, Session
from goagent_py.coding import CodingTool
from goagent_py.events import ToolExecutionEnd
from goagent_py.testing import ScriptedProvider, tool_call_response

RAN = 0.05  # seconds the held call runs before the abort, at least


class Hold:
    """A read-only tool that waits until released: a run held open in a tool."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def _body(self, args: dict[str, Any]) -> str:
        self.entered.set()
        await self.release.wait()
        return "released"

    @property
    def tool(self) -> CodingTool:
        schema = {"type": "object", "properties": {}, "required": []}
        return CodingTool("hold", "wait for something", schema, self._body, mutating=False)


async def _after_running(hold: Hold) -> None:
    """Wait until the held call has run ``RAN`` seconds (a condition on the clock)."""
    await hold.entered.wait()
    entered = time.perf_counter()
    while time.perf_counter() - entered < RAN:  # noqa: ASYNC110 - time passing is the condition
        await asyncio.sleep(0.01)


async def test_an_aborted_calls_result_says_how_long_it_ran() -> None:
    hold = Hold()
    provider = ScriptedProvider(tool_call_response(("hold", {})), "unused")
    session = Session(Agent(provider=provider, tools=[hold.tool]))
    ends: list[ToolExecutionEnd] = []

    async def consume() -> None:
        async for ev in session.stream("wait"):
            if isinstance(ev, ToolExecutionEnd):
                ends.append(ev)

    task = asyncio.create_task(consume())
    await _after_running(hold)
    session.abort("now", reason="test")
    await task
    assert len(ends) == 1
    result = ends[0].result
    assert result.is_error
    assert result.duration >= RAN
    assert result.started_at is not None


async def test_the_window_shows_an_aborted_calls_time(tmp_path: Path) -> None:
    pytest.importorskip("textual")
    from goagent_py.coding.repl import build_parser
    from goagent_py.coding.tui import make_app

    hold = Hold()
    provider = ScriptedProvider(tool_call_response(("hold", {})), "unused")
    root = tmp_path / "ws"
    root.mkdir()
    argv = ["--root", str(root), "--db", str(tmp_path / "c.db")]
    app = make_app(build_parser().parse_args(argv), provider=provider, tools=[hold.tool])
    async with app.run_test() as pilot:
        assert await app.prompts.get() == "> "
        app.query_one("#prompt").value = "wait"
        await pilot.press("enter")
        await _after_running(hold)
        await pilot.press("escape")
        assert await app.prompts.get() == "> "
        views = [w for w in app.query("Collapsible") if getattr(w, "name_", "") == "hold"]
        assert len(views) == 1
        title = str(views[0].title)
        found = re.search(r"✗ hold +· (\d+\.\d\d)s$", title)
        assert found is not None, title
        assert float(found.group(1)) >= RAN - 0.005
        app.query_one("#prompt").value = "/exit"
        await pilot.press("enter")
        while app.return_code is None:
            await pilot.pause()
