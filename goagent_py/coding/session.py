"""What both front ends of ``goagent-py code`` share: the command line and the session.

:func:`open_session` builds it: :func:`~goagent_py.coding.file_tools` and
:func:`~goagent_py.coding.shell_tool` held in ``--root``, a read-only ``explore`` sub-agent, an
:class:`~goagent_py.coding.ApprovalPolicy` over every tool (the sub-agent's too) that asks before
anything changes, a :class:`~goagent_py.Session` whose transcript is stored in SQLite after each
turn (``--continue`` resumes the last session of this root) and a
:class:`~goagent_py.coding.Status` for the status line. The line mode
(:mod:`goagent_py.coding.repl`) and the full-screen window (:mod:`goagent_py.coding.tui`) both
import this module; neither imports the other's internals.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import hashlib
import os
import stat
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from goagent_py.coding._sandbox import sandbox_available
from goagent_py.coding._tool import is_mutating
from goagent_py.coding.approvals import (
    Answer,
    ApprovalPolicy,
    ApprovalRequest,
    Decision,
    glob_escape,
)
from goagent_py.coding.files import file_tools
from goagent_py.coding.shell import command_text, shell_tool
from goagent_py.coding.status import Price, Status
from goagent_py.errors import ConfigurationError, GoAgentError, MemoryStoreError
from goagent_py.messages import Role, ToolCall
from goagent_py.session import Session
from goagent_py.tools import Tool

__all__ = [
    "EMBEDDED_REFUSAL",
    "EMBEDDED_WARNING",
    "EXPLORE_PROMPT",
    "SYSTEM_PROMPT",
    "CodeSession",
    "ReadLine",
    "Write",
    "brief",
    "build_parser",
    "open_session",
    "say",
]

ReadLine = Callable[[str], Awaitable[str | None]]
Write = Callable[[str], None]

EXPLORE_PROMPT = (
    "You explore a code base with read-only tools (read, list, glob, grep) and answer the "
    "question you were given with a short, factual report: file paths, line numbers, names."
)

SYSTEM_PROMPT = """You are a coding agent working in the directory given to your tools.
Use list_dir, glob and grep to find your way, read_file before you change a file, edit_file
for small changes (old_string must be unique) and write_file for new files. Run programs with
the shell tool (argv list). Keep answers short: say what you changed and why."""

EMBEDDED_WARNING = (
    "warning: the embedded model (SmolLM2-135M, --provider local) is far too small to drive a "
    "coding agent: it invents tool calls and arguments. Use a capable model, e.g. "
    "--provider anthropic:MODEL, openai:MODEL or ollama:MODEL. Writes and programs are "
    "refused on it unless you start with --yes-i-know."
)
EMBEDDED_REFUSAL = (
    "refused: the embedded 135M model may not change files or run programs (the user can "
    "start goagent-py code with --yes-i-know, or pick a capable model with --provider)"
)


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``python -m goagent_py.coding`` (and ``goagent-py code``)."""
    p = argparse.ArgumentParser(
        prog="goagent-py code", description="A coding agent in a workspace directory."
    )
    p.add_argument("--root", default=".", help="the workspace directory (default: .)")
    p.add_argument("--provider", help="anthropic:MODEL, openai:MODEL, ollama:MODEL or local")
    p.add_argument("--plain", action="store_true", help="line mode (default: full screen)")
    p.add_argument(
        "--db",
        help="SQLite file for sessions (default: code.db in the user data folder, "
        "$GOAGENT_HOME if set)",
    )
    p.add_argument("--session", help="session name (default: a new one)")
    p.add_argument("--continue", dest="resume", action="store_true", help="resume the last session")
    p.add_argument("--shell", action="store_true", help="let the model use shell command lines")
    p.add_argument("--yes", action="store_true", help="approve every call without asking")
    p.add_argument(
        "--sandbox",
        choices=("auto", "on", "off"),
        default="auto",
        help="run shell commands under bubblewrap: only the root writable, no network, "
        "credential folders and the agent's processes hidden (auto: where bwrap works; default)",
    )
    p.add_argument(
        "--yes-i-know",
        dest="yes_i_know",
        action="store_true",
        help="let the embedded 135M model (--provider local) change files and run programs "
        "(refused without this: it cannot drive a coding agent)",
    )
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


_SQLITE_SIDE_FILES = ("-wal", "-shm", "-journal")
"""The files SQLite keeps beside a database (they hold its latest writes)."""


def _last_file(db: Path, root: Path) -> Path:
    key = hashlib.sha256(str(root).encode()).hexdigest()[:12]
    return db.with_name(f"{db.name}.last-{key}")


def say(text: str) -> None:
    """Show one line on standard output (the default ``write``)."""
    print(text, flush=True)


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
        from goagent_py.cli._common import follow_restored_history

        restored = await follow_restored_history(self.session)  # both front ends pass here
        if restored is not None:
            self.status.reset_context()
            write(restored)
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

    def recap(self, last: int = 6) -> list[tuple[str, str]]:
        """What a resumed session shows first (both front ends): ``(kind, text)`` for the
        user's questions (``"user"``, as ``> question``) and the answers (``""``) among the
        last ``last`` messages it loaded; nothing for a new session."""
        if not self.loaded:
            return []
        shown: list[tuple[str, str]] = []
        for m in self.session.transcript[-last:]:
            if m.role is Role.USER and m.text:
                shown.append(("user", f"> {m.text}"))
            elif m.role is Role.ASSISTANT and m.text:
                shown.append(("", m.text))
        return shown

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
    write: Write = say,
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
    embedded = False
    if provider is None:
        from goagent_py.cli._common import pick_provider

        picked = await pick_provider(ns.provider)
        provider, model = picked.provider, picked.model
        write(f"provider {picked.name} ({picked.model}): {picked.reason}")
        embedded = picked.name == "local"
        if embedded and price is None:
            price = Price(0.0, 0.0)  # the embedded model runs here: it costs nothing per token
    if embedded:
        write(EMBEDDED_WARNING)
    window = getattr(ns, "context_window", None) or getattr(provider, "context_window", None)
    if window is not None and (not isinstance(window, int) or window <= 0):
        raise ConfigurationError(f"--context-window {window!r}: use a positive number of tokens")
    db = _open_db_path(ns.db)
    last = _last_file(db, root)
    session_id = ns.session
    if session_id is None and ns.resume:
        session_id = _read_private(last)
    if session_id is None:
        session_id = f"code-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:6]}"
    try:
        _write_private(last, session_id)
    except OSError as exc:
        raise MemoryStoreError(
            f"cannot write {last} ({exc.strerror or exc}): remove it, or give --db a file in "
            "another folder"
        ) from exc
    storage = SQLiteStorage(db, session_id=session_id)
    memory = ShortTermMemory(storage)
    files = file_tools(root)

    async def gate(call: ToolCall) -> str | None:
        return await policy(call)  # the policy below: the sub-agent's calls pass it too

    # A sub-agent with the read-only tools and a context of its own: the model delegates
    # exploring ("find where X is handled and report") without filling its own context. Its
    # calls go through the same approval policy as the lead's (its deny rules included).
    explorer = Agent(
        provider=provider,
        model=model,
        name="explore",
        system_prompt=f"{EXPLORE_PROMPT}\nThe workspace root is {root}.",
        tools=[t for t in files if not is_mutating(t)],
        before_tool_call=gate,
        max_iterations=12,
    )
    explore = explorer.as_tool(
        name="explore",
        description="Delegate a read-only investigation of the workspace (find, read, grep) to "
        "a sub-agent with its own context; it answers with a short report.",
    )
    explore.mutating = False  # type: ignore[attr-defined]  # its agent has read-only tools only
    boxed = _sandbox_choice(getattr(ns, "sandbox", "off"), write)
    # The database's folder, and its own files: a folder that is the root is never hidden
    # (it would empty the workspace), and a database kept in the root was then not hidden at all.
    db_files = [db, *(Path(f"{db}{suffix}") for suffix in _SQLITE_SIDE_FILES), last]
    shell = shell_tool(root, allow_shell=ns.shell, sandbox=boxed, hide=[db.parent, *db_files])
    all_tools: list[Tool] = [*files, shell, explore, *tools]
    mcp_servers = []
    if ns.mcp:
        from goagent_py.cli._mcp import stdio_connections

        mcp_servers = stdio_connections(ns.mcp)
    holder: dict[str, Session] = {}

    def stop(reason: str) -> None:
        holder["session"].abort("after_tools", reason=reason)

    policy = ApprovalPolicy(
        all_tools,
        ask=_asker(ask, yes=ns.yes, refuse=embedded and not getattr(ns, "yes_i_know", False)),
        deny=_db_rules(db, root),
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


async def _allow(_: ApprovalRequest) -> Answer:
    return "allow"


async def _refuse(_: ApprovalRequest) -> Decision:
    return Decision("deny", EMBEDDED_REFUSAL)


def _asker(
    ask: Callable[[ApprovalRequest], Awaitable[Answer]], *, yes: bool, refuse: bool
) -> Callable[[ApprovalRequest], Awaitable[Answer | Decision]]:
    """Who answers the approval questions: the user, ``--yes``, or a refusal on the embedded
    model (nothing changes without ``--yes-i-know``)."""
    if refuse:
        return _refuse
    return _allow if yes else ask


def _sandbox_choice(choice: str, write: Write) -> bool:
    """Whether the shell runs sandboxed (``--sandbox auto|on|off``), said on one line."""
    ok, reason = sandbox_available()
    if choice == "off" or (choice == "auto" and not ok):
        why = "--sandbox off" if choice == "off" else reason
        write(f"shell sandbox: off ({why}): shell commands can do what you can")
        return False
    if ok:
        write("shell sandbox: on (bubblewrap: writes in the root only, no network)")
    return True  # "on" where it cannot run: shell_tool says what to install


def _db_rules(db: Path, root: Path) -> list[str]:
    """Deny rules that keep the agent out of its own session store when it is in the root."""
    try:
        rel = db.resolve().relative_to(root)
    except ValueError:
        return []
    return [f"*({glob_escape(rel.as_posix())}*)"]


def _open_db_path(given: str | None) -> Path:
    """The session store's path, its folder made (0700 where this creates it) and the file
    created 0600: the sessions hold the user's code and conversation."""
    db = Path(given).expanduser() if given else _data_home() / "code.db"
    try:
        missing = [p for p in (db.parent, *db.parent.parents) if not p.exists()]
        for folder in reversed(missing):
            folder.mkdir(mode=0o700)
        if not given:  # our own data folder: private, whoever made it
            with contextlib.suppress(OSError):
                os.chmod(db.parent, 0o700)
        _write_private(db, None)
    except OSError as exc:  # a part of the path is a file, a folder is read-only...
        reason = exc.strerror or type(exc).__name__
        if os.path.islink(db):
            reason = "it is a symbolic link: give --db the file it points to"
        raise MemoryStoreError(
            f"cannot create the session store {db} ({reason}): give --db a file in a folder "
            "you can write to, or set GOAGENT_HOME"
        ) from exc
    return db


def _data_home() -> Path:
    from goagent_py.cli._common import data_home

    return data_home()


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)


def _read_private(path: Path) -> str | None:
    """The session name kept in ``path`` (None when there is none), never read through a
    symlink: one planted there (the store's folder may be the workspace) names any file."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        return f.read(4096).decode("utf-8", "replace").strip() or None


def _write_private(path: Path, text: str | None) -> None:
    """Create ``path`` readable by its owner only (0600) and, unless ``text`` is None, write it.

    Never through a symlink, nor into a FIFO: with the store in the workspace, a command the
    agent ran could plant ``code.db.last-...`` as a link to any file of the user's, which this
    truncated and overwrote. The pointer file (``text`` given) is made anew each time; the
    database itself, if it is a link, is refused (the caller says so). SQLite gives the
    database's ``-wal`` and ``-shm`` files the database file's mode.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK | _NOFOLLOW
    if text is not None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a file, or whatever was planted in its place
        flags |= os.O_EXCL
    fd = os.open(path, flags, 0o600)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        with contextlib.suppress(OSError):
            os.fchmod(fd, 0o600)
        if text is not None:
            os.write(fd, text.encode())
    finally:
        os.close(fd)


def _provider_model(provider: Any) -> str:
    for name in ("model", "model_name", "default_model"):
        value = getattr(provider, name, None)
        if isinstance(value, str) and value:
            return value
    return type(provider).__name__


_BRIEF = 200
"""The most characters of a call's one-line summary (a model may send a path of a megabyte)."""


def brief(args: dict[str, Any]) -> str:
    """A call's arguments in one short line: its path, its command, or ``name=value`` pairs
    (at most ``_BRIEF`` characters: the rest is counted)."""
    if "path" in args:
        text = str(args["path"])
    elif "argv" in args or "command" in args:
        text = command_text(args)
    else:
        text = ", ".join(f"{k}={v!r}"[:60] for k, v in args.items())
    if len(text) <= _BRIEF:
        return text
    return f"{text[:_BRIEF]}… ({len(text) - _BRIEF} more characters)"
