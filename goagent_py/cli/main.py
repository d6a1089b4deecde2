"""The ``goagent-py`` command: a persistent-memory chatbot, and RAG over your files.

    goagent-py chat [--provider SPEC] [--base-url URL] [--session NAME] [--db PATH]
                    [--system PROMPT] [--no-memory] [--remember statements|all|none]
                    [--recall-threshold SCORE] [--small-model auto|on|off]
                    [--memory-decider rules|model|none]
    goagent-py rag index PATH... [--db PATH] [--root DIR] [--max-file-size MB]
    goagent-py rag ask "question" [--db PATH] [--provider SPEC] [--base-url URL]
    goagent-py rag chat [--db PATH] [--provider SPEC] [--base-url URL]

Without ``--provider`` the chat picks, in order: ANTHROPIC_API_KEY, OPENAI_API_KEY,
OPENAI_BASE_URL (an OpenAI-compatible server), an Ollama server on localhost, the embedded local
model — and says which it picked. ``--base-url`` (or ``OPENAI_BASE_URL``) points
``openai:MODEL`` at a compatible server such as llama.cpp's or vLLM's.

Long-term memory keeps the user's statements (not the model's replies, which a small model
often invents) and recalls only memories scoring at least ``--recall-threshold``. A statement
that changes a fact ("I moved to Porto") replaces the old one ("I live in Lisbon"), which is
kept as history (``--memory-decider``; ``/memory history``).

Exit codes (for scripts): 0 success; 1 a turn failed (provider or tool trouble); 2 bad usage
(unknown provider string, bad arguments); 3 a missing optional extra; 4 a database problem
(unreadable, locked, corrupted); 130 interrupted.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

from goagent_py import _main_guard
from goagent_py._interrupt import on_interrupt, run_command
from goagent_py.cli._common import (  # re-exported: scripts and tests import them from here
    EXIT_DATABASE,
    EXIT_INTERRUPTED,
    EXIT_MISSING_EXTRA,
    EXIT_OK,
    EXIT_TURN_FAILED,
    EXIT_USAGE,
    Console,
    Picked,
    UsageError,
    data_home,
    follow_restored_history,
    make_parent,
    pick_provider,
    unsaved_note,
)
from goagent_py.cli._common import SYSTEM_PROMPT as SYSTEM_PROMPT
from goagent_py.cli._common import make_provider as make_provider
from goagent_py.cli._common import parse_provider as parse_provider
from goagent_py.cli._common import provider_from_spec as provider_from_spec
from goagent_py.cli._tools import calculator as calculator  # re-exported for scripts
from goagent_py.cli._tools import current_time as current_time
from goagent_py.errors import (
    ApprovalPendingError,
    ConfigurationError,
    GoAgentError,
    MemoryStoreError,
    MissingExtraError,
)
from goagent_py.messages import ScoredMessage

HELP = """commands:
  /help       this help
  /reset      forget this session's conversation (long-term memory stays)
  /sessions   list the stored sessions
  /memory     the facts long-term memory holds now (/memory history: every change;
              /memory recalled: what was recalled for the last turn, with scores)
  /tools      which tools were offered to the model for the last turn, with scores
  /continue   resume after an aborted or failed turn
  /compact [focus]  summarise the older part of the conversation now (with --compact)
  /exit       leave (Ctrl-D works too); Ctrl-C aborts the current turn"""

DEFAULT_CONTEXT_WINDOW = 8000
"""The context window ``--compact`` assumes for a model that does not say its own."""


@dataclass
class ChatState:
    """What the REPL keeps between turns."""

    recalled: list[ScoredMessage] = field(default_factory=list)
    turn: asyncio.Task[Any] | None = None
    failures: int = 0
    selector: Any = None  # the tool selector, for /tools
    memory: Any = None  # the long-term memory, for /memory
    session: Any = None  # the chat's Session
    aborting: bool = False  # a Ctrl-C asked the running turn to abort
    no_compaction: str = ""  # why /compact cannot run in this chat ("" when it can)
    memory_off: str = ""  # why long-term memory is off though it was asked for


def _memory_paths(db: str | None) -> tuple[Path, Path]:
    chat = Path(db).expanduser() if db else data_home() / "chat.db"
    # Two files on purpose: history uses the stdlib sqlite3, vectors use pysqlite3 (to load
    # sqlite-vec); two SQLite libraries must never share one file in one process (POSIX locks).
    return chat, chat.with_name(chat.stem + "-memory.db")


def _make_embedder() -> Any:
    """The local embedder shared by long-term memory and tool selection (None if missing)."""
    from goagent_py.cli._setup import loading_embedder

    return loading_embedder()


def _quiet_logger() -> logging.Logger:
    # The chat shows tool errors and provider errors in the turn itself; the agent's warnings
    # ("tool dispatch failed: ...") would print them a second time, as log lines.
    logger = logging.getLogger("goagent_py.cli.chat")
    if not logger.handlers:
        logger.addHandler(logging.NullHandler())
    logger.propagate = False
    return logger


async def build_agent(
    args: argparse.Namespace, console: Console, picked: Picked, state: ChatState, closers: list[Any]
) -> tuple[Any, Any]:
    """The chat's agent (:func:`goagent_py.cli._agent.build_agent`, as ``serve`` and
    ``mcp serve`` build theirs) and its history storage (None with ``--no-memory``)."""
    from goagent_py.cli import _agent
    from goagent_py.cli._memory import chat_decider, tag_conversation
    from goagent_py.cli._setup import write_policy

    small = picked.small if args.small_model == "auto" else args.small_model == "on"
    needs_embedder = small or not args.no_memory
    embedder = _make_embedder() if needs_embedder else None
    if needs_embedder and embedder is None:
        from goagent_py.cli._setup import embedder_problem

        problem = embedder_problem() or "the local embedder is missing"
        off = []
        if not args.no_memory and args.remember != "none":
            off.append("long-term memory is off")
            state.memory_off = problem
        if small:
            off.append("the model is offered every tool")
        if off:
            console.note(f"({' and '.join(off)}: {problem})")
    settings: dict[str, Any] = {}
    if not args.no_memory:
        from goagent_py.memory.policies import TokenWindow
        from goagent_py.memory.short_term import ShortTermMemory
        from goagent_py.memory.storage.sqlite import SQLiteStorage

        chat_path, vector_path = _memory_paths(args.db)
        make_parent(chat_path)
        from goagent_py.cli._conversation_lock import ConversationLock

        lock = ConversationLock(chat_path, args.session)
        lock.acquire()  # one chat per conversation: two interleaved their turns
        closers.append(lock)
        storage = SQLiteStorage(chat_path, session_id=args.session)
        closers.append(storage)
        await storage.load()  # fail now, with a clear message, if the file is unusable
        settings["short_term_memory"] = ShortTermMemory(storage, TokenWindow(3000))
        if args.remember != "none" and embedder is not None:
            decider = chat_decider(args.memory_decider, picked.provider, picked.model)
            memory = await _long_term(vector_path, embedder, closers, args, decider=decider)
            settings["long_term_memory"] = state.memory = memory
            settings["write_policy"] = tag_conversation(write_policy(args.remember), args.session)
        console.note(f"session {args.session!r}; memory in {chat_path.parent}")
    else:
        storage = None

    kit = _agent.agent_kit(picked, small=small, embedder=embedder, system=args.system)
    state.selector = kit.selector
    if getattr(args, "mcp", None):
        from goagent_py.cli._mcp import stdio_connections

        settings["mcp_servers"] = stdio_connections(args.mcp)
    hook_sets: list[Any] = []
    if not getattr(args, "compact", False):
        state.no_compaction = "(/compact needs the chat started with --compact)"
    elif small:
        state.no_compaction = (
            "(nothing to compact: the small model reads only the last few messages)"
        )
        console.note("(--compact is for larger models: the small model reads a short window)")
    else:
        memory = settings.get("short_term_memory")
        if memory is not None:
            from goagent_py.memory.policies import NoOp

            # The compactor keeps the history under its window (summaries, then the model's
            # own fit): a history window of its own cut the conversation before it ever
            # reached the compactor's threshold, so nothing was summarised.
            memory.policy = NoOp()
        compactor = chat_compactor(picked, kit, args, memory, console)
        settings["transform_context"] = compactor
        hook_sets.append(compactor.hooks())
    agent = _agent.build_agent(
        kit,
        name="goagent-chat",
        recalled=state.recalled,
        hooks=hook_sets,
        logger=_quiet_logger(),
        **settings,
    )
    return agent, storage


def chat_compactor(
    picked: Picked, kit: Any, args: argparse.Namespace, memory: Any, console: Console
) -> Any:
    """The ``--compact`` compactor, sized to the model's real context window when the provider
    knows it (the embedded model's 4,096 tokens, counted by its own tokenizer; ``bytes / 4`` and
    the 8,000 assumed otherwise let a long chat overflow the model instead of compacting), with
    room kept for the answer, the instructions and the tools."""
    from goagent_py.cli._agent import REQUEST_RESERVE, CountingModel
    from goagent_py.memory import ClampParts, ClearToolResults, Compactor, Summarize, Tiered

    provider: Any = picked.provider
    given = args.context_window
    if not isinstance(provider, CountingModel) or kit.fit is None:
        return Compactor(
            Tiered(
                [ClampParts(4000), ClearToolResults(4), Summarize(provider, model=picked.model)]
            ),
            context_window=given or DEFAULT_CONTEXT_WINDOW,
            memory=memory,
        )
    window = provider.context_window
    if given is not None and given > window:
        console.note(
            f"(--context-window {given} is more than the model's context window of {window} "
            f"tokens: compacting at {window})"
        )
    window = min(window, given or window)
    reserve = min(provider.max_tokens + REQUEST_RESERVE, window // 2)
    summary_tokens = min(1024, provider.max_tokens)
    # A summary request must fit the model too: its input in characters, at the ~2 tokens a
    # CJK character costs the default model.
    chars = max(1000, (window - summary_tokens - REQUEST_RESERVE) // 2)
    summarize = Summarize(
        picked.provider, model=picked.model, max_input_chars=chars, max_tokens=summary_tokens
    )
    return Compactor(
        Tiered([ClampParts(chars), ClearToolResults(4), summarize]),
        context_window=window,
        estimator=kit.fit.estimator,
        reserve_tokens=reserve,
        memory=memory,
    )


async def _long_term(
    path: Path, embedder: Any, closers: list[Any], args: Any, *, decider: Any = None
) -> Any:
    """Long-term memory on sqlite-vec with the local embedder."""
    from goagent_py.cli._setup import long_term_memory

    threshold = None if args.recall_threshold < 0 else args.recall_threshold
    return await long_term_memory(path, embedder, closers, threshold=threshold, decider=decider)


async def run_chat(args: argparse.Namespace, console: Console) -> int:
    """The chat command; returns the exit code."""
    from goagent_py.cli._input import line_source

    state = ChatState()
    picked = await pick_provider(args.provider, args.base_url)
    console.note(f"goagent-py chat — provider {picked.name} ({picked.model}): {picked.reason}")
    closers: list[Any] = []
    try:
        agent, storage = await build_agent(args, console, picked, state, closers)
        lines = line_source(
            sys.stdin,
            interactive=console.interactive,
            prompt="you> ",
            history=data_home() / "chat_history",
        )
        return await chat_loop(agent, lines, console, state, storage)
    finally:
        for closer in closers:
            with contextlib.suppress(Exception):
                await closer.aclose()
        close = getattr(picked.provider, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()


async def play_turn(
    session: Any, text: str | None, console: Console, *, prefix: str = ""
) -> str | None:
    """Run one turn of ``session`` and show it: streamed text, tool calls and their results or
    errors, and an abort. ``text=None`` goes on with :meth:`~goagent_py.Session.continue_`;
    when that refuses (nothing to continue, calls waiting for approval) before anything is
    shown, the refusal comes back as a note to print and the turn does not run. ``prefix`` is
    printed before the first output."""
    from goagent_py.events import (
        AgentEnd,
        HistoryAppend,
        MessageDelta,
        ToolExecutionEnd,
        ToolExecutionStart,
    )
    from goagent_py.messages import StopReason

    streamed = False
    failed: GoAgentError | None = None
    events = session.stream(text) if text is not None else session.stream_continue()
    async with contextlib.aclosing(events):
        try:
            first = await anext(events, None)
        except (ApprovalPendingError, ConfigurationError) as exc:
            if text is not None:
                raise
            return _refusal(session, exc)
        if first is None:
            return None
        console.say(prefix, end="")
        event = first
        while event is not None:
            if event.path:
                pass  # a sub-agent's own events
            elif isinstance(event, MessageDelta) and event.kind == "text":
                console.say(event.delta, end="")
                streamed = True
            elif isinstance(event, HistoryAppend) and event.error is not None:
                console.end_line()
                streamed = False
                console.note(unsaved_note(event.error))
            elif isinstance(event, ToolExecutionStart):
                if streamed:
                    console.say()
                    streamed = False
                console.note(f"  [tool] {event.call.name}({_args(event.call.arguments)})")
            elif isinstance(event, ToolExecutionEnd):
                text_out = " ".join(getattr(b, "text", "") for b in event.result.content)
                if event.result.error is not None:
                    console.note(f"  [tool] {event.result.call.name} failed: {text_out[:300]}")
                else:
                    console.note(f"  [tool] -> ok: {text_out[:200]}")
            elif isinstance(event, AgentEnd):
                if event.result.stop_reason is StopReason.ABORTED:
                    console.say()
                    console.note("(turn aborted and recorded as such; /continue resumes it)")
                    return None
                if isinstance(event.result.error, GoAgentError):
                    # The stream raises it next; the chat shows it as its "error: ..." note.
                    console.end_line()
                    failed = event.result.error
                    event = await anext(events, None)
                    continue
                if not streamed:
                    console.say(event.result.text, end="")
                console.say()
            event = await anext(events, None)
    if failed is not None:
        raise failed
    return None


def _refusal(session: Any, exc: GoAgentError) -> str:
    """What the chat says when ``/continue`` has nothing to go on with (``continue_`` refused
    with ``exc`` before the run started)."""
    if isinstance(exc, ApprovalPendingError):
        return (
            "(nothing to continue: the last tool calls wait for an approval the chat cannot "
            "give; /reset or another --session starts over)"
        )
    if not session.transcript:
        return "(nothing to continue yet)"
    return "(nothing to continue: the last answer is complete)"


async def chat_loop(
    agent: Any, lines: Any, console: Console, state: ChatState, storage: Any
) -> int:
    """The REPL: read a line, run a command or a turn, until end of input or /exit.

    Each conversation runs in a :class:`~goagent_py.Session`: Ctrl-C aborts a running turn
    (recorded as aborted, the transcript stays valid, ``/continue`` resumes it; a second Ctrl-C
    cancels it outright); at the prompt Ctrl-C quits. Returns the exit code: 0, 1 when a turn
    failed, 130 when interrupted.
    """
    from goagent_py.session import Session

    session = Session(agent)
    state.session = session
    interrupted = False
    stop = asyncio.Event()

    def on_sigint() -> None:
        nonlocal interrupted
        if state.turn is not None and not state.turn.done():
            if session.state.running and not state.aborting:
                state.aborting = True
                session.abort("now", reason="the user pressed Ctrl-C")
            else:
                state.turn.cancel()
        else:
            interrupted = True
            stop.set()

    if console.interactive:
        console.note("type /help for commands")
    with on_interrupt(on_sigint):
        try:
            while not stop.is_set():
                next_line = asyncio.ensure_future(anext(lines, None))
                stopping = asyncio.ensure_future(stop.wait())
                done, _ = await asyncio.wait(
                    {next_line, stopping}, return_when=asyncio.FIRST_COMPLETED
                )
                stopping.cancel()
                if next_line not in done:
                    next_line.cancel()
                    break
                line = next_line.result()
                if line is None:
                    break
                if isinstance(line, KeyboardInterrupt):  # Ctrl-C at the prompt, read as a key
                    interrupted = True
                    break
                if isinstance(line, UnicodeDecodeError):
                    console.note("error: input is not UTF-8 text; line skipped")
                    state.failures += 1
                    continue
                line = line.strip()
                if not line:
                    continue
                restored = await follow_restored_history(session)  # a backup restored meanwhile
                if restored is not None:
                    console.note(restored)
                prompt: str | None = line
                if line.split()[0].lower() == "/continue":
                    prompt = None  # Session.continue_ decides how to go on
                elif line.startswith("/"):
                    if await _command(line, console, state, storage):
                        break
                    continue
                prefix = "bot> " if console.interactive else ""
                if prompt is not None:  # a /continue's prefix waits: continue_ may refuse
                    console.say(prefix, end="")
                    prefix = ""
                state.aborting = False
                state.turn = asyncio.ensure_future(
                    play_turn(session, prompt, console, prefix=prefix)
                )
                try:
                    note = await state.turn
                    if note is not None:
                        console.note(note)
                except asyncio.CancelledError:
                    if not state.turn.cancelled():
                        raise
                    console.end_line()
                    console.note("(turn cancelled; the session is intact)")
                except GoAgentError as exc:
                    console.end_line()
                    console.note(f"error: {exc}")
                    state.failures += 1
                finally:
                    state.turn = None
        finally:
            with contextlib.suppress(Exception):
                await lines.aclose()
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_TURN_FAILED if state.failures else EXIT_OK


def _args(arguments: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in arguments.items())


async def _command(line: str, console: Console, state: ChatState, storage: Any) -> bool:
    """Run a slash command; True means exit."""
    name = line.split()[0].lower()
    if name in ("/exit", "/quit"):
        return True
    if name == "/help":
        console.say(HELP)
    elif name == "/reset":
        if storage is None:
            console.say("(memory is off)")
        else:
            await storage.clear()
            console.say("(this session's conversation is forgotten)")
    elif name == "/sessions":
        if storage is None:
            console.say("(memory is off)")
        else:
            for session in await storage.list_sessions():
                console.say(session)
    elif name == "/compact":
        focus = line[len(name) :].strip()
        if state.no_compaction:
            console.say(state.no_compaction)
            return False
        try:
            done = await state.session.compact_now(focus=focus)
        except GoAgentError as exc:
            console.say(f"({exc})")
        else:
            if done is None:
                console.say("(nothing to compact yet)")
            else:
                console.say(
                    f"(compacted: {done.tokens_before} -> {done.tokens_after} tokens, "
                    f"{'+'.join(done.steps) or 'nothing to do'})"
                )
    elif name == "/memory":
        from goagent_py.cli._memory import memory_command

        await memory_command(
            line[len(name) :], state.memory, state.recalled, console.say, off=state.memory_off
        )
    elif name == "/tools":
        selection = getattr(state.selector, "last_selection", None)
        if selection is None:
            console.say("(every tool is offered to this model)")
        elif not selection:
            console.say("(no turn yet)")
        for scored_tool in selection or []:
            mark = "offered" if scored_tool.offered else "not offered"
            console.say(f"{scored_tool.name}: {scored_tool.score:.3f} ({mark})")
    else:
        console.say(f"unknown command {name}; type /help")
    return False


# -- entry point -----------------------------------------------------------------------------


def _positive(what: str) -> Callable[[str], int]:
    """An argparse type for a whole number above 0 (``what`` ends its error message)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = 0
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r} is not a positive whole number{what}")
        return value

    return parse


_positive_int = _positive(" of tokens")
# --top-k 0 became the default (0 is falsy) and -1 sliced the passages from the end.
_positive_count = _positive(", e.g. 4")


def _megabytes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a size in MB above 0, e.g. 50")
    return value


_BASE_URL_HELP = (
    "the API root of an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1 (with "
    "openai:MODEL, the default then; or ollama:MODEL); OPENAI_BASE_URL is read when not given"
)


def build_parser() -> argparse.ArgumentParser:
    """The command-line grammar."""
    parser = argparse.ArgumentParser(prog="goagent-py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    chat = sub.add_parser("chat", help="chat with an agent that remembers you")
    chat.add_argument("--provider", help="anthropic:MODEL, openai:MODEL, ollama:MODEL or local")
    chat.add_argument("--base-url", help=_BASE_URL_HELP)
    chat.add_argument("--session", default="default", help="conversation name (default: default)")
    chat.add_argument("--db", help="history database file (default: in the data folder)")
    chat.add_argument("--system", help="system prompt")
    chat.add_argument("--no-memory", action="store_true", help="keep nothing between runs")
    chat.add_argument(
        "--mcp",
        action="append",
        default=[],
        metavar="COMMAND",
        help="attach an MCP server started with COMMAND (repeatable), e.g. --mcp "
        "'uvx mcp-server-time'; run without a shell, with an allowlisted environment",
    )
    chat.add_argument(
        "--compact",
        action="store_true",
        help="compact long conversations (clamp, clear old tool results, summarise); /compact",
    )
    chat.add_argument(
        "--context-window",
        type=_positive_int,
        metavar="TOKENS",
        help="the model's context window in tokens, for --compact (default: what the model "
        f"says, the embedded model's 4096; {DEFAULT_CONTEXT_WINDOW} for a model that does not "
        "say)",
    )
    chat.add_argument(
        "--remember",
        choices=("statements", "all", "none"),
        default="statements",
        help="what long-term memory keeps: the user's statements (default; never the model's "
        "replies, which may be invented), every user message and reply, or nothing",
    )
    chat.add_argument(
        "--memory-decider",
        choices=("rules", "model", "none"),
        default="rules",
        help="how a new fact changes what is remembered: model-free rules for English "
        "first-person facts (default; 'I moved to Porto' replaces 'I live in Lisbon'), the "
        "chat's own model, or none (every statement is added)",
    )
    chat.add_argument(
        "--recall-threshold",
        type=float,
        default=0.3,
        metavar="SCORE",
        help="recall only memories at least this similar to the message (cosine, default 0.3; "
        "a negative value recalls the best 3 whatever their score)",
    )
    chat.add_argument(
        "--small-model",
        choices=("auto", "on", "off"),
        default="auto",
        help="tool selection, direct tool answers and a short window for small models "
        "(auto: on for the embedded model and --base-url servers)",
    )
    from goagent_py.cli._mcp import add_mcp_cli  # argparse only: the SDK loads on use
    from goagent_py.serve.run import add_serve_arguments  # argparse only: starlette loads on use

    add_mcp_cli(sub)
    sub.add_parser(
        "code", help="a coding agent in a workspace (goagent-py code --help)", add_help=False
    )
    add_serve_arguments(
        sub.add_parser(
            "serve", help="serve the chat agent to a browser and an OpenAI-compatible API"
        )
    )
    rag = sub.add_parser("rag", help="index files and answer questions about them")
    rag_sub = rag.add_subparsers(dest="rag_command", required=True)
    index = rag_sub.add_parser("index", help="index files or folders")
    index.add_argument("paths", nargs="+")
    index.add_argument("--db", help="index database file (default: in the data folder)")
    index.add_argument(
        "--root",
        help="sources are paths relative to this folder (default: the current folder); "
        "files outside it are keyed by their absolute path",
    )
    index.add_argument(
        "--max-file-size",
        type=_megabytes,
        metavar="MB",
        help="skip files larger than this, saying so (default 20; a file is read whole)",
    )
    ask = rag_sub.add_parser("ask", help="answer a question from the index, with citations")
    ask.add_argument("question")
    rag_chat = rag_sub.add_parser(
        "chat", help="answer question after question from the index (models loaded once)"
    )
    for answering in (ask, rag_chat):
        answering.add_argument("--db", help="index database file (default: in the data folder)")
        answering.add_argument(
            "--provider", help="anthropic:MODEL, openai:MODEL, ollama:MODEL or local"
        )
        answering.add_argument("--base-url", help=_BASE_URL_HELP)
        answering.add_argument(
            "--top-k",
            type=_positive_count,
            help="passages searched for the answer (default 4; 3 for a small model, which "
            "reads only their 3 sentences closest to the question)",
        )
        answering.add_argument(
            "--min-score",
            type=float,
            default=0.25,
            metavar="SCORE",
            help="answer only when a passage is at least this similar to the question "
            "(cosine, default 0.25); otherwise say that the index does not hold the answer",
        )
        answering.add_argument(
            "--quote-score",
            type=float,
            metavar="SCORE",
            help="when the model's answer is not supported by the passages, quote the passage "
            "sentence closest to the question if it is at least this similar (cosine, default "
            "0.55; above 1 never quotes)",
        )
    return parser


async def _main(args: argparse.Namespace) -> int:
    console = Console(sys.stdout, sys.stderr, interactive=sys.stdin.isatty())
    if args.command == "chat":
        return await run_chat(args, console)
    if args.command == "mcp":
        from goagent_py.cli._mcp import run_mcp_command

        return await run_mcp_command(args)
    if args.command == "serve":
        from goagent_py.serve.run import run_serve

        return await run_serve(args)
    from goagent_py.cli._rag import ask, chat, index

    if args.rag_command == "index":
        return await index(args, console)
    if args.rag_command == "chat":
        return await chat(args, console)
    return await ask(args, console)


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code.

    Run as the command (``argv`` None) while the embedder still loads in the background, the
    process ends here (:func:`goagent_py.cli._setup.exit_if_loading`).
    """
    try:
        code = _run(argv)
    except KeyboardInterrupt:  # a Ctrl-C outside a command's own handling: while it imports
        code = EXIT_INTERRUPTED
    except BaseException as exc:
        # An exception out of the command (a failing import, a bug) took the interpreter's
        # exit while the load ran inside ONNX Runtime: a C++ abort (exit 134) instead of the
        # traceback and exit 1. It is shown here, and the process ends as below.
        if argv is None and _loading():
            _leave_after(exc)
        raise
    if argv is None and _loading():
        from goagent_py.cli._setup import exit_if_loading

        exit_if_loading(code)
    return code


def _loading() -> bool:
    setup = sys.modules.get("goagent_py.cli._setup")
    return setup is not None and bool(setup.loading())


def _leave_after(exc: BaseException) -> NoReturn:
    """End the process for ``exc`` (escaping ``main()``) as the interpreter would, its
    traceback shown (none for a SystemExit) and its exit code kept, through
    :func:`~goagent_py.cli._setup.exit_if_loading`; a load that ended meanwhile leaves
    by a plain SystemExit (the traceback is not shown twice)."""
    import traceback

    from goagent_py.cli._setup import exit_if_loading

    if isinstance(exc, SystemExit):
        code = exc.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        code = code or 0
    else:
        traceback.print_exception(exc)
        code = 1
    exit_if_loading(code)
    raise SystemExit(code) from None


def _run(argv: list[str] | None) -> int:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    given = sys.argv[1:] if argv is None else list(argv)
    if given[:1] == ["code"]:  # its own parser: goagent_py.coding.repl
        from goagent_py.coding.repl import run_code

        return run_code(given[1:])
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage
        return EXIT_USAGE if exc.code else EXIT_OK
    start = time.perf_counter()
    try:
        if args.command == "serve" and args.workers > 1 and not args.add_user:
            from goagent_py.serve._supervise import worker_context
            from goagent_py.serve.run import serve_workers

            if worker_context() is None:  # the parent: it binds and starts the workers
                return serve_workers(args, given)
        if args.command == "serve":
            from goagent_py.serve.run import event_loop_factory

            # uvloop when installed, as uvicorn's own command runs; Ctrl-C is the server's own
            # (uvicorn's loop looks at its signals ten times a second, from any thread)
            with asyncio.Runner(loop_factory=event_loop_factory(args.loop)) as runner:
                return runner.run(_main(args))
        return run_command(_main(args))
    except UsageError as exc:
        print(f"goagent-py: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except MissingExtraError as exc:
        print(f"goagent-py: {exc}", file=sys.stderr)
        return EXIT_MISSING_EXTRA
    except MemoryStoreError as exc:
        print(f"goagent-py: {exc}", file=sys.stderr)
        return EXIT_DATABASE
    except ConfigurationError as exc:
        print(f"goagent-py: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    finally:
        if os.environ.get("GOAGENT_TIMING"):
            print(f"(ran {time.perf_counter() - start:.2f}s)", file=sys.stderr)


if __name__ == "__main__":
    _main_guard.release()
    sys.exit(main())
