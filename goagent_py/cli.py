"""The ``goagent-py`` command: a persistent-memory chatbot, and RAG over your files.

    goagent-py chat [--provider SPEC] [--session NAME] [--db PATH] [--system PROMPT] [--no-memory]
    goagent-py rag index PATH... [--db PATH]
    goagent-py rag ask "question" [--db PATH] [--provider SPEC]

Without ``--provider`` the chat picks, in order: ANTHROPIC_API_KEY, OPENAI_API_KEY, an Ollama
server on localhost, the embedded local model — and says which it picked.

Exit codes (for scripts): 0 success; 1 a turn failed (provider or tool trouble); 2 bad usage
(unknown provider string, bad arguments); 3 a missing optional extra; 4 a database problem
(unreadable, locked, corrupted); 130 interrupted.
"""

from __future__ import annotations

import argparse
import ast
import asyncio
import contextlib
import datetime as _dt
import math
import operator
import os
import signal
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from goagent_py.errors import (
    ConfigurationError,
    GoAgentError,
    MemoryStoreError,
    MissingExtraError,
)
from goagent_py.messages import ScoredMessage
from goagent_py.providers import DEFAULT_MODELS
from goagent_py.tools import tool

EXIT_OK = 0
EXIT_TURN_FAILED = 1
EXIT_USAGE = 2
EXIT_MISSING_EXTRA = 3
EXIT_DATABASE = 4
EXIT_INTERRUPTED = 130


SYSTEM_PROMPT = (
    "You are a helpful assistant with a memory of earlier conversations. Answer briefly. "
    "Use the tools for the current time and for arithmetic."
)

HELP = """commands:
  /help       this help
  /reset      forget this session's conversation (long-term memory stays)
  /sessions   list the stored sessions
  /memory     what long-term memory recalled for the last turn, with scores
  /exit       leave (Ctrl-D works too); Ctrl-C cancels the current turn"""


class UsageError(GoAgentError):
    """The command line was wrong; the message says how to fix it."""


def data_home() -> Path:
    """Where goagent-py keeps its data: $GOAGENT_HOME, else the platform's user data folder."""
    env = os.environ.get("GOAGENT_HOME")
    if env:
        return Path(env).expanduser()
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / "goagent-py"
    if sys.platform == "win32":
        return Path(os.environ.get("APPDATA", Path.home())) / "goagent-py"
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "goagent-py"


# -- built-in tools (safe: no shell, no files, no network) -----------------------------------


@tool
def current_time(timezone: str = "UTC") -> str:
    """The current date and time.

    Args:
        timezone: an IANA time zone such as "Europe/Paris"; "UTC" by default.
    """
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {timezone!r}") from exc
    return _dt.datetime.now(zone).isoformat(timespec="seconds")


_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCTIONS: dict[str, Callable[..., float]] = {
    "sqrt": math.sqrt,
    "log": math.log,
    "exp": math.exp,
    "sin": math.sin,
    "cos": math.cos,
    "tan": math.tan,
    "abs": abs,
    "round": round,
}


def _evaluate(node: ast.AST) -> float:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 1000:
            raise ValueError("exponent too large")
        return float(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.Name) and node.id in ("pi", "e"):
        return math.pi if node.id == "pi" else math.e
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        return float(_FUNCTIONS[node.func.id](*(_evaluate(a) for a in node.args)))
    raise ValueError(f"unsupported expression: {ast.dump(node)[:60]}")


@tool
def calculator(expression: str) -> str:
    """Evaluate an arithmetic expression such as "2 * (3 + 4) / sqrt(2)".

    Args:
        expression: numbers, + - * / // % **, parentheses, pi, e, and sqrt/log/exp/sin/cos/tan/
            abs/round.
    """
    if len(expression) > 200:
        raise ValueError("expression too long (200 characters at most)")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from exc
    result = _evaluate(tree)
    return str(int(result)) if float(result).is_integer() and abs(result) < 1e15 else str(result)


# -- providers -------------------------------------------------------------------------------


@dataclass
class Picked:
    """The provider chosen for this process, and why."""

    provider: Any
    name: str
    model: str
    reason: str


def parse_provider(spec: str) -> tuple[str, str]:
    """Split ``vendor:MODEL`` (or ``local``) into (vendor, model)."""
    vendor, _, model = spec.partition(":")
    vendor = vendor.strip().lower()
    if vendor not in DEFAULT_MODELS:
        raise UsageError(
            f"unknown provider {spec!r}: use anthropic:MODEL, openai:MODEL, ollama:MODEL or local"
        )
    return vendor, model.strip() or DEFAULT_MODELS[vendor]


def make_provider(vendor: str, model: str) -> Any:
    """Build the provider for ``vendor`` through the registry (imports only that vendor)."""
    from goagent_py.providers import provider_from_string

    return provider_from_string(f"{vendor}:{model}")[0]


def provider_from_spec(spec: str) -> tuple[Any, str]:
    """The provider and model for ``vendor:MODEL`` or ``local`` (for scripts and examples)."""
    vendor, model = parse_provider(spec)
    return make_provider(vendor, model), model


async def pick_provider(spec: str | None) -> Picked:
    """The provider named by ``spec``, or the first available one."""
    if spec:
        vendor, model = parse_provider(spec)
        return Picked(make_provider(vendor, model), vendor, model, "chosen with --provider")
    if os.environ.get("ANTHROPIC_API_KEY"):
        vendor, reason = "anthropic", "ANTHROPIC_API_KEY is set"
    elif os.environ.get("OPENAI_API_KEY"):
        vendor, reason = "openai", "OPENAI_API_KEY is set"
    elif await _ollama_up():
        vendor, reason = "ollama", "an Ollama server answers on localhost:11434"
    else:
        vendor, reason = "local", "no API key and no Ollama server: the embedded model"
    model = DEFAULT_MODELS[vendor]
    return Picked(make_provider(vendor, model), vendor, model, reason)


async def _ollama_up() -> bool:
    try:
        from goagent_py.providers.ollama import ollama_reachable
    except ImportError:
        return False
    try:
        return bool(await ollama_reachable("http://localhost:11434", timeout=0.3))
    except Exception:
        return False


# -- the chat REPL ---------------------------------------------------------------------------


@dataclass
class ChatState:
    """What the REPL keeps between turns."""

    recalled: list[ScoredMessage] = field(default_factory=list)
    turn: asyncio.Task[Any] | None = None
    failures: int = 0


class Console:
    """Where the chat writes: prompts and chrome only when interactive."""

    def __init__(self, out: TextIO, err: TextIO, interactive: bool) -> None:
        self.out = out
        self.err = err
        self.interactive = interactive

    def say(self, text: str = "", end: str = "\n") -> None:
        self.out.write(text + end)
        self.out.flush()

    def note(self, text: str) -> None:
        self.err.write(text + "\n")
        self.err.flush()


async def _lines(stream: Any) -> Any:
    """Yield decoded input lines; a line that is not UTF-8 yields a UnicodeDecodeError."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 20)
    protocol = asyncio.StreamReaderProtocol(reader)
    transport, _ = await loop.connect_read_pipe(lambda: protocol, stream)
    try:
        while True:
            try:
                raw = await reader.readline()
            except ValueError:  # a line over the limit
                yield UnicodeDecodeError("utf-8", b"", 0, 1, "line too long")
                continue
            if not raw:
                return
            try:
                yield raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                yield exc
    finally:
        transport.close()


def _memory_paths(db: str | None) -> tuple[Path, Path]:
    chat = Path(db).expanduser() if db else data_home() / "chat.db"
    # Two files on purpose: history uses the stdlib sqlite3, vectors use pysqlite3 (to load
    # sqlite-vec); two SQLite libraries must never share one file in one process (POSIX locks).
    return chat, chat.with_name(chat.stem + "-memory.db")


async def run_chat(args: argparse.Namespace, console: Console) -> int:
    """The chat command; returns the exit code."""
    from goagent_py.agent import Agent
    from goagent_py.events import AgentEnd, MessageDelta, ToolExecutionEnd, ToolExecutionStart
    from goagent_py.hooks import Hooks

    state = ChatState()
    picked = await pick_provider(args.provider)
    console.note(f"goagent-py chat — provider {picked.name} ({picked.model}): {picked.reason}")

    settings: dict[str, Any] = {}
    closers: list[Any] = []
    if not args.no_memory:
        from goagent_py.memory.policies import TokenWindow
        from goagent_py.memory.short_term import ShortTermMemory
        from goagent_py.memory.storage.sqlite import SQLiteStorage

        chat_path, vector_path = _memory_paths(args.db)
        chat_path.parent.mkdir(parents=True, exist_ok=True)
        storage = SQLiteStorage(chat_path, session_id=args.session)
        closers.append(storage)
        await storage.load()  # fail now, with a clear message, if the file is unusable
        settings["short_term_memory"] = ShortTermMemory(storage, TokenWindow(3000))
        ltm = await _long_term(vector_path, closers)
        if ltm is not None:
            settings["long_term_memory"] = ltm
        console.note(f"session {args.session!r}; memory in {chat_path.parent}")
    else:
        storage = None

    def remember(results: list[ScoredMessage], duration: float, error: Any) -> None:
        state.recalled = list(results)

    agent = Agent(
        provider=picked.provider,
        model=picked.model,
        name="goagent-chat",
        system_prompt=args.system or SYSTEM_PROMPT,
        tools=[current_time, calculator],
        max_iterations=6,
        tool_timeout=30,
        hooks=Hooks(on_long_term_retrieve=remember),
        **settings,
    )

    async def turn(text: str) -> None:
        streamed = False
        async for event in agent.stream(text):
            if isinstance(event, MessageDelta) and event.kind == "text":
                console.say(event.delta, end="")
                streamed = True
            elif isinstance(event, ToolExecutionStart):
                if streamed:
                    console.say()
                    streamed = False
                console.note(f"  [tool] {event.call.name}({_args(event.call.arguments)})")
            elif isinstance(event, ToolExecutionEnd):
                mark = "error" if event.result.is_error else "ok"
                text_out = " ".join(getattr(b, "text", "") for b in event.result.content)
                console.note(f"  [tool] -> {mark}: {text_out[:200]}")
            elif isinstance(event, AgentEnd):
                if not streamed:
                    console.say(event.result.text, end="")
                console.say()

    loop = asyncio.get_running_loop()
    interrupted = False

    def on_sigint() -> None:
        nonlocal interrupted
        if state.turn is not None and not state.turn.done():
            state.turn.cancel()
        else:
            interrupted = True
            raise_exit.set()

    raise_exit = asyncio.Event()
    with contextlib.suppress(NotImplementedError, RuntimeError):
        loop.add_signal_handler(signal.SIGINT, on_sigint)

    if console.interactive:
        console.note("type /help for commands")
    try:
        lines = _lines(sys.stdin)
        while not raise_exit.is_set():
            if console.interactive:
                console.say("you> ", end="")
            next_line = asyncio.ensure_future(anext(lines, None))
            stop = asyncio.ensure_future(raise_exit.wait())
            done, _ = await asyncio.wait({next_line, stop}, return_when=asyncio.FIRST_COMPLETED)
            if next_line not in done:
                next_line.cancel()
                break
            stop.cancel()
            line = next_line.result()
            if line is None:
                break
            if isinstance(line, UnicodeDecodeError):
                console.note("error: input is not UTF-8 text; line skipped")
                state.failures += 1
                continue
            line = line.strip()
            if not line:
                continue
            if line.startswith("/"):
                if await _command(line, console, state, storage):
                    break
                continue
            if console.interactive:
                console.say("bot> ", end="")
            state.turn = asyncio.ensure_future(turn(line))
            try:
                await state.turn
            except asyncio.CancelledError:
                if not state.turn.cancelled():
                    raise
                console.say()
                console.note("(turn cancelled; the session is intact)")
            except MemoryStoreError as exc:
                console.note(f"error: {exc}")
                state.failures += 1
            except GoAgentError as exc:
                console.say()
                console.note(f"error: {exc}")
                state.failures += 1
            finally:
                state.turn = None
    finally:
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.remove_signal_handler(signal.SIGINT)
        for closer in closers:
            with contextlib.suppress(Exception):
                await closer.aclose()
        close = getattr(picked.provider, "aclose", None)
        if close is not None:
            with contextlib.suppress(Exception):
                await close()
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_TURN_FAILED if state.failures else EXIT_OK


async def _long_term(path: Path, closers: list[Any]) -> Any:
    """Long-term memory on sqlite-vec with the local embedder, or None when the extra is missing."""
    try:
        from goagent_py.memory.long_term import LongTermMemory
        from goagent_py.memory.vector.sqlite_vec import SqliteVecStore
        from goagent_py.providers.sentence_transformers import SentenceTransformerEmbedder
    except ImportError as exc:  # pragma: no cover - depends on the installed extras
        raise MissingExtraError(
            str(exc.name or exc), "local,vector", feature="long-term memory"
        ) from exc
    embedder = SentenceTransformerEmbedder()
    store = SqliteVecStore(path, table="memories", dimensions=embedder.dimensions)
    closers.append(store)
    # Load the embedding model in the background while the user types.
    _background.add(asyncio.ensure_future(embedder.load()))
    return LongTermMemory(embedder, store)


_background: set[asyncio.Future[Any]] = set()


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
    elif name == "/memory":
        if not state.recalled:
            console.say("(nothing recalled for the last turn)")
        for i, scored in enumerate(state.recalled, 1):
            console.say(f"[{i}] {scored.score:.3f} {scored.message.role}: {scored.message.text}")
    else:
        console.say(f"unknown command {name}; type /help")
    return False


# -- entry point -----------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The command-line grammar."""
    parser = argparse.ArgumentParser(prog="goagent-py", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    chat = sub.add_parser("chat", help="chat with an agent that remembers you")
    chat.add_argument("--provider", help="anthropic:MODEL, openai:MODEL, ollama:MODEL or local")
    chat.add_argument("--session", default="default", help="conversation name (default: default)")
    chat.add_argument("--db", help="history database file (default: in the data folder)")
    chat.add_argument("--system", help="system prompt")
    chat.add_argument("--no-memory", action="store_true", help="keep nothing between runs")
    rag = sub.add_parser("rag", help="index files and answer questions about them")
    rag_sub = rag.add_subparsers(dest="rag_command", required=True)
    index = rag_sub.add_parser("index", help="index files or folders")
    index.add_argument("paths", nargs="+")
    index.add_argument("--db", help="index database file (default: in the data folder)")
    ask = rag_sub.add_parser("ask", help="answer a question from the index, with citations")
    ask.add_argument("question")
    ask.add_argument("--db", help="index database file (default: in the data folder)")
    ask.add_argument("--provider", help="anthropic:MODEL, openai:MODEL, ollama:MODEL or local")
    ask.add_argument("--top-k", type=int, default=4)
    return parser


async def _main(args: argparse.Namespace) -> int:
    console = Console(sys.stdout, sys.stderr, interactive=sys.stdin.isatty())
    if args.command == "chat":
        return await run_chat(args, console)
    from goagent_py._cli_rag import ask, index

    if args.rag_command == "index":
        return await index(args, console)
    return await ask(args, console)


def main(argv: list[str] | None = None) -> int:
    """Run the command; returns the exit code."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage
        return EXIT_USAGE if exc.code else EXIT_OK
    start = time.perf_counter()
    try:
        return asyncio.run(_main(args))
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
    sys.exit(main())
