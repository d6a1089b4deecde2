"""goagent_py.coding.tui driven by Textual's pilot: approvals, abort, steering, the commands,
the status line, tool calls and a sub-agent's calls nested in the window.

Runs are held open by a tool that waits on an event (never by sleeping); each test waits for
``app.prompts``, which gets an item whenever the window waits for the user.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from test_session import assert_valid_for_every_provider

from goagent_py.coding import CodingTool
from goagent_py.coding.repl import build_parser
from goagent_py.messages import Message, Role, Usage
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response

textual = pytest.importorskip("textual")
ASK = "allow edit_file a.txt? [y]es [a]lways [n]o [s]top"
EDIT = ("edit_file", {"path": "a.txt", "old_string": "hello", "new_string": "bye"})


class Hold:
    """A read-only tool that waits until released: a run held open in a tool."""

    def __init__(self) -> None:
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def _body(self, args: dict[str, Any]) -> str:
        self.entered.set()
        await self.release.wait()
        return "held and released"

    @property
    def tool(self) -> CodingTool:
        schema = {"type": "object", "properties": {}, "required": []}
        return CodingTool("hold", "wait for something", schema, self._body, mutating=False)


def _app(tmp_path: Path, provider: Any, *args: str, tools: list[Any] | None = None) -> Any:
    from goagent_py.coding.tui import make_app

    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    if not (root / "a.txt").exists():
        (root / "a.txt").write_text("hello\n")
    argv = ["--root", str(root), "--db", str(tmp_path / "c.db"), *args]
    return make_app(build_parser().parse_args(argv), provider=provider, tools=tools or [])


async def _say(app: Any, pilot: Any, text: str) -> None:
    app.query_one("#prompt").value = text
    await pilot.press("enter")


async def _quit(app: Any, pilot: Any, how: str = "/exit") -> None:
    """Quit with ``/exit`` or a key, and wait until the app has left: leaving closes the
    storage first, and on a busy machine that outlasts the key press (the app was torn down
    before its exit(0) and returned None)."""
    if how.startswith("/"):
        await _say(app, pilot, how)
    else:
        await pilot.press(how)
    while app.return_code is None:
        await pilot.pause()


def _views(app: Any) -> dict[str, Any]:
    return {w.name_: w for w in app.query("Collapsible") if hasattr(w, "name_")}


def _status(app: Any) -> str:
    return str(app.query_one("#status").render())


def _tool_texts(messages: list[Message]) -> list[str]:
    return [m.text for m in messages if m.role is Role.TOOL]


async def test_approve_shows_each_call_with_result_and_duration_and_the_status_line(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        tool_call_response(("read_file", {"path": "a.txt"}), usage=Usage(1000, 20)),
        tool_call_response(EDIT, usage=Usage(1100, 30)),
        text_response("changed it", usage=Usage(1200, 8)),
    )
    app = _app(tmp_path, provider, "--context-window", "8000", "--price", "3,15")
    async with app.run_test() as pilot:
        assert await app.prompts.get() == "> "
        assert "$0.000" in _status(app)
        await _say(app, pilot, "change a.txt")
        assert await app.prompts.get() == ASK
        assert "waiting for you" in _status(app)
        await _say(app, pilot, "y")
        assert await app.prompts.get() == "> "
        assert (tmp_path / "ws" / "a.txt").read_text() == "bye\n"
        assert "changed it" in app.output
        views = _views(app)
        read, edit = views["read_file"], views["edit_file"]
        assert read.collapsed
        assert edit.collapsed
        assert read.title.startswith("✓ read_file a.txt · ")
        assert read.title.endswith("s")
        assert edit.title.startswith("✓ edit_file a.txt · ")
        assert "hello" in str(read.result.render())  # the result, inside
        assert '"old_string": "hello"' in str(edit.args.render())  # the arguments, inside
        edit.collapsed = False
        await pilot.pause()
        status = _status(app)
        # 3,358 tokens: 3,300 in at $3/M + 58 out at $15/M = $0.01077; context: last call 1,208.
        assert "3.4k tokens (3.3k in, 58 out)" in status
        assert "$0.011" in status
        assert "context 1.2k/8k (15%)" in status
        assert status.endswith("idle")
        await _quit(app, pilot, "ctrl+q")
    assert app.return_code == 0


async def test_without_a_price_or_window_the_status_line_says_so(tmp_path: Path) -> None:
    provider = ScriptedProvider(text_response("hi", usage=Usage(500, 5)))
    app = _app(tmp_path, provider)
    async with app.run_test() as pilot:
        await app.prompts.get()
        await _say(app, pilot, "hello")
        await app.prompts.get()
        status = _status(app)
        assert "505 tokens (500 in, 5 out)" in status
        assert "cost —" in status
        assert "context 505 ·" in status  # a count, no window to compare with
        await _quit(app, pilot)
    assert app.return_code == 0


async def test_deny_tells_the_model_and_always_stops_asking(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        tool_call_response(("read_file", {"path": "a.txt"})),
        tool_call_response(EDIT),
        text_response("ok, I leave it"),
        tool_call_response(EDIT),
        tool_call_response(
            ("edit_file", {"path": "a.txt", "old_string": "bye", "new_string": "x"})
        ),
        text_response("edited twice"),
    )
    app = _app(tmp_path, provider)
    async with app.run_test() as pilot:
        await app.prompts.get()
        await _say(app, pilot, "change a.txt")
        assert await app.prompts.get() == ASK
        await _say(app, pilot, "maybe")  # not an answer: asked again
        await _say(app, pilot, "n")
        assert await app.prompts.get() == "> "
        # The model was told and answered; the file is as it was.
        told = provider.requests[2].messages[-1]
        assert told.role is Role.TOOL
        assert "the user denied edit_file on a.txt" in told.text
        assert "ok, I leave it" in app.output
        assert "  answer y, a, n or s" in app.output
        assert (tmp_path / "ws" / "a.txt").read_text() == "hello\n"

        await _say(app, pilot, "change it after all")
        assert await app.prompts.get() == ASK
        await _say(app, pilot, "a")  # always, for this session: the second edit is not asked
        assert await app.prompts.get() == "> "
        assert (tmp_path / "ws" / "a.txt").read_text() == "x\n"
        assert app.output.count(ASK) == 2
        assert "edited twice" in app.output
        await _quit(app, pilot, "ctrl+q")


async def test_deny_and_stop_ends_the_run_without_another_model_call(tmp_path: Path) -> None:
    provider = ScriptedProvider(
        tool_call_response(("read_file", {"path": "a.txt"})),
        tool_call_response(EDIT),
        text_response("never asked for"),
    )
    app = _app(tmp_path, provider)
    async with app.run_test() as pilot:
        await app.prompts.get()
        await _say(app, pilot, "change a.txt")
        assert await app.prompts.get() == ASK
        await _say(app, pilot, "s")
        assert await app.prompts.get() == "> "
        assert provider.remaining == 1  # the run ended: the model was not called again
        assert "(aborted)" in app.output
        assert "✗ edit_file a.txt" in app.output
        assert (tmp_path / "ws" / "a.txt").read_text() == "hello\n"
        await _quit(app, pilot, "ctrl+q")


async def test_esc_aborts_mid_tool_and_the_stored_turn_is_valid_and_aborted(
    tmp_path: Path,
) -> None:
    hold = Hold()
    provider = ScriptedProvider(tool_call_response(("hold", {})), text_response("unused"))
    app = _app(tmp_path, provider, tools=[hold.tool])
    async with app.run_test() as pilot:
        await app.prompts.get()
        await _say(app, pilot, "wait for it")
        await hold.entered.wait()
        assert "working" in _status(app)
        await pilot.press("escape")
        assert await app.prompts.get() == "> "
        assert "(aborted)" in app.output
        assert "✗ hold " in app.output
        session_name = app.code.session_id
        await _quit(app, pilot, "ctrl+q")
    assert not hold.release.is_set()
    assert provider.remaining == 1

    from goagent_py.memory.storage.sqlite import SQLiteStorage

    storage = SQLiteStorage(tmp_path / "c.db", session_id=session_name)
    try:
        stored = await storage.load()
    finally:
        await storage.aclose()
    messages = list(stored)
    assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]
    assert "aborted" in messages[-1].text
    assert_valid_for_every_provider(messages)


async def test_typing_while_the_agent_works_steers_the_run(tmp_path: Path) -> None:
    hold = Hold()
    provider = ScriptedProvider(tool_call_response(("hold", {})), text_response("bye then"))
    app = _app(tmp_path, provider, tools=[hold.tool])
    async with app.run_test() as pilot:
        await app.prompts.get()
        await _say(app, pilot, "wait for it")
        await hold.entered.wait()
        await _say(app, pilot, "and then say bye")
        assert "> and then say bye  (steering the running turn)" in app.output
        hold.release.set()
        assert await app.prompts.get() == "> "
        # What the model got next: the tool's result, then the steering message.
        sent = provider.requests[1].messages
        assert [m.role for m in sent[-2:]] == [Role.TOOL, Role.USER]
        assert sent[-2].text == "held and released"
        assert sent[-1].text == "and then say bye"
        assert "bye then" in app.output
        await _quit(app, pilot, "ctrl+q")


async def test_model_clear_compact_exit_and_continue(tmp_path: Path) -> None:
    provider = ScriptedProvider(*[text_response(f"answer {i}") for i in range(6)])
    app = _app(tmp_path, provider)
    async with app.run_test() as pilot:
        assert await app.prompts.get() == "> "
        for i in range(5):
            await _say(app, pilot, f"question {i}")
            await app.prompts.get()
        await _say(app, pilot, "/model other-model")
        await app.prompts.get()
        assert "(model: other-model)" in app.output
        assert _status(app).startswith("other-model ·")
        await _say(app, pilot, "question 5")
        await app.prompts.get()
        assert provider.requests[-1].model == "other-model"
        assert provider.requests[-2].model != "other-model"
        await _quit(app, pilot)
    assert app.return_code == 0
    first = app.code.session_id

    summary = ScriptedProvider("Summary: six questions answered.", "answer 6")
    again = _app(tmp_path, summary, "--continue")
    async with again.run_test() as pilot:
        await again.prompts.get()
        assert again.code.session_id == first
        opening = next(line for line in again.output if line.startswith("session "))
        assert opening.endswith("root " + str(tmp_path / "ws"))
        assert f"session {first} (12 messages)" in opening
        assert "> question 5" in again.output  # the resumed conversation is shown
        await _say(again, pilot, "/compact the answers")
        await again.prompts.get()
        assert "(compacted)" in again.output
        assert summary.remaining == 1
        await _say(again, pilot, "question 6")
        await again.prompts.get()
        sent = summary.requests[-1].messages
        assert "Summary: six questions answered." in sent[0].text
        assert "question 0" not in [m.text for m in sent]  # compacted away
        await _say(again, pilot, "/clear")
        await again.prompts.get()
        assert "(conversation cleared)" in again.output
        assert again.code.session.transcript == []
        await _say(again, pilot, "/nonsense")
        await again.prompts.get()
        assert any(line.startswith("(unknown command /nonsense") for line in again.output)
        await _quit(again, pilot)
    assert again.return_code == 0


async def test_a_sub_agent_s_calls_are_shown_nested_in_its_call(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "ws" / "app.py").write_text("def handler():\n    return 42\n")
    provider = ScriptedProvider(
        tool_call_response(("explore", {"prompt": "where is handler?"})),
        tool_call_response(("grep", {"pattern": "def handler"})),
        "app.py line 1 defines handler.",
        "handler is in app.py.",
    )
    app = _app(tmp_path, provider)
    async with app.run_test() as pilot:
        await app.prompts.get()
        await _say(app, pilot, "where is handler?")
        assert await app.prompts.get() == "> "
        views = _views(app)
        explore, grep = views["explore"], views["grep"]
        assert grep in explore.nested.children  # inside the explore call, not beside it
        assert "app.py:1:def handler():" in str(grep.result.render())
        assert "explore: app.py line 1 defines handler." in app.output
        assert explore.title.startswith("✓ explore")
        assert "handler is in app.py." in app.output
        await _quit(app, pilot, "ctrl+q")


async def test_quitting_mid_tool_stores_the_aborted_turn_first(tmp_path: Path) -> None:
    hold = Hold()
    provider = ScriptedProvider(tool_call_response(("hold", {})), text_response("unused"))
    app = _app(tmp_path, provider, tools=[hold.tool])
    async with app.run_test() as pilot:
        await app.prompts.get()
        await _say(app, pilot, "wait for it")
        await hold.entered.wait()
        await _quit(app, pilot, "ctrl+q")
    assert app.return_code == 0
    resumed = _app(tmp_path, ScriptedProvider(), "--continue")
    async with resumed.run_test() as pilot:
        await resumed.prompts.get()
        messages = resumed.code.session.transcript
        assert [m.role for m in messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]
        assert "aborted" in messages[-1].text
        assert_valid_for_every_provider(messages)
        await _quit(resumed, pilot, "ctrl+q")


async def test_a_failing_provider_is_reported_once_and_the_window_goes_on(tmp_path: Path) -> None:
    provider = ScriptedProvider(ConnectionError("the model is down"), "back again")
    app = _app(tmp_path, provider)
    async with app.run_test() as pilot:
        await app.prompts.get()
        await _say(app, pilot, "hello?")
        assert await app.prompts.get() == "> "
        assert sum("the model is down" in line for line in app.output) == 1, app.output
        await _say(app, pilot, "hello again")
        await app.prompts.get()
        assert "back again" in app.output
        await _quit(app, pilot, "ctrl+q")


async def test_the_approval_shows_the_diff_and_escapes_what_the_model_wrote(
    tmp_path: Path,
) -> None:
    provider = ScriptedProvider(
        tool_call_response(("read_file", {"path": "a.txt"})),
        tool_call_response(EDIT),
        text_response("changed it \x1b[2J\rdone"),
    )
    app = _app(tmp_path, provider)
    async with app.run_test() as pilot:
        await app.prompts.get()
        await _say(app, pilot, "change a.txt")
        assert await app.prompts.get() == ASK
        preview = app.output[app.output.index(ASK) - 1]
        assert preview.splitlines() == [
            "--- a/a.txt",
            "+++ b/a.txt",
            "@@ -1 +1 @@",
            "-hello",
            "+bye",
        ]
        await _say(app, pilot, "y")
        assert await app.prompts.get() == "> "
        assert "changed it \\e[2J\\rdone" in app.output
        assert not any("\x1b" in line for line in app.output)
        await _quit(app, pilot, "ctrl+q")


async def test_a_tool_call_title_is_shown_literally_not_as_markup(tmp_path: Path) -> None:
    odd = "[/bold]x[@click=app.quit]y[red]"
    provider = ScriptedProvider(
        tool_call_response(("read_file", {"path": odd})), text_response("no such file")
    )
    app = _app(tmp_path, provider)
    async with app.run_test() as pilot:
        await app.prompts.get()
        await _say(app, pilot, "read it")
        assert await app.prompts.get() == "> "
        view = _views(app)["read_file"]
        shown = str(view.query_one("CollapsibleTitle").render())
        assert odd in shown
        assert "no such file" in app.output
        await _quit(app, pilot, "ctrl+q")
    assert app.return_code == 0
