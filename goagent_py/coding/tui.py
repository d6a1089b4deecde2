"""A full-screen UI for the coding agent (Textual).

``goagent-py code --root DIR`` opens it when Textual is installed (without ``--plain``). The
conversation scrolls above: the assistant's text as it streams, each tool call as a
collapsible block (its arguments, its result and how long it took; a sub-agent's calls nested
inside the call that started it), the approval questions inline. Below: a status line (model,
tokens used, cost when a price is known, context fill, what the agent is doing) and one input
line. The input answers an approval question (``y`` yes, ``a`` always this session, ``n`` no
and tell the model, ``s`` no and stop the run); typed while the agent works, it steers the run
(``session.steer``); otherwise it starts a turn or runs ``/clear``, ``/compact [focus]``,
``/model [name]`` or ``/exit``. Esc (or Ctrl-C) aborts the running turn, Ctrl-Q quits.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from typing import Any

from goagent_py._workers import to_thread
from goagent_py.coding._preview import approval_lines, approval_question
from goagent_py.coding._terminal import printable
from goagent_py.coding.approvals import Answer, ApprovalRequest
from goagent_py.errors import GoAgentError, MissingExtraError
from goagent_py.tools import Tool

__all__ = ["make_app"]

_ANSWERS: dict[str, Answer] = {"y": "allow", "a": "always", "n": "deny", "s": "stop"}
_CSS = """
#log { height: 1fr; }
#status { height: 1; background: $boost; color: $text-muted; padding: 0 1; }
.user { color: $accent; margin-top: 1; }
.question { color: $warning; }
.preview { color: $text; background: $boost; padding: 0 1; }
.note { color: $text-muted; }
.nested { padding-left: 2; }
"""


def _text_of(result: Any) -> str:
    return "\n".join(getattr(b, "text", "") for b in result.content)


def make_app(ns: argparse.Namespace, *, provider: Any = None, tools: Sequence[Tool] = ()) -> Any:
    """The Textual app for parsed arguments (``app.run()`` returns the exit status).

    Args:
        ns: the parsed command line (:func:`~goagent_py.coding.repl.build_parser`).
        provider: the model (default: chosen from ``--provider`` or the environment).
        tools: more tools for the agent.

    Raises:
        MissingExtraError: Textual is not installed.
    """
    try:
        from textual.app import App, ComposeResult
        from textual.binding import Binding
        from textual.containers import Vertical, VerticalScroll
        from textual.markup import escape
        from textual.widget import Widget
        from textual.widgets import Collapsible, Input, Static
    except ImportError as exc:
        raise MissingExtraError("textual", "tui", feature="the full-screen coding UI") from exc

    from goagent_py.coding.session import CodeSession, brief, open_session
    from goagent_py.events import (
        AgentEnd,
        HistoryAppend,
        MessageDelta,
        MessageEnd,
        MessageStart,
        ToolExecutionEnd,
        ToolExecutionStart,
        ToolExecutionUpdate,
    )
    from goagent_py.messages import Role

    class ToolCallView(Collapsible):
        """One tool call: title ``• name subject``, then ``✓ name subject · 0.12s``; inside,
        the arguments, what the sub-agent did (if the tool is one) and the result."""

        def __init__(self, name: str, brief: str, arguments: dict[str, Any]) -> None:
            self.name_ = printable(name)
            self.brief = printable(brief)
            shown = json.dumps(arguments, indent=1, default=str)[:2000]
            self.args = Static(printable(shown, newlines=True), markup=False)
            self.nested = Vertical(classes="nested")
            self.result = Static("(running)", markup=False)
            self.started = time.perf_counter()  # for a call whose end never comes (an abort)
            super().__init__(
                self.args,
                self.nested,
                self.result,
                title=escape(f"• {self.name_} {self.brief}"),  # a title is markup: made literal
                collapsed=True,
            )

        def doing(self, what: str) -> None:
            """Show in the title what the sub-agent this call runs is doing now ("" when
            nothing): the block is collapsed, and its calls are nested inside it."""
            now = f" · now {what}" if what else ""
            self.title = escape(f"• {self.name_} {self.brief}{now}")

        def finish(self, ok: bool, duration: float, text: str) -> None:
            mark = "✓" if ok else "✗"
            self.title = escape(f"{mark} {self.name_} {self.brief} · {duration:.2f}s")
            self.result.update(printable(text[:4000], newlines=True) or "(no output)")

    class CodingApp(App[int]):
        """The window: the conversation, a status line, an input line."""

        CSS = _CSS
        BINDINGS = [  # noqa: RUF012 - Textual reads the class attribute
            Binding("escape", "abort", "abort the turn", priority=True),
            Binding("ctrl+c", "abort", "abort the turn", priority=True),
            Binding("ctrl+q", "quit", "quit", priority=True),
        ]

        def __init__(self) -> None:
            super().__init__()
            self.code: CodeSession | None = None
            self.prompts: asyncio.Queue[str] = asyncio.Queue()
            """Each time the input waits: ``"> "`` when idle, the question when asking."""
            self.output: list[str] = []
            """Every line shown (the tests read it)."""
            self.running = False
            self._question: asyncio.Future[Answer] | None = None
            self._calls: dict[tuple[tuple[str, ...], str], ToolCallView] = {}
            self._streaming: Static | None = None
            self._streamed = ""

        def compose(self) -> ComposeResult:
            yield VerticalScroll(id="log")
            yield Static("", id="status", markup=False)
            yield Input(placeholder="> ", id="prompt")

        def on_mount(self) -> None:
            self.query_one(Input).focus()
            self.run_worker(self._start(), group="start")

        # -- output ------------------------------------------------------------------------

        def _show(self, text: str, classes: str = "", box: Widget | None = None) -> Static:
            text = printable(text, newlines=True)
            self.output.append(text)
            return self._mount(text, classes, box)

        def _write(self, text: str) -> None:
            self._show(text)

        def _mount(self, text: str, classes: str = "", box: Widget | None = None) -> Static:
            widget = Static(text, classes=classes, markup=False)
            (box or self.query_one("#log")).mount(widget)
            self.query_one("#log", VerticalScroll).scroll_end(animate=False)
            return widget

        # query(), not query_one(): a turn's worker can finish after /exit closed the window,
        # when the widgets are gone (query_one would raise NoMatches in that worker).
        def _refresh_status(self) -> None:
            if self.code is not None:
                for bar in self.query("#status").results(Static):
                    bar.update(self.code.status.line())

        def _idle(self) -> None:
            for box in self.query(Input):
                box.placeholder = "> "
            self.prompts.put_nowait("> ")

        # -- start, approvals ----------------------------------------------------------------

        async def _start(self) -> None:
            try:
                self.code = await open_session(
                    ns, provider=provider, ask=self._ask, write=self._write, tools=tools
                )
            except GoAgentError as exc:
                self._show(f"error: {exc}")
                self.exit(2)
                return
            c = self.code
            self._show(f"session {c.session_id} ({c.loaded} messages) in {c.db}; root {c.root}")
            for kind, text in c.recap():
                self._show(text, kind)
            self._refresh_status()
            self._idle()

        async def _ask(self, request: ApprovalRequest) -> Answer:
            assert self.code is not None
            shown = await to_thread(approval_lines, request, self.code.root)
            if shown:
                self._show("\n".join(shown), "preview")
            question = approval_question(request)
            self._show(question, "question")
            self.code.status.state = "waiting for you"
            self._refresh_status()
            self._question = asyncio.get_running_loop().create_future()
            self.query_one(Input).placeholder = "y / a / n / s"
            self.prompts.put_nowait(question)
            try:
                return await self._question
            finally:
                self._question = None
                for box in self.query(Input):  # none once the window closes
                    box.placeholder = "> "
                self.code.status.state = "working" if self.running else "idle"
                self._refresh_status()

        # -- input ---------------------------------------------------------------------------

        def on_input_submitted(self, event: Input.Submitted) -> None:
            text = event.value.strip()
            event.input.value = ""
            if self.code is None:
                return
            if self._question is not None and not self._question.done():
                choice = text.lower()[:1]
                if choice in _ANSWERS:
                    self._show(f"  → {_ANSWERS[choice]}", "note")
                    self._question.set_result(_ANSWERS[choice])
                else:
                    self._show("  answer y, a, n or s", "note")
                return
            if not text:
                return
            if self.running:
                self.code.session.steer(text)
                self._show(f"> {text}  (steering the running turn)", "user")
                return
            self.running = True  # at once: a second Enter must steer, not start another turn
            self.run_worker(self._handle(text), group="turn")

        async def _handle(self, text: str) -> None:
            assert self.code is not None
            try:
                done = await self.code.command(text, self._write)
                if done:
                    await self._leave()
                    return
                if done is None:
                    await self._turn(text)
            finally:
                self.running = False
                self._refresh_status()
                self._idle()

        async def _turn(self, text: str) -> None:
            assert self.code is not None
            code = self.code
            self._show(f"> {text}", "user")
            code.policy.reset_stop()
            code.status.state = "working"
            self._refresh_status()
            shown: BaseException | None = None
            try:
                async for ev in code.session.stream(text):
                    code.status.see(ev)
                    self._render(ev)
                    self._refresh_status()
                    if isinstance(ev, AgentEnd) and not ev.path:
                        shown = ev.result.error
            except GoAgentError as exc:  # the provider failed...: say so (once), keep the window
                if exc is not shown:
                    self._show(f"error: {exc}")
            finally:
                code.status.state = "idle"
                self._streaming = None

        def _render(self, ev: Any, box: Widget | None = None) -> None:
            """Show one event; a sub-agent's (inside a ``ToolExecutionUpdate`` of the call that
            runs it) goes into that call's block, as deep as sub-agents nest."""
            path: tuple[str, ...] = ev.path
            if isinstance(ev, ToolExecutionUpdate):
                inner = ev.update
                parent = self._calls.get((path, ev.call.id))
                if parent is not None and hasattr(inner, "path"):
                    self._render(inner, parent.nested)
                    self._sub_agent_doing(parent, inner)
                return
            if isinstance(ev, MessageStart) and ev.role is Role.ASSISTANT and ev.streaming:
                self._streamed = ""
                self._streaming = None
            elif isinstance(ev, MessageDelta) and ev.kind == "text" and not path:
                self._streamed += ev.delta
                if self._streaming is None:
                    self._streaming = self._mount("", "assistant")
                self._streaming.update(printable(self._streamed, newlines=True))
            elif isinstance(ev, MessageEnd) and ev.message.role is Role.ASSISTANT:
                text = ev.message.text
                if path:
                    if text:
                        self._show(f"{path[-1]}: {text}", "note", box)
                elif self._streaming is not None:
                    text = printable(text, newlines=True)
                    self._streaming.update(text)
                    self.output.append(text)
                    self._streaming = None
                elif text:
                    self._show(text, "assistant")
            elif isinstance(ev, ToolExecutionStart):
                view = ToolCallView(ev.call.name, brief(ev.call.arguments), ev.call.arguments)
                self._calls[(path, ev.call.id)] = view
                who = "".join(f"[{printable(name)}] " for name in path)
                self.output.append(f"{'  ' * len(path)}• {who}{view.name_} {view.brief}")
                (box or self.query_one("#log")).mount(view)
            elif isinstance(ev, ToolExecutionEnd):
                ended = self._calls.pop((path, ev.result.call.id), None)
                if ended is not None:
                    ok = not ev.result.is_error
                    ended.finish(ok, ev.result.duration, _text_of(ev.result))
                    mark = "✓" if ok else "✗"
                    self.output.append(f"{'  ' * len(path)}{mark} {ended.name_} {ended.brief}")
            elif isinstance(ev, HistoryAppend) and ev.error is not None and not path:
                from goagent_py.cli._common import unsaved_note

                self._show(unsaved_note(ev.error), "note")
            elif isinstance(ev, AgentEnd) and not path:
                reason = ev.result.stop_reason
                if reason is not None and reason.value == "aborted":
                    for view in self._calls.values():  # the calls the abort cut short
                        view.finish(False, time.perf_counter() - view.started, "(aborted)")
                        self.output.append(f"✗ {view.name_} {view.brief}")
                    self._show("(aborted)", "note")
                self._calls.clear()
                if ev.result.error is not None:
                    self._show(f"error: {ev.result.error}")

        def _sub_agent_doing(self, parent: ToolCallView, inner: Any) -> None:
            """A sub-agent's call started or ended: shown live on the (collapsed) block of the
            call that runs the sub-agent, and on the status line, named as the sub-agent's."""
            # A question waiting for the user keeps the status line ("waiting for you").
            status = self.code.status if self.code is not None and self._question is None else None
            if isinstance(inner, ToolExecutionStart):
                what = f"{inner.call.name} {brief(inner.call.arguments)}"
                parent.doing(printable(what))
                if status is not None:
                    who = "".join(f"[{printable(name)}] " for name in inner.path)
                    status.state = f"working: {who}{printable(what)}"
            elif isinstance(inner, ToolExecutionEnd):
                parent.doing("")
                if status is not None:
                    status.state = "working"

        # -- keys ----------------------------------------------------------------------------

        def action_abort(self) -> None:
            code = self.code
            if code is not None and code.session.state.running:
                code.status.state = "aborting"
                self._refresh_status()
                code.session.abort("now", reason="aborted by the user (Esc)")

        async def _leave(self) -> None:
            if self.code is not None:
                await self.code.aclose()
            self.exit(0)

        async def action_quit(self) -> None:
            if self.code is not None and self.code.session.state.running:
                # Abort, and let the turn store its aborted transcript before the storage closes.
                self.code.session.abort("now", reason="the user quit")
            turns = [w for w in self.workers if w.group == "turn"]
            await asyncio.gather(*(w.wait() for w in turns), return_exceptions=True)
            await self._leave()

    return CodingApp()
