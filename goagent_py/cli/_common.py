"""What the ``goagent-py`` commands share: exit codes, the data folder, provider choice, output.

Kept apart from :mod:`goagent_py.cli` so the subcommands living elsewhere (``rag``, ``mcp``)
import this, not the command's entry module.
"""

from __future__ import annotations

import argparse
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from goagent_py._terminal import printable
from goagent_py.errors import ConfigurationError, MemoryStoreError
from goagent_py.providers import DEFAULT_MODELS

SYSTEM_PROMPT = (
    "You are a helpful assistant with a memory of earlier conversations. Answer briefly. "
    "Use the tools for the current time and for arithmetic."
)
"""The default system prompt of ``chat``, ``serve`` and ``mcp serve`` (``--system`` replaces it)."""

SMALL_MODEL_PROMPT = (
    "You are a friendly chat assistant. You can chat, answer general questions, do arithmetic "
    "and tell the time. Reply in one or two short sentences."
)
"""The default for a small model: short, with nothing in it to recite (with the prompt above,
the 135M model answered "What's up?" with "I'm just a helpful assistant with the tools for
current time and arithmetic")."""

EXIT_OK = 0
EXIT_TURN_FAILED = 1
EXIT_USAGE = 2
EXIT_MISSING_EXTRA = 3
EXIT_DATABASE = 4
EXIT_INTERRUPTED = 130


class UsageError(ConfigurationError):
    """The command line was wrong; the message says how to fix it (a misuse, so a
    :class:`~goagent_py.errors.ConfigurationError`: every command exits with the usage code)."""


def port_number(text: str) -> int:
    """A ``--port`` value (argparse ``type``): 0 (any free port) to 65535.

    uvicorn given 99999 announced the address and then hung instead of failing.
    """
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a port: use 0 to 65535 (0: any free port)"
        )
    return port


def listen_socket(host: str, port: int, *, backlog: int = 2048) -> socket.socket:
    """A socket listening on ``host:port``, made before the address is announced.

    uvicorn binds inside its startup: a port in use printed the address, then ended the process
    with ``sys.exit(3)`` (a SystemExit out of ``main()`` in process, and 3 is the code for a
    missing extra); uvloop bound a port past 65535 modulo 65536 (99999 served on 34463).
    ``serve`` and ``mcp serve`` hand this socket to uvicorn and announce
    :func:`listening_url` of it.

    Raises:
        ConfigurationError: the address cannot be had, with what to do instead.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        if not 0 <= port <= 65535:  # create_server would leak its socket on OverflowError
            raise OSError(f"port {port} is not 0 to 65535")
        return socket.create_server((host, port), family=family, backlog=backlog)
    except OSError as exc:
        raise ConfigurationError(
            f"cannot listen on {host}:{port} ({exc}): pick another --port (--port 0 picks a "
            "free one) or --host"
        ) from exc


def listening_url(host: str, listening: socket.socket) -> str:
    """``http://host:port`` of a socket from :func:`listen_socket`: the port it got, so that
    ``--port 0`` shows the free port (an IPv6 ``host`` in brackets)."""
    name = f"[{host}]" if ":" in host else host
    return f"http://{name}:{listening.getsockname()[1]}"


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


def make_parent(path: Path, *, option: str = "--db") -> Path:
    """Make the folder ``path`` goes in (a database file named by ``option``); ``path``.

    ``mkdir`` raised FileExistsError out of the command, as a traceback, when a part of the
    folder is a file (``--db /etc/passwd/chat.db``), and PermissionError in a folder the user
    cannot write to.

    Raises:
        MemoryStoreError: the folder cannot be made (the database exit code), saying what to do.
    """
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise MemoryStoreError(
            f"cannot make the folder of {path} ({reason}: {exc.filename or path.parent}): "
            f"give {option} a file in a folder you can write to, or set GOAGENT_HOME"
        ) from exc
    return path


# -- providers -------------------------------------------------------------------------------


@dataclass
class Picked:
    """The provider chosen for this process, and why.

    ``small`` marks a small model (the embedded one, or a local OpenAI-compatible server): the
    chat gives it the small-model kit (see :mod:`goagent_py.cli._setup`).
    """

    provider: Any
    name: str
    model: str
    reason: str
    small: bool = False


_BASE_URL_VENDORS = ("openai", "ollama")


def parse_provider(spec: str) -> tuple[str, str]:
    """Split ``vendor:MODEL`` (or ``local``) into (vendor, model)."""
    vendor, _, model = spec.partition(":")
    vendor = vendor.strip().lower()
    if vendor not in DEFAULT_MODELS:
        raise UsageError(
            f"unknown provider {spec!r}: use anthropic:MODEL, openai:MODEL, ollama:MODEL or local"
        )
    return vendor, model.strip() or DEFAULT_MODELS[vendor]


def _compatible_server(base_url: str | None) -> bool:
    """Whether OpenAI requests go to another server than OpenAI's (argument or environment)."""
    from urllib.parse import urlsplit

    url = base_url if base_url is not None else os.environ.get("OPENAI_BASE_URL") or ""
    return bool(url) and urlsplit(url).hostname != "api.openai.com"


def make_provider(vendor: str, model: str, base_url: str | None = None) -> Any:
    """Build the provider for ``vendor`` (imports only that vendor).

    OpenAI requests go to ``base_url``, else ``OPENAI_BASE_URL``, else OpenAI. A compatible
    server gets tools offered for one round and never streamed: llama-cpp-python's server
    leaves tool results out of the prompt and cannot stream a tool call.
    """
    if vendor == "openai" and (base_url is not None or _compatible_server(None)):
        from goagent_py.providers.openai import OpenAIProvider
        from goagent_py.small_models.tool_selection import limit_tool_rounds

        provider = OpenAIProvider(base_url=base_url, stream_tools=False)
        return limit_tool_rounds(provider, 1) if _compatible_server(base_url) else provider
    if vendor == "ollama" and base_url is not None:
        from goagent_py.providers.ollama import OllamaProvider

        return OllamaProvider(base_url=base_url)
    from goagent_py.providers import provider_from_string

    return provider_from_string(f"{vendor}:{model}")[0]


def provider_from_spec(spec: str) -> tuple[Any, str]:
    """The provider and model for ``vendor:MODEL`` or ``local`` (for scripts and examples)."""
    vendor, model = parse_provider(spec)
    return make_provider(vendor, model), model


async def pick_provider(spec: str | None, base_url: str | None = None) -> Picked:
    """The provider named by ``spec`` (at ``base_url``, if given), or the first available one.

    Raises:
        UsageError: an unknown provider, or a base URL for a vendor that takes none.
    """
    if base_url is not None:
        vendor, model = parse_provider(spec or "openai")
        if vendor not in _BASE_URL_VENDORS:
            raise UsageError(
                f"--base-url works with openai:MODEL (OpenAI-compatible servers) and "
                f"ollama:MODEL, not {vendor!r}"
            )
        provider = make_provider(vendor, model, base_url)
        return Picked(provider, vendor, model, f"at {base_url}", small=True)
    if spec:
        vendor, model = parse_provider(spec)
        small = vendor == "local" or (vendor == "openai" and _compatible_server(None))
        return Picked(make_provider(vendor, model), vendor, model, "chosen with --provider", small)
    if os.environ.get("ANTHROPIC_API_KEY"):
        vendor, reason = "anthropic", "ANTHROPIC_API_KEY is set"
    elif os.environ.get("OPENAI_API_KEY"):
        vendor, reason = "openai", "OPENAI_API_KEY is set"
    elif os.environ.get("OPENAI_BASE_URL"):
        vendor, reason = "openai", f"OPENAI_BASE_URL is set ({os.environ['OPENAI_BASE_URL']})"
    elif await _ollama_up():
        vendor, reason = "ollama", "an Ollama server answers on localhost:11434"
    else:
        vendor, reason = "local", "no API key and no Ollama server: the embedded model"
    model = DEFAULT_MODELS[vendor]
    small = vendor == "local" or (vendor == "openai" and _compatible_server(None))
    return Picked(make_provider(vendor, model), vendor, model, reason, small)


async def _ollama_up() -> bool:
    try:
        from goagent_py.providers.ollama import ollama_reachable
    except ImportError:
        return False
    try:
        return bool(await ollama_reachable("http://localhost:11434", timeout=0.3))
    except Exception:
        return False


# -- the chat --------------------------------------------------------------------------------


class Console:
    """Where the chat writes: prompts and chrome only when interactive.

    Everything said or noted goes through :func:`~goagent_py._terminal.printable` (newlines
    kept): the model's answers, passages and file names quoted from documents, and what a tool
    returned are text others wrote, and an ESC in them started an escape sequence on the
    user's terminal (clear the screen, retitle the window, write the clipboard).
    """

    def __init__(self, out: TextIO, err: TextIO, interactive: bool) -> None:
        self.out = out
        self.err = err
        self.interactive = interactive
        self.line_open = False  # the last text said did not end its line

    def say(self, text: str = "", end: str = "\n") -> None:
        text = printable(text, newlines=True)
        self.out.write(text + end)
        self.out.flush()
        if text or end:
            self.line_open = not (text + end).endswith("\n")

    def end_line(self) -> None:
        """End the line said so far, if one is open (an answer cut off by an error): a failed
        turn leaves no blank lines among the answers a script reads."""
        if self.line_open:
            self.say()

    def note(self, text: str) -> None:
        self.err.write(printable(text, newlines=True) + "\n")
        self.err.flush()


async def follow_restored_history(session: Any) -> str | None:
    """The turn boundary of the chat and the coding session: if the history file was deleted
    or replaced since the session opened it (a backup restored over it), go on with the file
    now at its path (``SQLiteStorage.reopen``) and read the transcript from it (docs/cli.md
    "Restoring the history from a backup"). Call it between turns, with no run going on.

    Returns:
        The note that tells the user, None when the file is the one opened.
    """
    storage: Any = getattr(session.agent.options.short_term_memory, "storage", None)
    path = getattr(storage, "path", "")
    try:
        if not await session.reopen():  # the one rule, the served chat's too
            return None
        loaded = session.transcript
    except MemoryStoreError as exc:  # the file now there cannot be used: say so, keep going
        return (
            f"(the history file {path} was replaced or deleted since this session opened it, "
            f"and the file now there cannot be read: {exc})"
        )
    return (
        f"(the history file {path} was replaced or deleted since this session opened "
        f"it, as restoring a backup does: going on with the file now there, which holds "
        f"{len(loaded)} message(s) of this conversation)"
    )


def unsaved_note(error: BaseException) -> str:
    """What the chat and the coding session show for a turn its history refused to store (a
    ``HistoryAppend`` with an error): the answer was shown, but the conversation does not hold
    it, which a logged warning alone left the user to find out later."""
    return f"(this turn was not saved in the history: {error})"
