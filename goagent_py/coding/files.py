"""File tools held inside one workspace root: read, write, edit, list, glob, grep.

Every path a model gives goes through :mod:`goagent_py._paths`: ``..``, absolute paths, NUL
bytes and symlinks leading out are refused, and files are opened with the check made at open
time (directory descriptors, ``O_NOFOLLOW``), so a symlink swapped in after a check cannot
lead outside. Directory work is held the same way: list_dir, glob and grep open every
directory in the descriptor of the one before it, never following a symlink, and write_file
makes missing parent directories the same way, so a directory swapped for a symlink while a
tool runs yields no name or byte from outside and no directory is made outside.

Path rules (an :class:`~goagent_py.coding.ApprovalPolicy` deny pattern such as
``*(secrets/**)``) reach the toolkit through :meth:`FileToolkit.add_path_rule`: what a walk
finds under a denied path is left out of its answer, and a read or write whose opened file
(symlinks resolved) is denied is refused.

grep matches with the ``regex`` package (``pip install "goagent-py[code]"``) in a worker
thread, with its matching time bounded (``grep_timeout``): a pattern that backtracks
catastrophically ends in an error the model reads, and the event loop never stalls. A grep or
glob walk is bounded too (``max_walk_files``, ``walk_timeout``: the answer then says it stopped
early), and a call that is cancelled (the run aborted, the tool timed out) stops walking.

A toolkit remembers what the agent read (modification time and SHA-256 per file). Writing or
editing a file that changed since the agent last read it is refused as stale (the model reads
it again first), and a read of a file that changed since the last read says so. A write or edit
reads, checks and writes the file through one open, and refuses it untouched when another
program changed it in between. Writes to one path run one after another in call order
(:class:`~goagent_py.coding._tool.PathQueue`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import stat
import threading
import time
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from goagent_py._paths import (
    HeldRoot,
    PathEscapeError,
    open_dir_in_root,
    open_entry_in_root,
    open_file_in_root,
    relative_in_root,
    resolve_in_root,
    walk_files,
)
from goagent_py._workers import to_thread
from goagent_py.coding._edit import apply_edit
from goagent_py.coding._match import LineSearch, glob_matcher, text_lines
from goagent_py.coding._terminal import printable
from goagent_py.coding._tool import (
    CodingTool,
    CodingToolError,
    PathQueue,
    PathRule,
    WorkspaceRoot,
    call_key,
    valid_text,
)
from goagent_py.errors import ConfigurationError
from goagent_py.messages import ToolCall

__all__ = ["FileToolkit", "file_tools"]

MAX_WALK_DEPTH = 100
"""The most folder levels below its start a grep or glob walk enters (it holds one open
descriptor per level)."""

_SKIP_DIRS = frozenset({".git", ".hg", ".svn", "node_modules", "__pycache__", ".venv", ".tox"})


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class FileToolkit:
    """The file tools of one workspace, sharing what the agent has read.

    Args:
        root: the workspace directory; no tool reads or writes outside it.
        max_read_chars: the most characters one read returns (the rest is marked as cut).
        max_file_bytes: files larger than this are not edited or searched (a read shows
            their first bytes), and no write or edit makes one.
        max_results: the most lines a list, glob or grep answer holds.
        require_read: an edit, or a write that replaces an existing file, needs a read first.
        grep_timeout: the most seconds one grep or glob spends matching (a pattern that
            backtracks catastrophically ends in an error instead of running forever).
        max_walk_files: the most files one grep or glob visits (entries one list_dir reads);
            past it the answer holds what was found, with a note to narrow the search.
        walk_timeout: the most seconds one grep, glob or list_dir spends walking and reading
            (the same note past it).
    """

    root: str | os.PathLike[str]
    max_read_chars: int = 50_000
    max_file_bytes: int = 5_000_000
    max_results: int = 200
    require_read: bool = True
    grep_timeout: float = 10.0
    max_walk_files: int = 100_000
    walk_timeout: float = 60.0
    _seen: dict[Path, str] = field(default_factory=dict, repr=False)
    _rules: list[PathRule] = field(default_factory=list, repr=False)
    _queue: PathQueue = field(default_factory=PathQueue, repr=False)
    # call key -> (the file, the tool, its arguments): the writes and edits that took their
    # place in a write queue and have not run yet, in call order (what a preview applies).
    _planned: dict[str, tuple[Path, str, dict[str, Any]]] = field(default_factory=dict, repr=False)
    # Held by a body's read-check-write and by a preview's read, both in worker threads: a
    # preview sees each earlier change either in the file or in _planned, never in both or
    # neither. Never taken on the event loop: it is held across file I/O.
    _plan_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # Guards _planned's entries alone, never across I/O: the loop takes and gives up places
    # (reserve, release) under it without waiting for a write or a preview.
    _table_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def __post_init__(self) -> None:
        real = Path(os.path.realpath(os.fspath(self.root)))
        if not real.is_dir():
            raise ConfigurationError(f"FileToolkit(root={self.root!r}): not an existing directory")
        self.root = real
        self._workspace = WorkspaceRoot(real)
        # Every open starts from this descriptor, never from the root's name again: a root
        # swapped for a link after the call's check cannot lead an open elsewhere.
        self._held = HeldRoot(real)
        for name in ("max_read_chars", "max_file_bytes", "max_results", "max_walk_files"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigurationError(f"FileToolkit({name}={value!r}): use a positive int")
        for name in ("grep_timeout", "walk_timeout"):
            timeout = getattr(self, name)
            number = isinstance(timeout, int | float) and not isinstance(timeout, bool)
            if not number or not timeout > 0:
                raise ConfigurationError(
                    f"FileToolkit({name}={timeout!r}): use a positive number of seconds"
                )

    def add_path_rule(self, rule: PathRule) -> None:
        """Hide and refuse the paths ``rule(tool_name, path)`` names (an approval policy adds
        its deny patterns here). The path is relative to the root with symlinks resolved."""
        if rule not in self._rules:
            self._rules.append(rule)

    def _hidden(self, tool: str, path: str) -> bool:
        return any(rule(tool, path) for rule in self._rules)

    def _refuse_hidden(self, tool: str, path: str, real: str) -> None:
        if self._hidden(tool, real):
            raise CodingToolError(f"{path}: refused: {tool} is not allowed on {real} (path rule)")

    def _refuse_linked(self, path: str, fd: int) -> None:
        """With path rules, refuse an opened file that has other hard links: one of its other
        names may be a denied path (the same inode), which no check of this name can see."""
        if self._rules and os.fstat(fd).st_nlink > 1:
            raise CodingToolError(
                f"{path}: refused: it has other hard links (a path the rules deny may be one "
                "of them)"
            )

    # -- helpers -------------------------------------------------------------------------------

    @property
    def _base(self) -> Path:
        assert isinstance(self.root, Path)
        return self.root

    def _resolve(self, path: str) -> Path:
        try:
            return resolve_in_root(self._held, path)
        except PathEscapeError as exc:
            raise CodingToolError(f"{path}: refused: {exc.reason}") from exc
        except OSError as exc:  # a symlink on the way changed while it was being read
            raise CodingToolError(f"{path}: could not be resolved ({exc}); try again") from exc

    def _refuse_moved(self, path: str, real: str, expect: Path | None) -> None:
        """Refuse when ``path`` now opens another file than ``expect`` (the file resolved when
        the call was approved or started): a link swapped in meanwhile redirects it."""
        if expect is not None and self._base / real != expect:
            shown = expect.relative_to(self._base).as_posix() if expect != self._base else "."
            raise CodingToolError(
                f"{path}: refused: it now leads to {real}, not to {shown} as when the call "
                "was approved; call again"
            )

    def _read_opened(
        self, path: str, tool: str = "read_file", expect: Path | None = None, *, head: bool = False
    ) -> tuple[bytes, Path]:
        """The file's bytes and the resolved path of the file the one open reached (what a
        read is recorded under: resolving the name again could name another file). With
        ``head``, a file over ``max_file_bytes`` gives its first ``max_file_bytes + 1`` bytes
        instead of an error (a caller tells it by the length)."""
        with _opening(path):
            opened, real = open_file_in_root(self._held, path, "rb")
            with opened as f:
                return self._read_fd(path, f, real, tool, expect, head=head), self._base / real
        raise AssertionError("unreachable")  # pragma: no cover - _opening re-raises

    def _read_fd(
        self,
        path: str,
        f: Any,
        real: str,
        tool: str,
        expect: Path | None = None,
        *,
        head: bool = False,
    ) -> bytes:
        """The bytes of the opened file ``f`` (``real``: the path the open reached), after the
        checks made on what was opened, never on the name again."""
        self._refuse_hidden(tool, path, real)
        self._refuse_moved(path, real, expect)
        self._refuse_linked(path, f.fileno())
        size = os.fstat(f.fileno()).st_size
        if size > self.max_file_bytes and not head:
            raise CodingToolError(
                f"{path}: {size} bytes, more than the {self.max_file_bytes} bytes allowed"
            )
        data: bytes = f.read(self.max_file_bytes + 1)
        return data

    def _rewrite(
        self,
        path: str,
        tool: str,
        expect: Path,
        make: Callable[[bytes | None], bytes],
        *,
        create: bool,
    ) -> bytes:
        """Open ``path`` once for reading and writing (made, with its missing folders, when
        ``create``), give ``make`` its bytes (None for a file this open made) and write what
        ``make`` returns through the same descriptor; returns that.

        One open, so the file checked (rules, approved path, hard links, freshness) is the file
        written; and the bytes ``make`` saw are read again just before the write: a file that
        another program changed meanwhile (a formatter the model started beside the edit, the
        user's editor) is refused untouched, never overwritten with an edit of its old text.
        """
        self._refuse_hidden(tool, path, relative_in_root(self._held, path))
        with _opening(path, failing="cannot be written"):
            opened, real, made = self._open_rw(path, create=create)
            with opened as f:
                fd = f.fileno()
                self._refuse_hidden(tool, path, real)  # a link swapped in since the check
                self._refuse_moved(path, real, expect)
                # A file with another hard link may be one outside the root (the same inode),
                # which no path check can see: refused untouched.
                if os.fstat(fd).st_nlink > 1:
                    raise CodingToolError(
                        f"{path}: refused: it has other hard links (it may be a file outside "
                        "the root)"
                    )
                current = None if made else self._read_fd(path, f, real, tool)
                data = make(current)
                self._check_size(path, data)
                if current is not None and os.pread(fd, len(current) + 1, 0) != current:
                    raise CodingToolError(
                        f"{path}: the file changed on disk while it was being changed here "
                        "(another program wrote it); nothing was written: read it again"
                    )
                self._refuse_replaced(path, fd, written=False)
                os.ftruncate(fd, 0)
                os.pwrite(fd, data, 0)
                self._refuse_replaced(path, fd, written=True)
                return data

    def _rewrite_planned(
        self,
        key: str,
        path: str,
        tool: str,
        expect: Path,
        make: Callable[[bytes | None], bytes],
        *,
        create: bool,
    ) -> bytes:
        """:meth:`_rewrite`, and the call ``key`` no longer planned, in one step for a preview
        (written or refused, it is not a change still to come)."""
        with self._plan_lock:
            try:
                data = self._rewrite(path, tool, expect, make, create=create)
                self._seen[expect] = _digest(data)
            finally:
                with self._table_lock:
                    self._planned.pop(key, None)
        return data

    def planned(
        self, call: ToolCall, read: Callable[[HeldRoot], tuple[str | None, str]]
    ) -> tuple[str | None, str]:
        """The text of the file ``call`` changes as it will be when ``call`` runs, for its
        approval preview, and a note ("" when there is nothing to say).

        ``read(root)`` reads the file as it is now (None and a note when it cannot be shown,
        None and "" when it does not exist); the writes and edits of the same file that took
        their place before ``call`` and have not run yet (approved earlier in the turn; the
        denied ones gave their place up) are applied to it in order, as their bodies will
        apply them: one that will be refused (stale, not read, its text not found) is left
        out and named.
        """
        key = call_key(call)
        with self._plan_lock:
            text, note = read(self._held)
            with self._table_lock:
                planned = list(self._planned.items())
            mine = dict(planned).get(key)
            target = mine[0] if mine is not None else None
            if target is None:
                try:
                    target = self._resolve(str(call.arguments.get("path", "")))
                except CodingToolError:
                    return text, note
            earlier = []
            for other, (where, tool, args) in planned:
                if other == key:
                    break
                if where == target:
                    earlier.append((tool, args))
            seen = self._seen.get(target)
        if not earlier or (text is None and note):
            return text, note
        notes: list[str] = []
        applied = 0
        for tool, args in earlier:
            current = None if text is None else text.encode("utf-8", "surrogateescape")
            unread = seen is None and self.require_read
            if current is not None and (unread or (seen is not None and seen != _digest(current))):
                notes.append(f"an earlier {tool} of it in this turn will be refused (stale)")
                continue
            if tool == "write_file":
                text = str(args.get("content", ""))
            elif text is None:
                notes.append(f"an earlier {tool} of it in this turn will fail (no such file)")
                continue
            else:
                try:
                    text, _ = apply_edit(
                        text,
                        str(args.get("old_string", "")),
                        str(args.get("new_string", "")),
                        replace_all=bool(args.get("replace_all")),
                        path=str(args.get("path", "")),
                    )
                except CodingToolError as exc:
                    notes.append(f"an earlier {tool} of it in this turn will fail ({exc})")
                    continue
            seen = _digest(text.encode("utf-8", "surrogateescape"))
            applied += 1
        if applied:
            notes.insert(0, f"as it will be after {applied} earlier change(s) to it in this turn")
        return text, f"({'; '.join(notes)})"

    def _refuse_replaced(self, path: str, fd: int, *, written: bool) -> None:
        """Refuse when ``path`` no longer names the file open at ``fd``: another program saved
        a new file over the name (as editors do), and a write through ``fd`` reaches only the
        old, unlinked one."""
        try:
            opened, _ = open_file_in_root(self._held, path, "rb")
            with opened as f:
                same = os.path.samestat(os.fstat(f.fileno()), os.fstat(fd))
        except (OSError, PathEscapeError):
            same = False  # gone, or now leads elsewhere: not the file written
        if not same:
            done = "your change is not in it" if written else "nothing was written"
            raise CodingToolError(
                f"{path}: the file was replaced while it was being changed here (another "
                f"program saved a new one); {done}: read it again"
            )

    def _check_size(self, path: str, data: bytes) -> None:
        if len(data) > self.max_file_bytes:
            raise CodingToolError(
                f"{path}: the new content is {len(data)} bytes, more than the "
                f"{self.max_file_bytes} bytes allowed; write a smaller file"
            )

    def _open_rw(self, path: str, *, create: bool) -> tuple[Any, str, bool]:
        """``path`` opened read-write (held in the root at open time), the path it reached,
        and whether this open made it (only with ``create``; missing folders are made one at
        a time in the descriptor of the one before, never outside, whatever is swapped in)."""
        if create:
            parent = os.path.dirname(path.replace("\\", "/").strip("/"))
            if parent:
                fd, _ = open_dir_in_root(self._held, parent, create=True)
                os.close(fd)
        for _ in range(3):
            try:
                opened, real = open_file_in_root(self._held, path, "r+b")
                return opened, real, False
            except FileNotFoundError:
                if not create:
                    raise
            try:
                opened, real = open_file_in_root(self._held, path, "x+b")
                return opened, real, True
            except FileExistsError:
                continue  # made meanwhile by another program: open it as an existing file
        raise CodingToolError(f"{path}: it keeps appearing and disappearing; try again")

    def _check_fresh(self, path: str, resolved: Path, current: bytes | None) -> None:
        """Refuse a change to a file the agent has not read, or that changed since it did."""
        if current is None:
            return  # a new file
        seen = self._seen.get(resolved)
        if seen is None:
            if self.require_read:
                raise CodingToolError(f"{path}: read the file before changing it")
            return
        if seen != _digest(current):
            raise CodingToolError(
                f"{path}: the file changed since you last read it (stale); read it again first"
            )

    # -- the tools -----------------------------------------------------------------------------

    def _read_sync(self, args: dict[str, Any]) -> str:
        """read_file: numbered lines of a text file, from ``offset`` for ``limit`` lines."""
        path = args["path"]
        if args.get("limit") is not None and int(args["limit"]) < 1:
            raise CodingToolError(f"limit {args['limit']!r}: give at least 1 line, or leave it out")
        data, resolved = self._read_opened(path, head=True)
        cut = len(data) > self.max_file_bytes
        if cut:
            # Too large to edit or search, still worth reading (a log): its first bytes, up
            # to the last whole line, recorded as no read (an edit needs a whole one).
            end = data.rfind(b"\n", 0, self.max_file_bytes)
            data = data[: end + 1] if end >= 0 else data[: self.max_file_bytes]
        digest = _digest(data)
        before = self._seen.get(resolved)
        if not cut:
            self._seen[resolved] = digest
        if _binary(data):
            # Control bytes mean nothing to the model and a terminal may act on them.
            return (
                f"[{path}: a binary file ({len(data)} bytes; a NUL byte in its first "
                f"{_SNIFF} bytes); not shown]"
            )
        try:
            text, utf8 = data.decode("utf-8"), True
        except UnicodeDecodeError:
            text, utf8 = data.decode("utf-8", errors="replace"), False
        lines = text_lines(text)
        start = max(int(args.get("offset", 1)), 1)
        limit = args.get("limit")
        end = len(lines) if limit is None else min(len(lines), start - 1 + max(int(limit), 0))
        out: list[str] = []
        if before is not None and before != digest:
            out.append("[note: this file changed since you last read it]")
        if cut:
            out.append(
                f"[note: {path} is larger than {self.max_file_bytes} bytes: only its first "
                f"{self.max_file_bytes} bytes ({len(text_lines(text))} whole lines) can be "
                "read, and it cannot be edited or searched here]"
            )
        if not utf8:
            out.append(
                "[note: this file is not valid UTF-8: the bytes that are not are shown as "
                "\ufffd; edit_file keeps them as they are, write_file would replace them]"
            )
        used = 0
        for n in range(start, end + 1):
            line = f"{n:6}\t{lines[n - 1]}"
            if used == 0 and len(line) > self.max_read_chars:
                # One line longer than the cap: its start, not nothing (the model would read
                # the same offset again and again).
                out.append(line[: self.max_read_chars])
                more = f"; read on with offset={n + 1}" if n < len(lines) else ""
                out.append(
                    f"[... line {n} cut at {self.max_read_chars} characters: it has "
                    f"{len(lines[n - 1])}; its end cannot be shown here (grep finds text in it)"
                    f"{more}]"
                )
                break
            if used + len(line) > self.max_read_chars:
                out.append(
                    f"[... cut at {self.max_read_chars} characters; lines {n}-{len(lines)} "
                    f"not shown: read again with offset={n}]"
                )
                break
            out.append(line)
            used += len(line) + 1
        if not lines:
            out.append("[empty file]")
        elif start > len(lines):
            out.append(f"[the file has {len(lines)} lines; offset {start} is past the end]")
        return "\n".join(out)

    async def write(self, args: dict[str, Any]) -> str:
        """write_file: create or replace a file with ``content``."""
        path, content = args["path"], args["content"]
        _refuse_folder_path(path)
        resolved = self._approved(path)

        try:
            encoded: bytes = content.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise CodingToolError(f"content cannot be written as UTF-8 ({exc.reason})") from exc
        self._check_size(path, encoded)

        def make(current: bytes | None) -> bytes:
            self._check_fresh(path, resolved, current)
            return encoded

        key = _running_key()

        def body() -> str:
            data = self._rewrite_planned(key, path, "write_file", resolved, make, create=True)
            return f"wrote {path} ({len(data)} bytes, {content.count(chr(10)) + 1} lines)"

        return await self._queue.run(resolved, lambda: _finish_in_thread(body), key)

    async def edit(self, args: dict[str, Any]) -> str:
        """edit_file: replace ``old_string`` (exactly once, or every time) with ``new_string``."""
        path, old, new = args["path"], args["old_string"], args["new_string"]
        replace_all = bool(args.get("replace_all", False))
        _refuse_folder_path(path)
        resolved = self._approved(path)
        if not old:
            raise CodingToolError("old_string is empty; use write_file to create a file")
        if old == new:
            raise CodingToolError("old_string and new_string are the same")

        counted: list[int] = []

        def make(current: bytes | None) -> bytes:
            assert current is not None  # an edit opens an existing file only
            self._check_fresh(path, resolved, current)
            # Bytes that are not UTF-8 (a Latin-1 file, a binary part) pass through unchanged.
            text = current.decode("utf-8", "surrogateescape")
            changed, count = apply_edit(text, old, new, replace_all=replace_all, path=path)
            counted.append(count)
            try:
                return changed.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError as exc:
                raise CodingToolError(
                    f"new_string cannot be written as UTF-8 ({exc.reason})"
                ) from exc

        key = _running_key()

        def body() -> str:
            self._rewrite_planned(key, path, "edit_file", resolved, make, create=False)
            return f"edited {path}: {counted[0]} replacement(s)"

        return await self._queue.run(resolved, lambda: _finish_in_thread(body), key)

    def _approved(self, path: str) -> Path:
        """The file a write or edit must reach: the one ``path`` resolved to when the call
        started, before any gate (its place in the write queue), else the one it resolves to
        now. The opens check against it, so a link swapped in after the question writes
        nothing (a ``prepare_arguments`` that changed the path: resolved now)."""
        return self._queue.reserved_path(_running_key(), path) or self._resolve(path)

    def _open_dir(self, path: str) -> tuple[int, str]:
        """A descriptor of the directory ``path`` and its real path relative to the root."""
        try:
            return open_dir_in_root(self._held, path)
        except PathEscapeError as exc:
            raise CodingToolError(f"{path}: refused: {exc.reason}") from exc
        except NotADirectoryError as exc:
            raise CodingToolError(f"{path}: not a directory") from exc
        except FileNotFoundError as exc:
            raise CodingToolError(f"{path}: no such directory") from exc
        except OSError as exc:  # permission denied, a loop the kernel saw first...
            raise CodingToolError(f"{path}: cannot be opened ({exc.strerror or exc})") from exc

    def _walk(
        self, top: int, real: str, tool: str, limits: _WalkLimits
    ) -> Generator[tuple[str, str, int], None, None]:
        """(path relative to the root, name, dir fd) of the regular files below the directory
        ``top`` (opened at ``real``; the walk closes it) that ``tool`` may see; symlinks are
        skipped, directories opened by descriptor. Ends early where ``limits`` say.

        The directory descriptor is valid until the next item (use it before moving on).
        """
        try:
            walk = walk_files(
                top,
                skip=_SKIP_DIRS,
                stop=limits.spent,
                max_depth=MAX_WALK_DEPTH,
                too_deep=lambda below: self._too_deep(tool, real, below, limits),
            )
            for below, name, dirfd in walk:
                if limits.spent():
                    return
                limits.files += 1
                rel = "/".join(p for p in (real, below, name) if p and p != ".")
                if not self._hidden(tool, rel):
                    yield rel, name, dirfd
        finally:
            os.close(top)

    def _too_deep(self, tool: str, real: str, below: str, limits: _WalkLimits) -> None:
        path = "/".join(p for p in (real, below) if p and p != ".")
        if not self._hidden(tool, path):  # a denied folder is not named, not even here
            limits.too_deep.append(path)

    def _list_dir_sync(self, args: dict[str, Any], cancelled: threading.Event | None = None) -> str:
        """list_dir: the entries of a directory (``/`` after directories)."""
        path = args.get("path", ".")
        limits = _WalkLimits("list_dir", self.max_walk_files, self.walk_timeout, cancelled)
        top, real = self._open_dir(path)
        try:
            entries = []
            try:
                with os.scandir(top) as it:
                    for entry in it:  # a folder of millions of entries: bounded like a walk
                        if limits.spent():
                            break
                        limits.files += 1
                        entries.append(entry)
            except OSError as exc:
                raise CodingToolError(f"{path}: cannot be listed ({exc.strerror})") from exc
            entries.sort(key=lambda e: e.name)
            lines = [
                _name(e.name) + ("/" if e.is_dir(follow_symlinks=False) else "")
                for e in entries
                if not self._hidden("list_dir", e.name if real == "." else f"{real}/{e.name}")
            ]
        finally:
            os.close(top)
        return (self._capped(lines, "entries") or "[empty directory]") + limits.note()

    def _glob_sync(self, args: dict[str, Any], cancelled: threading.Event | None = None) -> str:
        """glob: files whose path relative to the root matches ``pattern``."""
        matches = glob_matcher(
            args["pattern"], tool="glob", timeout=self.grep_timeout, cancelled=cancelled
        )
        limits = _WalkLimits("glob", self.max_walk_files, self.walk_timeout, cancelled)
        top, real = self._open_dir(args.get("path", "."))
        walked = self._walk(top, real, "glob", limits)
        hits = [_name(rel) for rel, _, _ in walked if matches(rel)]
        return (self._capped(hits, "files") or "[no files match]") + limits.note()

    def _grep_sync(self, args: dict[str, Any], cancelled: threading.Event | None = None) -> str:
        """grep: ``path:line:text`` for each line matching the regular expression."""
        search = LineSearch(
            args["pattern"],
            ignore_case=bool(args.get("ignore_case")),
            tool="grep",
            timeout=self.grep_timeout,
            cancelled=cancelled,
        )
        only = None
        if args.get("glob"):
            only = glob_matcher(args["glob"], tool="grep", clock=search.clock)
        limits = _WalkLimits("grep", self.max_walk_files, self.walk_timeout, cancelled)
        hits: list[str] = []
        large: list[str] = []
        binary: list[str] = []
        files = self._grep_files(args.get("path", "."), only, large, limits)
        try:
            for rel, data in files:
                if _binary(data):
                    # Its lines mean nothing to the model; that it matches does (as grep says).
                    if next(search.lines(data.decode("utf-8", "replace")), None) is not None:
                        binary.append(rel)
                    continue
                for n, line in search.lines(data.decode("utf-8", "replace")):
                    hits.append(f"{_name(rel)}:{n}:{line[:500]}")
                    if len(hits) > self.max_results:
                        break
                if len(hits) > self.max_results:
                    break
        finally:
            files.close()  # the open directory descriptors, now
        answer = self._capped(hits, "matches") or "[no matches]"
        # Else "[no matches]" would say a text is absent from files it was not shown from.
        if binary:
            answer += f"\n[note: binary files match (lines not shown): {_names(binary)}]"
        if large:
            answer += (
                f"\n[note: {len(large)} file(s) larger than {self.max_file_bytes} bytes not "
                f"searched: {_names(large)}]"
            )
        return answer + limits.note()

    def _grep_files(
        self,
        start: str,
        only: Callable[[str], bool] | None,
        large: list[str],
        limits: _WalkLimits,
    ) -> Generator[tuple[str, bytes], None, None]:
        """(path, bytes) of the files grep searches: ``start`` itself when it is a file, else
        the files below it. Opened once: whether ``start`` is a file or a directory is what
        the opened descriptor is (deciding by the name and opening it again would let a
        symlink swapped in between lead elsewhere)."""
        with _opening(start):
            fd, real, is_dir = open_entry_in_root(self._held, start)
        if not is_dir:
            with os.fdopen(fd, "rb") as f:
                if only is not None and not (only(start) or only(start.rsplit("/", 1)[-1])):
                    return
                yield start, self._read_fd(start, f, real, "grep")
            return
        walk = self._walk(fd, real, "grep", limits)
        try:
            for rel, name, dirfd in walk:
                if only is not None and not (only(rel) or only(rel.rsplit("/", 1)[-1])):
                    continue
                data = self._grep_bytes(rel, name, dirfd, large)
                if data is not None:
                    yield rel, data
        finally:
            walk.close()

    def _grep_bytes(self, rel: str, name: str, dirfd: int, large: list[str]) -> bytes | None:
        """A walked file's bytes, or None (unreadable, not a regular file, or too large: then
        its path goes to ``large``, to tell the model it was not searched)."""
        try:
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
            fd = os.open(name, flags, dir_fd=dirfd)
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                    return None
                self._refuse_linked(rel, f.fileno())
                data: bytes = f.read(self.max_file_bytes + 1)
                if len(data) > self.max_file_bytes:
                    large.append(rel)
                    return None
                return data
        except (OSError, CodingToolError):
            return None

    def _capped(self, lines: list[str], what: str) -> str:
        if len(lines) <= self.max_results:
            return "\n".join(lines)
        more = len(lines) - self.max_results
        shown = "\n".join(lines[: self.max_results])
        return f"{shown}\n[... {more}+ more {what} not shown; narrow the search]"

    # The file system work runs in a worker thread: a grep over a large tree must not stall
    # the event loop (and the other calls of the turn).

    async def read(self, args: dict[str, Any]) -> str:
        """read_file (see :meth:`_read_sync`)."""
        return await to_thread(self._read_sync, args)

    async def list_dir(self, args: dict[str, Any]) -> str:
        """list_dir (see :meth:`_list_dir_sync`)."""
        return await _stoppable(self._list_dir_sync, args)

    async def glob(self, args: dict[str, Any]) -> str:
        """glob (see :meth:`_glob_sync`)."""
        return await _stoppable(self._glob_sync, args)

    async def grep(self, args: dict[str, Any]) -> str:
        """grep (see :meth:`_grep_sync`)."""
        return await _stoppable(self._grep_sync, args)

    # -- the tools as the model sees them ------------------------------------------------------

    @property
    def tools(self) -> list[CodingTool]:
        """read_file, write_file, edit_file, list_dir, glob, grep (new objects, shared state)."""
        s = {"type": "string"}
        path = {"type": "string", "description": "a path relative to the workspace root"}
        where = {"type": "string", "description": "a directory relative to the root ('.')"}
        tools = [
            CodingTool(
                "read_file",
                "Read a text file (numbered lines). Read a file before editing it.",
                _schema(
                    {
                        "path": path,
                        "offset": {"type": "integer", "description": "first line (1-based)"},
                        "limit": {"type": "integer", "description": "how many lines"},
                    },
                    ["path"],
                ),
                self.read,
                mutating=False,
            ),
            CodingTool(
                "write_file",
                "Create a file, or replace a file you have read, with the given content.",
                _schema({"path": path, "content": s}, ["path", "content"]),
                self.write,
                mutating=True,
            ),
            CodingTool(
                "edit_file",
                "Replace old_string with new_string in a file you have read. old_string must "
                "match exactly (whitespace included) and be unique unless replace_all is set.",
                _schema(
                    {
                        "path": path,
                        "old_string": s,
                        "new_string": s,
                        "replace_all": {"type": "boolean"},
                    },
                    ["path", "old_string", "new_string"],
                ),
                self.edit,
                mutating=True,
            ),
            CodingTool(
                "list_dir",
                "List a directory of the workspace.",
                _schema({"path": where}, []),
                self.list_dir,
                mutating=False,
            ),
            CodingTool(
                "glob",
                "Find files by glob pattern relative to the root, e.g. '**/*.py'.",
                _schema({"pattern": s, "path": where}, ["pattern"]),
                self.glob,
                mutating=False,
            ),
            CodingTool(
                "grep",
                "Search file contents with a regular expression; answers path:line:text.",
                _schema(
                    {
                        "pattern": s,
                        "path": {"type": "string", "description": "a file or directory"},
                        "glob": {"type": "string", "description": "only files matching this"},
                        "ignore_case": {"type": "boolean"},
                    },
                    ["pattern"],
                ),
                self.grep,
                mutating=False,
            ),
        ]
        for tool in tools:
            tool.check = self.check_path
            if tool.mutating:
                tool.check = self._check_file_path
                tool.reserve = self.reserve
                tool.planned = self.planned
            tool.rule_path = self.rule_path
            tool.add_path_rule = self.add_path_rule
            tool.root = self._workspace
        return tools

    def check_path(self, args: dict[str, Any]) -> None:
        """Refuse a call whose ``path`` no tool here would open (outside the root, ``..``, a NUL
        byte...): an approval policy runs this before asking, so nobody is asked about a
        call that cannot run. The tools check again when they open the path.

        Raises:
            CodingToolError: the path is refused (the message says why).
        """
        self._workspace.check()
        path = args.get("path")
        if not isinstance(path, str) or all(
            p in ("", ".") for p in path.replace("\\", "/").split("/")
        ):
            return  # the root (the walks take it; a write says why not) or no path at all
        try:
            resolve_in_root(self._held, path)
        except PathEscapeError as exc:
            raise CodingToolError(f"path {path!r}: {exc.reason}") from exc
        except OSError:
            return  # a link changing while it was read: the tool's open decides

    def _check_file_path(self, args: dict[str, Any]) -> None:
        """:meth:`check_path`, and a path ending in a slash refused: it names a folder, and a
        write to it made a file of the folder's name."""
        self.check_path(args)
        path = args.get("path")
        if isinstance(path, str):
            _refuse_folder_path(path)

    def rule_path(self, path: str) -> str:
        """The path a rule is checked on: ``path`` resolved (``.//a``, ``./a`` and a symlink to
        ``a`` all give ``a``), relative to the root, ``/``-separated (``.`` for the root).

        For the running call that reserved its place in a write queue (an approval gate asks
        in the call's task), the path resolved then: resolved once, so the file the question
        names, the file the rules were checked on and the file the write must reach are one
        (resolving again would let a link swapped in meanwhile make them two)."""
        reserved = self._queue.reserved_path(_running_key(), path)
        if reserved is not None:
            return reserved.relative_to(self._base).as_posix() or "."
        return relative_in_root(self._held, path)

    def reserve(self, call: ToolCall) -> Callable[[], None] | None:
        """Take ``call``'s place in its file's write queue now (an approval gate calls this as
        it sees the call, in call order); returns the function that gives the place up, or None
        when the call names no usable path (its body will refuse it)."""
        path = call.arguments.get("path")
        if not isinstance(path, str):
            return None
        try:
            resolved = resolve_in_root(self._held, path)
        except (PathEscapeError, OSError):  # refused, or a link changed meanwhile: the body says
            return None
        key = call_key(call)
        self._queue.reserve(resolved, key, source=path)
        # On the event loop: the table's own lock, never the one a write holds across I/O.
        with self._table_lock:
            self._planned.setdefault(key, (resolved, call.name, dict(call.arguments)))

        def release() -> None:
            with self._table_lock:
                self._planned.pop(key, None)
            self._queue.release(key)

        task = asyncio.current_task()
        if task is not None:  # as the queue's place: gone with the task that took it
            task.add_done_callback(lambda _: release())
        return release


def _refuse_folder_path(path: str) -> None:
    if path.rstrip().endswith(("/", "\\")) and path.strip(" ./\\"):
        raise CodingToolError(
            f"{path}: the path ends with a slash, so it names a folder; give the file's name "
            "(a file's folders are made as it is written)"
        )


def _running_key() -> str:
    """The running call's queue key ("" outside a call: the body takes a new place)."""
    from goagent_py.tool_context import current_tool_context

    ctx = current_tool_context()
    return call_key(ctx.call) if ctx is not None else ""


async def _finish_in_thread(body: Callable[[], str]) -> str:
    """Run ``body`` in a worker thread; when the call is cancelled (the run aborted), the write
    still finishes before the file's queue moves on, so two writes never overlap."""
    future = asyncio.ensure_future(to_thread(body))
    try:
        return await asyncio.shield(future)
    except asyncio.CancelledError:
        with contextlib.suppress(BaseException):
            await future
        raise


async def _stoppable(
    body: Callable[[dict[str, Any], threading.Event], str], args: dict[str, Any]
) -> str:
    """Run a walking tool's ``body`` in a worker thread; when the call is cancelled (the run
    aborted, the tool timed out) the thread is told to stop, instead of walking on unseen."""
    cancelled = threading.Event()
    try:
        return await to_thread(body, args, cancelled)
    except asyncio.CancelledError:
        cancelled.set()
        raise


class _WalkLimits:
    """What one grep or glob may walk: files visited, seconds spent, and whether its call was
    cancelled (then the walk raises: nobody reads its answer)."""

    def __init__(
        self, tool: str, max_files: int, seconds: float, cancelled: threading.Event | None
    ) -> None:
        self.tool = tool
        self.max_files = max_files
        self.seconds = seconds
        self.deadline = time.monotonic() + seconds
        self.cancelled = cancelled
        self.files = 0
        self.why = ""
        self.too_deep: list[str] = []
        """The folders whose subfolders were not entered (:data:`MAX_WALK_DEPTH`)."""

    def spent(self) -> bool:
        """Whether the walk must end now (``why`` says what ran out)."""
        if self.cancelled is not None and self.cancelled.is_set():
            raise CodingToolError(f"{self.tool} was cancelled")
        if self.files >= self.max_files:
            what = "entries" if self.tool == "list_dir" else "files"
            self.why = f"after {self.max_files} {what}"
        elif time.monotonic() > self.deadline:
            self.why = f"after {self.seconds:g} seconds"
        return bool(self.why)

    def note(self) -> str:
        """The note an answer ends with when the walk ended early or left folders out ("" when
        it did neither)."""
        deep = ""
        if self.too_deep:
            deep = (
                f"\n[note: folders nested deeper than {MAX_WALK_DEPTH} levels were not searched "
                f"(below {_names(self.too_deep, 1)})]"
            )
        if not self.why:
            return deep
        if self.tool == "list_dir":
            return f"\n[note: the listing stopped {self.why}, before the whole folder was seen]"
        return (
            f"\n[note: the search stopped {self.why}, before the whole tree was seen: narrow "
            f"it with path or glob]{deep}"
        )


@contextlib.contextmanager
def _opening(path: str, *, failing: str = "cannot be opened") -> Iterator[None]:
    """Open errors as the model reads them: refused, no such file, a directory..., and
    ``failing`` for any other OSError (a name too long, permission denied, a loop)."""
    try:
        yield
    except PathEscapeError as exc:
        raise CodingToolError(f"{path}: refused: {exc.reason}") from exc
    except FileNotFoundError as exc:
        raise CodingToolError(f"{path}: no such file") from exc
    except IsADirectoryError as exc:
        raise CodingToolError(f"{path}: is a directory") from exc
    except NotADirectoryError as exc:
        raise CodingToolError(f"{path}: a part of the path is not a directory") from exc
    except OSError as exc:  # a name too long, permission denied, a loop...
        raise CodingToolError(f"{path}: {failing} ({exc.strerror or exc})") from exc


_SNIFF = 8192


def _names(paths: list[str], shown: int = 5) -> str:
    more = f" and {len(paths) - shown} more" if len(paths) > shown else ""
    return ", ".join(_name(p) for p in paths[:shown]) + more


def _name(path: str) -> str:
    """A file's name as a line of an answer shows it: control characters escaped (``\\n``,
    ``\\e``). A repository may hold any byte in a name but ``/`` and NUL: listed raw, a name
    with a newline read as two entries (``a.txt\\nsecrets.txt``), and one with an escape
    sequence reached the answer (and the screen) as it was."""
    return printable(valid_text(path))


def _binary(data: bytes) -> bool:
    """Whether a file's bytes are binary: a NUL byte near the start (as git and grep tell)."""
    return b"\x00" in data[:_SNIFF]


def _schema(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required}


def file_tools(
    root: str | os.PathLike[str],
    *,
    max_read_chars: int = 50_000,
    max_file_bytes: int = 5_000_000,
    max_results: int = 200,
    require_read: bool = True,
) -> list[CodingTool]:
    """The file tools of a workspace: read_file, write_file, edit_file, list_dir, glob, grep.

    Args:
        root: the workspace directory; no tool reads or writes outside it.
        max_read_chars: the most characters one read returns.
        max_file_bytes: larger files are not edited or searched (a read shows their start).
        max_results: the most lines a list, glob or grep answer holds (the rest is counted).
        require_read: an edit, or a write replacing an existing file, needs a read first.

    Returns:
        Six tools sharing one :class:`FileToolkit` (what was read, the per-path write queue).
        ``tool.mutating`` tells write_file and edit_file from the read-only ones.

    Raises:
        ConfigurationError: ``root`` is not a directory, or a limit is not a positive int.
    """
    return FileToolkit(
        root,
        max_read_chars=max_read_chars,
        max_file_bytes=max_file_bytes,
        max_results=max_results,
        require_read=require_read,
    ).tools
