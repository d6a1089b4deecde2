"""A shell tool held in a workspace: programs run with an argument list, in the root.

The model gives ``argv`` (a list: no shell, no quoting surprises). A command line run by
``/bin/sh -c`` (pipes, ``&&``) is accepted only when the tool is made with
``allow_shell=True``. The program runs in the root (or a directory inside it), in its own
process group, with the environment from :func:`goagent_py._subprocess.safe_env` (no API keys),
stdin closed. The call ends when the program ends: then, at the timeout, or when the run is
aborted, the whole group is killed, so a child the program left running in the background
(``server &``, a daemon), which would hold the output pipe open, ends with it. Output (stdout
and stderr together, decoded as UTF-8) is capped at ``max_output_chars`` characters, keeping its
beginning and end with a marker between, and the answer ends with the exit code.

The arguments are checked before anything runs, by ``tool.check`` (which an approval policy
calls before asking): exactly one of ``argv`` and ``command``, a ``cwd`` that is a directory
inside the root, a ``timeout`` between 0 and the tool's limit.

A process group is no boundary: a program can leave it (``setsid``), read the agent's
environment through ``/proc/<agent pid>/environ``, and write anywhere the user can.
``sandbox=True`` runs each command under bubblewrap (:mod:`goagent_py.coding._sandbox`): the
root is the only writable folder, the usual places of credentials in the home folder and the
hidden paths are replaced by empty ones, ``/proc`` shows the sandbox's processes only, the
network is off (unless ``sandbox_network=True``), and killing the command kills everything it
started.
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import math
import os
import shlex
import signal
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from goagent_py._paths import HeldRoot, PathEscapeError, open_dir_in_root, resolve_in_root
from goagent_py._subprocess import safe_env
from goagent_py.coding._sandbox import Sandbox
from goagent_py.coding._tool import CodingTool, CodingToolError, WorkspaceRoot
from goagent_py.errors import ConfigurationError
from goagent_py.tool_context import current_tool_context

__all__ = ["command_text", "shell_tool"]

_REAP_SECONDS = 5.0
_MAX_PINNED = 1000


def command_text(args: Mapping[str, Any]) -> str:
    """The command a shell tool call runs, as one line (what approval patterns match)."""
    if args.get("command"):
        return str(args["command"])
    argv = args.get("argv") or []
    return shlex.join(str(a) for a in argv)


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    """Kill the program's process group, even when the program itself has ended: a child it
    started may still run in the group (and hold the output pipe)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        if sys.platform == "win32":  # pragma: no cover
            if proc.returncode is None:
                proc.kill()
        else:
            os.killpg(proc.pid, signal.SIGKILL)


class _Capped:
    """Keeps the first and last ``limit / 2`` characters of the output text and counts the
    characters between (text: the output decoded once, by :class:`_Output`)."""

    def __init__(self, limit: int) -> None:
        self.half = max(limit // 2, 1)
        self.head: list[str] = []
        self.head_size = 0
        self.tail = ""
        self.dropped = 0

    def add(self, text: str) -> None:
        room = self.half - self.head_size
        if room > 0:
            part = text[:room]
            self.head.append(part)
            self.head_size += len(part)
            text = text[room:]
        if not text:
            return
        self.tail += text
        if len(self.tail) > self.half:
            self.dropped += len(self.tail) - self.half
            self.tail = self.tail[-self.half :]

    def text(self) -> str:
        head = "".join(self.head)
        if not self.dropped:
            return head + self.tail
        return f"{head}\n[... {self.dropped} characters of output cut ...]\n{self.tail}"


class _Output:
    """The program's output bytes decoded once, as they come: a UTF-8 character split between
    two reads is held until its end arrives, so neither the live output a UI shows nor the
    capped answer the model reads shows it as U+FFFD (bytes that are not UTF-8 are)."""

    def __init__(self, limit: int) -> None:
        self.capped = _Capped(limit)
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def add(self, chunk: bytes) -> str:
        """Take ``chunk``; returns the text it completes ("" while a character is cut)."""
        text = self._decoder.decode(chunk)
        if text:
            self.capped.add(text)
        return text

    def text(self) -> str:
        """All of it, capped (a character cut off at the very end is shown as U+FFFD)."""
        rest = self._decoder.decode(b"", final=True)
        if rest:
            self.capped.add(rest)
        return self.capped.text()


def _check_passable(texts: list[str]) -> None:
    """Refuse arguments no program can receive: a NUL byte ends a C string (what would run is
    not what the question showed), and a lone surrogate has no bytes."""
    for text in texts:
        if "\x00" in text:
            raise CodingToolError("the command holds a NUL byte, which no program can receive")
        try:
            os.fsencode(text)
        except UnicodeEncodeError as exc:
            raise CodingToolError(
                f"the command holds {text[exc.start : exc.end]!r}, which is not text a program "
                "can receive (a lone surrogate); write the character itself"
            ) from exc


def _is_dir(path: Path) -> bool:
    try:
        return path.is_dir()
    except OSError:  # a name too long, a loop: not a folder the command can start in
        return False


def _open_cwd(held: HeldRoot, given: Any, checked: Path) -> int:
    """A descriptor of the working folder ``given`` (the root when empty), which must be the
    folder ``checked`` (what the arguments' check resolved it to), opened from the root's
    descriptor held since start-up (never from its name: see :class:`HeldRoot`)."""
    base = held.path
    try:
        fd, real = open_dir_in_root(held, given or ".")
    except PathEscapeError as exc:
        raise CodingToolError(f"cwd {given!r} refused: {exc.reason}") from exc
    except OSError as exc:
        raise CodingToolError(
            f"cwd {given!r} is not a directory of the workspace ({exc.strerror or exc})"
        ) from exc
    if (base / real if real != "." else base) != checked:
        os.close(fd)
        raise CodingToolError(
            f"cwd {given!r} now leads to {real}, not to the folder it named when the call was "
            "checked (and asked about); nothing was run: call again"
        )
    return fd


class _Watched(asyncio.subprocess.SubprocessStreamProtocol):
    """The stream protocol of :func:`asyncio.create_subprocess_exec`, which also says when the
    program itself has ended: ``Process.wait()`` waits for the output pipe to close too, which
    a child left in the background holds open."""

    def __init__(self, limit: int, loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(limit=limit, loop=loop)
        self.exited: asyncio.Future[None] = loop.create_future()

    def process_exited(self) -> None:
        super().process_exited()
        if not self.exited.done():
            self.exited.set_result(None)


async def _start(
    program: list[str], *, cwd: str | Path, env: Mapping[str, str]
) -> tuple[asyncio.SubprocessTransport, asyncio.subprocess.Process, asyncio.Future[None]]:
    """Start ``program`` (stdin closed, stdout and stderr one pipe, in its own process group);
    returns its transport, the process and a future done when the program itself has ended."""
    loop = asyncio.get_running_loop()
    transport, protocol = await loop.subprocess_exec(
        lambda: _Watched(limit=2**16, loop=loop),
        *program,
        cwd=cwd,
        env=env,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,  # its own process group: a kill reaches its children
    )
    return transport, asyncio.subprocess.Process(transport, protocol, loop), protocol.exited


def _fd_path(fd: int) -> str | None:
    """A path that names the folder open at ``fd`` in the child about to start (it changes to
    its folder before it runs the program, with this process's descriptors still open), or
    None where there is none (no ``/proc``)."""
    path = f"/proc/self/fd/{fd}"
    return path if sys.platform.startswith("linux") and os.path.isdir(path) else None


def shell_tool(
    root: str | os.PathLike[str],
    *,
    allow_shell: bool = False,
    timeout: float = 120.0,
    max_output_chars: int = 30_000,
    env: Mapping[str, str] | None = None,
    name: str = "shell",
    sandbox: bool = False,
    sandbox_network: bool = False,
    hide: Sequence[str | os.PathLike[str]] = (),
) -> CodingTool:
    """A tool that runs programs in ``root`` (``tool.mutating`` is True).

    Args:
        root: the workspace directory; the working directory is it or a directory inside it.
        allow_shell: also accept ``command``, a command line run by ``/bin/sh -c``.
        timeout: seconds before the process group is killed (the model may ask for less).
        max_output_chars: the most characters of output returned (beginning and end kept,
            marked cut).
        env: variables to add to the safe environment (see ``safe_env``'s ``extra``).
        name: the tool's name.
        sandbox: run each command under bubblewrap (see the module docstring); needs ``bwrap``
            and Linux namespaces (:func:`goagent_py.coding.sandbox_available` tells).
        sandbox_network: leave the network on inside the sandbox.
        hide: more paths the sandboxed command sees as empty (e.g. the session database's
            folder), besides ``~/.ssh``, ``~/.aws``, ``~/.config``... (``SECRET_PLACES``).

    Returns:
        The tool.

    Raises:
        ConfigurationError: ``root`` is not a directory, a limit is not positive, or
            ``sandbox=True`` where bubblewrap cannot run.
    """
    base = Path(os.path.realpath(os.fspath(root)))
    if not base.is_dir():
        raise ConfigurationError(f"shell_tool(root={root!r}): not an existing directory")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
        raise ConfigurationError(f"shell_tool(timeout={timeout!r}): use a positive number")
    if isinstance(max_output_chars, bool) or not isinstance(max_output_chars, int):
        raise ConfigurationError(f"shell_tool(max_output_chars={max_output_chars!r}): use an int")
    if max_output_chars <= 0:
        raise ConfigurationError("shell_tool(max_output_chars=...): use a positive int")
    child_env = safe_env(env)
    workspace = WorkspaceRoot(base)
    held_root = HeldRoot(base)
    jail = Sandbox(base, network=sandbox_network, hide=hide) if sandbox else None

    pinned: dict[str, Path] = {}  # call -> the folder its first check resolved

    def check(args: dict[str, Any]) -> tuple[list[str], Path, float]:
        """The program to run, its working directory and time limit; refuses bad arguments."""
        workspace.check()
        argv = args.get("argv") or []
        line = args.get("command")
        if line and not allow_shell:
            raise CodingToolError("command lines are not enabled; give argv (a list) instead")
        if bool(argv) == bool(line):
            raise CodingToolError("give exactly one of argv (a list of strings) or command")
        if argv and (not isinstance(argv, list) or not all(isinstance(a, str) for a in argv)):
            raise CodingToolError("argv must be a list of strings, e.g. ['pytest', '-q']")
        if argv and not argv[0].strip():
            raise CodingToolError("argv[0] must name a program")
        _check_passable([*argv, str(line or "")])
        cwd = base
        if args.get("cwd") not in (None, "", "."):
            try:
                cwd = resolve_in_root(held_root, args["cwd"])
            except PathEscapeError as exc:
                raise CodingToolError(f"cwd {args['cwd']!r} refused: {exc.reason}") from exc
            if not _is_dir(cwd):
                raise CodingToolError(
                    f"cwd {args['cwd']!r} is not a directory of the workspace (leave it out to "
                    "run in the root)"
                )
        limit = timeout
        asked = args.get("timeout")
        if asked is not None:
            ok = isinstance(asked, (int, float)) and not isinstance(asked, bool)
            if not ok or not math.isfinite(asked) or not 0 < asked <= timeout:
                raise CodingToolError(
                    f"timeout {asked!r} is out of bounds: give seconds above 0 and at most "
                    f"{timeout:g}, or leave it out"
                )
            limit = float(asked)
        program = ["/bin/sh", "-c", line] if line else list(argv)
        context = current_tool_context()
        # Keyed by run, iteration and call id: a model may give its calls the same ids in
        # every turn, and a pin left by a call that was blocked must not hold the next one.
        if context is not None and context.idempotency_key not in pinned:
            # The first resolution in the call (an approval gate's check, before the
            # question): the folder the user was asked about is the one it runs in.
            if len(pinned) >= _MAX_PINNED:
                pinned.clear()  # calls blocked after their check never came to run
            pinned[context.idempotency_key] = cwd
        return program, cwd, limit

    async def run(args: dict[str, Any]) -> str:
        program, cwd, limit = check(args)
        # The folder is opened once, held in the root at open time, and the program starts in
        # that very folder (its descriptor): a link swapped in after the check above cannot
        # start it elsewhere (outside the root, or in another folder than the one asked about).
        context = current_tool_context()
        first = pinned.pop(context.idempotency_key, cwd) if context is not None else cwd
        cwd_fd = _open_cwd(held_root, args.get("cwd"), first)
        try:
            if jail is not None:
                opened = os.fstat(cwd_fd)  # bubblewrap enters it by name: it checks it is this
                program = jail.wrap(program, cwd, folder=(opened.st_dev, opened.st_ino))
            transport, proc, exited = await _start(
                program,
                cwd=_fd_path(cwd_fd) or cwd,
                env=child_env,
            )
        except FileNotFoundError as exc:
            raise CodingToolError(f"no such program: {program[0]!r}") from exc
        except PermissionError as exc:
            raise CodingToolError(f"cannot run {program[0]!r}: permission denied") from exc
        except OSError as exc:  # arguments too long, too many processes...
            raise CodingToolError(f"cannot run {program[0]!r}: {exc.strerror or exc}") from exc
        finally:
            os.close(cwd_fd)
        context = current_tool_context()
        if context is not None:
            context.report({"pid": proc.pid, "command": command_text(args)})
        out = _Output(max_output_chars)
        timed_out = held = False

        async def pump() -> None:
            assert proc.stdout is not None
            while chunk := await proc.stdout.read(65536):
                text = out.add(chunk)
                if context is not None and text:  # live output, for a UI (an update event)
                    context.report({"output": text})

        reading = asyncio.ensure_future(pump())
        try:
            # The call lasts as long as the program, not as long as the pipe: a child left in
            # the background (``server &``) inherits the pipe and would hold it open.
            await asyncio.wait_for(asyncio.shield(exited), limit)
        except TimeoutError:
            timed_out = True
        finally:
            # The program ended, timed out, was aborted (cancellation) or failed: the whole
            # group goes, background children included, so no process outlives the call.
            _kill_group(proc)
            # The rest of what the program wrote is in the pipe: read to its end, which comes
            # once the group is dead; bounded, for a child that left the group (setsid) and
            # keeps the pipe open for ever.
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(reading), _REAP_SECONDS)
            held = not reading.done()
            reading.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(exited), _REAP_SECONDS)
            transport.close()  # the pipe such a child still holds: not ours to read any more
        text = out.text().rstrip("\n")
        if held:
            text += (
                "\n[note: a process the command started left its process group (setsid) and "
                "still runs, holding the output; it was not stopped]"
            )
        if timed_out:
            killed = f"[killed after {limit:g} seconds (timeout)]"
            return f"{text}\n{killed}\nexit code: {proc.returncode}"
        return f"{text}\nexit code: {proc.returncode}" if text else f"exit code: {proc.returncode}"

    props: dict[str, Any] = {
        "argv": {
            "type": "array",
            "items": {"type": "string"},
            "description": "the program and its arguments, e.g. ['pytest', '-q']",
        },
        "cwd": {"type": "string", "description": "working directory relative to the root"},
        "timeout": {"type": "number", "description": f"seconds (at most {timeout:g})"},
    }
    description = "Run a program in the workspace (argv list, no shell); answers its output "
    description += "and exit code."
    if allow_shell:
        props["command"] = {"type": "string", "description": "a command line for /bin/sh -c"}
        description += " Give a command line in `command` instead when you need a shell."
    schema = {"type": "object", "properties": props, "required": []}
    tool = CodingTool(name, description, schema, run, mutating=True)
    tool.check = check
    tool.root = workspace
    return tool
