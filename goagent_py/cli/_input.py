"""How the chat reads the user's lines: prompt_toolkit, else readline, else a plain pipe.

On a terminal the chat edits lines and keeps a history: with prompt_toolkit (extra ``cli``)
arrow keys, Ctrl-R search and a history file; without it, the stdlib ``readline``. Both read in
raw mode, so a paste longer than the terminal's 4,095-character line limit arrives whole, and
prompt_toolkit keeps a multi-line paste (bracketed paste) as one message. Piped input is read
line by line with no length limit below 1 MiB.

Each reader is an async iterator of lines: a ``str`` per line, a ``UnicodeDecodeError`` for a
line that is not UTF-8 (the chat skips it and says so); it ends at end of input (Ctrl-D). A
``KeyboardInterrupt`` (yielded, not raised) is a Ctrl-C read as a key at the prompt: the chat
quits as interrupted.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import stat
import sys
import threading
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

__all__ = ["LineSource", "line_source", "pipe_lines"]

LineSource = AsyncIterator["str | UnicodeDecodeError | KeyboardInterrupt"]


_LINE_LIMIT = 1 << 20


def _too_long() -> UnicodeDecodeError:
    return UnicodeDecodeError("utf-8", b"", 0, 1, "line too long")


def _decoded(raw: bytes) -> str | UnicodeDecodeError:
    try:
        return raw.decode("utf-8").rstrip("\r\n")
    except UnicodeDecodeError as exc:
        return exc


def _is_pipe(stream: Any) -> bool:
    """Whether ``stream`` is a pipe or a socket, which the event loop can watch; a regular file
    or a device (``< questions.txt``, ``< /dev/null``) is not ("Pipe transport is for
    pipes/sockets only", and epoll refuses a regular file)."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except (AttributeError, OSError, ValueError):
        return False
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode)


async def pipe_lines(stream: Any) -> LineSource:
    """Lines of a pipe or file, read without blocking the event loop."""
    if not _is_pipe(stream):
        async for line in _file_lines(stream):
            yield line
        return
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=_LINE_LIMIT)
    protocol = asyncio.StreamReaderProtocol(reader)
    transport, _ = await loop.connect_read_pipe(lambda: protocol, stream)
    try:
        while True:
            try:
                raw = await reader.readline()
            except ValueError:  # a line over the limit
                yield _too_long()
                continue
            if not raw:
                return
            yield _decoded(raw)
    finally:
        transport.close()


async def _file_lines(stream: Any) -> LineSource:
    """Lines of a file or device, each read in a worker thread (the same limit as a pipe's)."""
    from goagent_py._workers import to_thread

    binary = getattr(stream, "buffer", stream)
    while True:
        raw = await to_thread(binary.readline, _LINE_LIMIT + 1)
        if not raw:
            return
        if len(raw) > _LINE_LIMIT and not raw.endswith(b"\n"):
            while raw and not raw.endswith(b"\n"):  # the rest of the long line
                raw = await to_thread(binary.readline, _LINE_LIMIT)
            yield _too_long()
            continue
        yield _decoded(raw)


async def _prompt_toolkit_lines(prompt: str, history: Path) -> LineSource:
    from prompt_toolkit import PromptSession
    from prompt_toolkit.history import FileHistory, History, InMemoryHistory

    # The history is a convenience: a folder that cannot be made (GOAGENT_HOME under a file or
    # read-only) costs the history, not the chat.
    kept: History
    try:
        history.parent.mkdir(parents=True, exist_ok=True)
        kept = FileHistory(str(history))
    except OSError:
        kept = InMemoryHistory()
    session: PromptSession[str] = PromptSession(history=kept)
    while True:
        try:
            # Not prompt_toolkit's own SIGINT handler: it replaces the chat's while it reads and
            # removes it afterwards, and Ctrl-C during an answer then did nothing. At the prompt
            # the terminal is in raw mode, so Ctrl-C arrives as a key (KeyboardInterrupt below).
            text = await session.prompt_async(prompt, handle_sigint=False)
        except EOFError:
            return
        except KeyboardInterrupt as exc:
            # Ctrl-C at the prompt quits, as interrupted (exit 130, as the readline reader's
            # SIGINT gives): handed over as data, since a KeyboardInterrupt left to fly out of
            # this task would end the event loop with a traceback.
            yield exc
            return
        yield text


class _FdLines:
    """``input`` for a pipe: lines read from the file descriptor with ``os.read``.

    ``input()`` on a stream that is not a terminal reads through ``sys.stdin``'s buffer and
    holds its lock while it waits; a process that ended (Ctrl-C) while a daemon thread waited
    there aborted at shutdown ("Fatal Python error: _enter_buffered_busy", SIGABRT) instead of
    exiting 130. ``os.read`` holds no lock. One read at a time (the callers' contract).
    """

    def __init__(self, fd: int, *, encoding: str = "utf-8", errors: str = "strict") -> None:
        self._fd = fd
        self._encoding = encoding
        self._errors = errors
        self._buffer = b""
        self._ended = False

    def __call__(self, prompt: str = "") -> str:
        if prompt:
            sys.stdout.write(prompt)
            sys.stdout.flush()
        while b"\n" not in self._buffer and not self._ended:
            chunk = os.read(self._fd, 1 << 16)
            self._ended = not chunk
            self._buffer += chunk
        if not self._buffer:
            raise EOFError
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode(self._encoding, self._errors)


def stdin_reader() -> Callable[[str], str]:
    """What reads a line of this process's stdin in a daemon thread: ``input`` when stdin and
    stdout are terminals (it edits the line, and waits outside ``sys.stdin``'s buffer) or stdin
    has no descriptor (replaced in process), else :class:`_FdLines` on stdin's descriptor."""
    stdin = sys.stdin
    try:
        if stdin.isatty() and sys.stdout.isatty():
            return input
        fd = stdin.fileno()
    except (AttributeError, OSError, ValueError):
        return input
    return _FdLines(fd, encoding=stdin.encoding or "utf-8", errors=stdin.errors or "strict")


def _input_in_daemon_thread(
    prompt: str, reader: Callable[[str], str] | None = None
) -> asyncio.Future[str | None]:
    # A daemon thread, not the executor: quitting must not wait for a pending input().
    reading = reader or input  # looked up now: tests stand a fake terminal in for input
    loop = asyncio.get_running_loop()
    future: asyncio.Future[str | None] = loop.create_future()

    def settle(value: str | None, error: BaseException | None) -> None:
        if future.done():
            return
        if error is not None:
            future.set_exception(error)
        else:
            future.set_result(value)

    def hand_over(value: str | None, error: BaseException | None) -> None:
        # The loop may be closed by now (the command ended while input() waited; in process,
        # the thread outlives it): nobody waits for this line any more.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(settle, value, error)

    def read() -> None:
        try:
            value: str | None = reading(prompt)
        except EOFError:
            value = None
        except BaseException as exc:  # handed to the loop
            hand_over(None, exc)
            return
        hand_over(value, None)

    threading.Thread(target=read, name="goagent-chat-input", daemon=True).start()
    return future


async def _readline_lines(prompt: str, history: Path) -> LineSource:
    import readline

    with contextlib.suppress(OSError):
        history.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(OSError):
        readline.read_history_file(history)
    try:
        while True:
            text = await _input_in_daemon_thread(prompt)
            if text is None:
                return
            yield text
    finally:
        with contextlib.suppress(OSError):
            readline.write_history_file(history)


def line_source(stdin: Any, *, interactive: bool, prompt: str, history: Path) -> LineSource:
    """The chat's input: an editing reader with history on a terminal, else the pipe's lines.

    Args:
        stdin: the input stream.
        interactive: stdin is a terminal.
        prompt: the prompt shown before each line (terminal only).
        history: the history file (terminal only).
    """
    if not interactive:
        return pipe_lines(stdin)
    try:
        import prompt_toolkit  # noqa: F401
    except ImportError:
        pass
    else:
        return _prompt_toolkit_lines(prompt, history)
    try:
        import readline  # noqa: F401
    except ImportError:  # pragma: no cover - Windows without pyreadline
        return pipe_lines(stdin)
    return _readline_lines(prompt, history)
