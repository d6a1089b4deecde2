"""``goagent-py code``: a coding agent built from the public toolkits (this is its line mode).

    goagent-py code --root DIR [--provider SPEC] [--continue] [--shell] [--yes] [--plain]
                    [--mcp COMMAND] [--context-window TOKENS] [--price IN,OUT]

What both front ends share (the command line, :func:`open_session`, :class:`CodeSession`) lives
in :mod:`goagent_py.coding.session`; the names are re-exported here. The approval question
accepts ``y`` yes, ``a`` always this session, ``n`` no and tell the model, ``s`` no and stop the
run. :func:`code_main` is the line mode: ``/exit``, ``/clear``, ``/compact [focus]``,
``/model [name]``; Ctrl-C during a turn aborts it (``session.abort("now")``). The full-screen
window is :mod:`goagent_py.coding.tui`. Everything the model wrote passes through
:func:`~goagent_py.coding._terminal.printable` before it reaches the terminal.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

from goagent_py._interrupt import on_interrupt, run_command
from goagent_py._workers import to_thread
from goagent_py.cli._input import _input_in_daemon_thread, stdin_reader
from goagent_py.coding._preview import approval_lines, approval_question
from goagent_py.coding._terminal import printable
from goagent_py.coding.approvals import Answer, ApprovalRequest
from goagent_py.coding.session import (
    SYSTEM_PROMPT,
    CodeSession,
    ReadLine,
    Write,
    brief,
    build_parser,
    open_session,
    say,
)
from goagent_py.coding.status import Status
from goagent_py.errors import (
    ConfigurationError,
    GoAgentError,
    MemoryStoreError,
    MissingExtraError,
)
from goagent_py.session import Session

__all__ = [
    "SYSTEM_PROMPT",
    "CodeSession",
    "build_parser",
    "code_main",
    "open_session",
    "run_code",
]


class _TerminalLines:
    """The line mode's ``read_line``: one ``input()`` at a time, in a daemon thread.

    A question abandoned by Ctrl-C (the approval asked during the turn it aborted) leaves its
    ``input()`` waiting; the next prompt takes that read over (and shows its own prompt) instead
    of starting a second ``input()``, which left the user's next line to the abandoned question.
    A daemon thread, not the executor: a Ctrl-C at the prompt ended only after Enter, because
    ``asyncio.run`` waits for the executor's threads.
    """

    def __init__(self, read: Callable[[str], str] | None = None) -> None:
        self._read = read  # None: ``input``
        self._pending: asyncio.Future[str | None] | None = None

    async def __call__(self, prompt: str) -> str | None:
        if self._pending is None:
            self._pending = _input_in_daemon_thread(prompt, self._read)
        elif not self._pending.done():
            sys.stdout.write(prompt)  # the terminal still shows the abandoned question
            sys.stdout.flush()
        line = await asyncio.shield(self._pending)  # a cancel leaves the read for the next one
        self._pending = None
        return line


def _ask_on(
    read_line: ReadLine, write: Write, root: Path
) -> Callable[[ApprovalRequest], Awaitable[Answer]]:
    async def ask(request: ApprovalRequest) -> Answer:
        for shown in await to_thread(approval_lines, request, root):
            write(f"  | {shown}")
        question = approval_question(request)
        while True:
            line = await read_line(f"{question}: ")
            choice = (line or "s").strip().lower()[:1]
            answer: dict[str, Answer] = {"y": "allow", "a": "always", "n": "deny", "s": "stop"}
            if choice in answer:
                return answer[choice]
            write("  answer y, a, n or s")

    return ask


async def code_main(
    ns: argparse.Namespace,
    *,
    provider: Any = None,
    read_line: ReadLine | None = None,
    write: Write = say,
    on_session: Callable[[Session], None] | None = None,
) -> int:
    """Run the line-mode REPL with parsed arguments.

    Args:
        ns: the parsed command line (:func:`build_parser`).
        provider: the model (default: chosen from ``--provider`` or the environment).
        read_line: ``await read_line(prompt)`` gives the next line, None at the end
            (default: the terminal's, with ``input()``).
        write: shows one line of output.
        on_session: called with the session once it exists (a UI keeps it to abort turns).

    Returns:
        The exit status.
    """
    write = _printing(write)
    read_line = read_line or _TerminalLines()
    ask = _ask_on(read_line, write, Path(os.path.realpath(ns.root)))  # noqa: ASYNC240 - once
    code = await open_session(ns, provider=provider, ask=ask, write=write)
    session = code.session
    if on_session is not None:
        on_session(session)
    write(f"session {code.session_id} ({code.loaded} messages) in {code.db}; root {code.root}")
    for _, text in code.recap():
        write(text)
    try:
        while True:
            line = await read_line("> ")
            if line is None:
                return 0
            text = line.strip()
            if not text:
                continue
            done = await code.command(text, write)
            if done:
                return 0
            if done is False:
                continue
            code.policy.reset_stop()
            with on_interrupt(lambda: session.abort("now", reason="Ctrl-C")):
                await _turn(session, text, write, code.status)
            write(f"[{code.status.line()}]")
    finally:
        await code.aclose()


def _printing(write: Write) -> Write:
    """``write`` for text the model may control: control characters escaped, newlines kept."""

    def out(text: str) -> None:
        write(printable(text, newlines=True))

    return out


async def _turn(session: Any, text: str, write: Write, status: Status) -> None:
    from goagent_py.events import AgentEnd

    shown: BaseException | None = None
    try:
        async for ev in session.stream(text):
            status.see(ev)
            _show_event(ev, write)
            if isinstance(ev, AgentEnd) and not ev.path:
                shown = ev.result.error
    except GoAgentError as exc:  # the provider failed...: say so (once), keep the REPL
        if exc is not shown:
            write(f"error: {exc}")


def _show_event(ev: Any, write: Write) -> None:
    from goagent_py.events import (
        AgentEnd,
        HistoryAppend,
        MessageEnd,
        ToolExecutionEnd,
        ToolExecutionStart,
    )
    from goagent_py.events import ToolExecutionUpdate as Update

    indent = "  " * len(ev.path)  # a sub-agent's calls, nested under its own
    if isinstance(ev, Update) and hasattr(ev.update, "path"):
        _show_event(ev.update, write)  # a sub-agent's event, inside the call that runs it
    elif ev.path and isinstance(ev, MessageEnd) and ev.message.text and ev.usage is not None:
        write(f"{indent}  {ev.path[-1]}: {ev.message.text}")
    elif isinstance(ev, ToolExecutionStart):
        # A sub-agent's call is named as its: "• [explore] grep ..." (shown as it starts).
        who = "".join(f"[{printable(name)}] " for name in ev.path)
        write(f"{indent}  • {who}{printable(ev.call.name)} {printable(brief(ev.call.arguments))}")
    elif isinstance(ev, ToolExecutionEnd):
        mark = "✗" if ev.result.is_error else "✓"
        body = " ".join(getattr(b, "text", "") for b in ev.result.content)
        first = body.strip().splitlines()[0][:100] if body.strip() else ""
        shown = body[:300] if ev.result.is_error else first
        write(f"{indent}    {mark} {ev.result.duration:.2f}s {shown}")
    elif isinstance(ev, HistoryAppend) and ev.error is not None and not ev.path:
        from goagent_py.cli._common import unsaved_note

        write(unsaved_note(ev.error))
    elif isinstance(ev, AgentEnd) and not ev.path:
        if ev.result.text:
            write(ev.result.text)
        reason = ev.result.stop_reason
        if reason is not None and reason.value == "aborted":
            write("(aborted)")
        if ev.result.error is not None:
            write(f"error: {ev.result.error}")


def run_code(argv: Sequence[str] | None = None) -> int:
    """``goagent-py code``: parse ``argv`` and run the REPL; returns the exit status."""
    ns = build_parser().parse_args(argv)
    # The command shows each failed call itself: without this, Python's last-resort handler
    # would print the library's warnings about them to stderr a second time (a handler the user
    # configures still gets them: the records propagate as before).
    logging.getLogger("goagent_py").addHandler(logging.NullHandler())
    try:
        if not ns.plain and sys.stdin.isatty() and sys.stdout.isatty():
            from goagent_py.coding.tui import make_app

            try:
                app = make_app(ns)
            except MissingExtraError as exc:
                print(f"({exc}; using the line mode)", file=sys.stderr)
            else:
                code = app.run()
                return code if isinstance(code, int) else 0
        # A pipe's lines are read outside sys.stdin's buffer (see stdin_reader).
        return run_command(code_main(ns, read_line=_TerminalLines(stdin_reader())))
    except ConfigurationError as exc:
        print(f"goagent-py code: {exc}", file=sys.stderr)
        return 2
    except MemoryStoreError as exc:  # the session store cannot be opened: as chat's exit 4
        print(f"goagent-py code: {exc}", file=sys.stderr)
        return 4
    except KeyboardInterrupt:
        return 130
