"""``goagent-py code``: a coding agent built from the public toolkits (this is its line mode).

    goagent-py code --root DIR [--provider SPEC] [--continue] [--shell] [--yes] [--plain]
                    [--mcp COMMAND] [--context-window TOKENS] [--price IN,OUT]

:func:`open_session` builds what both front ends share: :func:`~goagent_py.coding.file_tools`
and :func:`~goagent_py.coding.shell_tool` held in ``--root``, a read-only ``explore`` sub-agent,
an :class:`~goagent_py.coding.ApprovalPolicy` that asks before anything changes (``y`` yes,
``a`` always this session, ``n`` no and tell the model, ``s`` no and stop the run), a
:class:`~goagent_py.Session` whose transcript is stored in SQLite after each turn
(``--continue`` resumes the last session of this root) and a
:class:`~goagent_py.coding.Status` for the status line. :func:`code_main` is the line mode:
``/exit``, ``/clear``, ``/compact [focus]``, ``/model [name]``; Ctrl-C during a turn aborts it
(``session.abort("now")``). The full-screen window is :mod:`goagent_py.coding.tui`.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import logging
import os
import signal
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from goagent_py.coding._tool import is_mutating
from goagent_py.coding.approvals import Answer, ApprovalPolicy, ApprovalRequest
from goagent_py.coding.files import file_tools
from goagent_py.coding.shell import shell_tool
from goagent_py.coding.status import Price, Status
from goagent_py.errors import ConfigurationError, GoAgentError, MissingExtraError
from goagent_py.session import Session
from goagent_py.tools import Tool

__all__ = [
    "SYSTEM_PROMPT",
    "CodeSession",
    "build_parser",
    "code_main",
    "open_session",
    "run_code",
]

EXPLORE_PROMPT = (
    "You explore a code base with read-only tools (read, list, glob, grep) and answer the "
    "question you were given with a short, factual report: file paths, line numbers, names."
)

SYSTEM_PROMPT = """You are a coding agent working in the directory given to your tools.
Use list_dir, glob and grep to find your way, read_file before you change a file, edit_file
for small changes (old_string must be unique) and write_file for new files. Run programs with
the shell tool (argv list). Keep answers short: say what you changed and why."""

ReadLine = Callable[[str], Awaitable[str | None]]
Write = Callable[[str], None]


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m goagent_py.coding`` (and ``goagent-py code``)."""
    p = argparse.ArgumentParser(
        prog="goagent-py code", description="A coding agent in a workspace directory."
    )
    p.add_argument("--root", default=".", help="the workspace directory (default: .)")
    p.add_argument("--provider", help="anthropic:MODEL, openai:MODEL, ollama:MODEL or local")
    p.add_argument("--plain", action="store_true", help="line mode (default: full screen)")
    p.add_argument("--db", help="SQLite file for sessions (default ~/.goagent-py/code.db)")
    p.add_argument("--session", help="session name (default: a new one)")
    p.add_argument("--continue", dest="resume", action="store_true", help="resume the last session")
    p.add_argument("--shell", action="store_true", help="let the model use shell command lines")
    p.add_argument("--yes", action="store_true", help="approve every call without asking")
    p.add_argument("--max-iterations", type=int, default=30)
    p.add_argument(
        "--context-window",
        type=int,
        metavar="TOKENS",
        help="the model's context window (for the status line and compaction; default: what "
        "the provider reports, else unknown)",
    )
    p.add_argument(
        "--price",
        metavar="IN,OUT",
        help="the model's price in USD per million input,output tokens (the cost is shown "
        "only when given)",
    )
    p.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="COMMAND",
        help="attach an MCP server started with COMMAND (repeatable); its tools are asked about",
    )
    return p


def _last_file(db: Path, root: Path) -> Path:
    key = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    return db.with_name(f"{db.name}.last-{key}")


async def _stdin_line(prompt: str) -> str | None:
    try:
        return await asyncio.to_thread(input, prompt)
    except EOFError:
        return None


def _say(text: str) -> None:
    print(text, flush=True)


def _ask_on(read_line: ReadLine, write: Write) -> Callable[[ApprovalRequest], Awaitable[Answer]]:
    async def ask(request: ApprovalRequest) -> Answer:
        what = f"{request.call.name} {request.subject}".strip()
        while True:
            line = await read_line(f"allow {what}? [y]es [a]lways [n]o [s]top: ")
            choice = (line or "s").strip().lower()[:1]
            answer: dict[str, Answer] = {"y": "allow", "a": "always", "n": "deny", "s": "stop"}
            if choice in answer:
                return answer[choice]
            write("  answer y, a, n or s")

    return ask


@dataclass
class CodeSession:
    """What :func:`open_session` built: the session and what the front ends show about it.

    Attributes:
        session: the agent's session (its transcript is stored after each turn).
        policy: the approval policy over the tools.
        status: the status line's figures.
        session_id: the stored session's name; ``loaded`` how many messages it resumed with.
        db: the SQLite file.
        root: the workspace root.
    """

    session: Session
    policy: ApprovalPolicy
    status: Status
    session_id: str
    loaded: int
    db: Path
    root: Path
    storage: Any

    async def command(self, text: str, write: Write) -> bool | None:
        """Run a ``/`` command: True to leave, False when done, None when ``text`` is none."""
        name, _, rest = text.partition(" ")
        rest = rest.strip()
        if name == "/exit":
            return True
        if name == "/clear":
            await self.session.reset()
            self.status.reset_context()
            write("(conversation cleared)")
            return False
        if name == "/compact":
            try:
                event = await self.session.compact_now(rest)
            except GoAgentError as exc:
                write(f"(not compacted: {exc})")
                return False
            if event is None:
                write("(nothing to compact)")
            else:
                self.status.reset_context()
                write("(compacted)")
            return False
        if name == "/model":
            if rest:
                self.session.set_model(rest)
                self.status.model = rest
                write(f"(model: {rest})")
            else:
                write(f"(model: {self.status.model or 'the provider default'})")
            return False
        if name.startswith("/") and name[1:].isalpha():
            write(f"(unknown command {name}: /clear, /compact [focus], /model [name], /exit)")
            return False
        return None

    async def aclose(self) -> None:
        """Close the storage."""
        with contextlib.suppress(Exception):
            await self.storage.aclose()


def _price(text: str | None) -> Price | None:
    if not text:
        return None
    try:
        ins, outs = (float(x) for x in text.split(","))
    except ValueError:
        raise ConfigurationError(f"--price {text!r}: use IN,OUT (USD per million tokens)") from None
    if ins < 0 or outs < 0:
        raise ConfigurationError(f"--price {text!r}: prices cannot be negative")
    return Price(ins, outs)


async def open_session(
    ns: argparse.Namespace,
    *,
    provider: Any = None,
    ask: Callable[[ApprovalRequest], Awaitable[Answer]],
    write: Write = _say,
    tools: Sequence[Tool] = (),
) -> CodeSession:
    """Build the coding agent's session from parsed arguments (what both front ends share).

    Args:
        ns: the parsed command line (:func:`build_parser`).
        provider: the model (default: chosen from ``--provider`` or the environment).
        ask: asks the user about a call (``--yes`` replaces it with "allow").
        write: shows one line of output.
        tools: more tools for the agent (asked about unless ``tool.mutating`` is False).

    Raises:
        ConfigurationError: ``--root`` is not a directory, or ``--price`` is malformed.
    """
    from goagent_py.agent import Agent
    from goagent_py.memory.compaction import Summarize
    from goagent_py.memory.compactor import Compactor
    from goagent_py.memory.short_term import ShortTermMemory
    from goagent_py.memory.storage.sqlite import SQLiteStorage

    root = Path(os.path.realpath(ns.root))  # noqa: ASYNC240 - once, at start-up
    if not root.is_dir():  # noqa: ASYNC240
        raise ConfigurationError(f"--root {ns.root!r} is not a directory")
    price = _price(getattr(ns, "price", None))
    model = ""
    if provider is None:
        from goagent_py.cli._common import pick_provider

        picked = await pick_provider(ns.provider)
        provider, model = picked.provider, picked.model
        write(f"provider {picked.name} ({picked.model}): {picked.reason}")
        if picked.name == "local" and price is None:
            price = Price(0.0, 0.0)  # the embedded model runs here: it costs nothing per token
    window = getattr(ns, "context_window", None) or getattr(provider, "context_window", None)
    if window is not None and (not isinstance(window, int) or window <= 0):
        raise ConfigurationError(f"--context-window {window!r}: use a positive number of tokens")
    db = Path(ns.db) if ns.db else Path.home() / ".goagent-py" / "code.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    last = _last_file(db, root)
    session_id = ns.session
    if session_id is None and ns.resume and last.exists():
        session_id = last.read_text().strip() or None
    if session_id is None:
        session_id = f"code-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    last.write_text(session_id)
    storage = SQLiteStorage(db, session_id=session_id)
    memory = ShortTermMemory(storage)
    files = file_tools(root)
    # A sub-agent with the read-only tools and a context of its own: the model delegates
    # exploring ("find where X is handled and report") without filling its own context.
    explorer = Agent(
        provider=provider,
        model=model,
        name="explore",
        system_prompt=f"{EXPLORE_PROMPT}\nThe workspace root is {root}.",
        tools=[t for t in files if not is_mutating(t)],
        max_iterations=12,
    )
    explore = explorer.as_tool(
        name="explore",
        description="Delegate a read-only investigation of the workspace (find, read, grep) to "
        "a sub-agent with its own context; it answers with a short report.",
    )
    explore.mutating = False  # type: ignore[attr-defined]  # its agent has read-only tools only
    all_tools: list[Tool] = [*files, shell_tool(root, allow_shell=ns.shell), explore, *tools]
    mcp_servers = []
    if ns.mcp:
        from goagent_py.cli._mcp import stdio_connections

        mcp_servers = stdio_connections(ns.mcp)
    holder: dict[str, Session] = {}

    def stop(reason: str) -> None:
        holder["session"].abort("after_tools", reason=reason)

    async def yes(_: ApprovalRequest) -> Answer:
        return "allow"

    policy = ApprovalPolicy(
        all_tools,
        ask=yes if ns.yes else ask,
        deny=[f"*({db.name}*)"] if db.parent == root else [],
        stop=stop,
    )
    agent = Agent(
        provider=provider,
        model=model,
        system_prompt=f"{SYSTEM_PROMPT}\nThe workspace root is {root}.",
        tools=all_tools,
        mcp_servers=mcp_servers,
        before_tool_call=policy,
        short_term_memory=memory,
        transform_context=Compactor(
            Summarize(provider, model=model), memory=memory, context_window=window
        ),
        max_iterations=ns.max_iterations,
    )
    session = holder["session"] = Session(agent)
    loaded = await session.load()
    status = Status(model=model or _provider_model(provider), context_window=window, price=price)
    return CodeSession(session, policy, status, session_id, len(loaded), db, root, storage)


def _provider_model(provider: Any) -> str:
    for name in ("model", "model_name", "default_model"):
        value = getattr(provider, name, None)
        if isinstance(value, str) and value:
            return value
    return type(provider).__name__


async def code_main(
    ns: argparse.Namespace,
    *,
    provider: Any = None,
    read_line: ReadLine = _stdin_line,
    write: Write = _say,
    on_session: Callable[[Session], None] | None = None,
) -> int:
    """Run the line-mode REPL with parsed arguments.

    Args:
        ns: the parsed command line (:func:`build_parser`).
        provider: the model (default: chosen from ``--provider`` or the environment).
        read_line: ``await read_line(prompt)`` gives the next line, None at the end.
        write: shows one line of output.
        on_session: called with the session once it exists (a UI keeps it to abort turns).

    Returns:
        The exit status.
    """
    code = await open_session(ns, provider=provider, ask=_ask_on(read_line, write), write=write)
    session = code.session
    if on_session is not None:
        on_session(session)
    write(f"session {code.session_id} ({code.loaded} messages) in {code.db}; root {code.root}")
    loop = asyncio.get_running_loop()
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
            with _sigint(loop, lambda: session.abort("now", reason="Ctrl-C")):
                await _turn(session, text, write, code.status)
            write(f"[{code.status.line()}]")
    finally:
        await code.aclose()


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
    from goagent_py.events import AgentEnd, MessageEnd, ToolExecutionEnd, ToolExecutionStart
    from goagent_py.events import ToolExecutionUpdate as Update

    indent = "  " * len(ev.path)  # a sub-agent's calls, nested under its own
    if isinstance(ev, Update) and hasattr(ev.update, "path"):
        _show_event(ev.update, write)  # a sub-agent's event, inside the call that runs it
    elif ev.path and isinstance(ev, MessageEnd) and ev.message.text and ev.usage is not None:
        write(f"{indent}  {ev.path[-1]}: {ev.message.text}")
    elif isinstance(ev, ToolExecutionStart):
        write(f"{indent}  • {ev.call.name} {_brief(ev.call.arguments)}")
    elif isinstance(ev, ToolExecutionEnd):
        mark = "✗" if ev.result.is_error else "✓"
        body = " ".join(getattr(b, "text", "") for b in ev.result.content)
        first = body.strip().splitlines()[0][:100] if body.strip() else ""
        shown = body[:300] if ev.result.is_error else first
        write(f"{indent}    {mark} {ev.result.duration:.2f}s {shown}")
    elif isinstance(ev, AgentEnd) and not ev.path:
        if ev.result.text:
            write(ev.result.text)
        reason = ev.result.stop_reason
        if reason is not None and reason.value == "aborted":
            write("(aborted)")
        if ev.result.error is not None:
            write(f"error: {ev.result.error}")


@contextlib.contextmanager
def _sigint(loop: asyncio.AbstractEventLoop, handler: Callable[[], None]) -> Any:
    """Ctrl-C calls ``handler`` while the block runs (where signals can be handled)."""
    installed = False
    if sys.platform != "win32" and _main_thread():
        with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
            loop.add_signal_handler(signal.SIGINT, handler)
            installed = True
    try:
        yield
    finally:
        if installed:
            loop.remove_signal_handler(signal.SIGINT)


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


def _brief(args: dict[str, Any]) -> str:
    if "path" in args:
        return str(args["path"])
    if "argv" in args or "command" in args:
        from goagent_py.coding.shell import command_text

        return command_text(args)
    return ", ".join(f"{k}={v!r}"[:60] for k, v in args.items())


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
        return asyncio.run(code_main(ns))
    except ConfigurationError as exc:
        print(f"goagent-py code: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
