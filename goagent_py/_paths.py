"""Paths a model or user names, held inside a root directory (private; for the file tools).

Two checks, for two uses:

- :func:`resolve_in_root` answers "which file does this name mean?" before anything is done:
  it refuses NUL bytes, absolute paths (POSIX, drive letters, UNC), any ``..`` component, and a
  path whose resolution (symlinks followed) leaves the root. The comparison is by path
  components, so ``root_evil`` beside ``root`` is outside ``root``.
- :func:`open_in_root` is what must be used to actually open: it makes the same refusals at
  OPEN time. Starting from a descriptor of the root it opens one component at a time with
  ``O_NOFOLLOW`` relative to the directory descriptor before it (``os.open(dir_fd=...)``), so a
  symlink swapped in between a check and the open cannot lead outside. A symlink met on the way
  is read (``readlink`` at its directory) and followed by hand when it stays inside the root;
  an absolute target is accepted only when it points into the root. Only regular files are
  opened (a FIFO or a device is refused without blocking).

Every refusal raises :class:`PathEscapeError`, a :class:`~goagent_py.errors.ConfigurationError`
naming the path and the reason. Platforms without ``dir_fd`` support for ``os.open`` (Windows)
get the check before the open and a second one after it, comparing the opened file with the
resolved path.
"""

from __future__ import annotations

import contextlib
import errno
import os
import posixpath
import stat
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import IO, Any

from goagent_py.errors import ConfigurationError, InvalidInputError

__all__ = [
    "MAX_PATH_DEPTH",
    "HeldRoot",
    "PathEscapeError",
    "open_dir_in_root",
    "open_entry_in_root",
    "open_file_in_root",
    "open_in_root",
    "relative_in_root",
    "resolve_in_root",
    "walk_files",
]

StrPath = str | os.PathLike[str]

_DIR_FLAGS = (
    os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
)

_MAX_SYMLINKS = 40  # as Linux's own limit: a loop ends in a refusal, not a hang
MAX_PATH_DEPTH = 256
"""The most components a path may have (symlinks followed): a path is opened one component at
a time and holds one descriptor per level, so a path thousands of folders deep (from a model,
or a hostile repository's links) exhausted the process's descriptors, failing every other open
meanwhile, and ``write_file`` made the folders up to where it failed."""


class PathEscapeError(InvalidInputError):
    """A path was refused: it is not, or might not stay, inside the root (a value from data:
    a tool that raises it tells the model, which can pick another path).

    Attributes:
        root: the root directory.
        path: the path as given.
        reason: why it was refused.
    """

    def __init__(self, root: str, path: str, reason: str) -> None:
        self.root = root
        self.path = path
        self.reason = reason
        super().__init__(f"path {path!r} refused: {reason} (root: {root})")

    def __reduce__(self) -> Any:
        return self._reduce_with(self.root, self.path, self.reason)


class HeldRoot(os.PathLike[str]):
    """A root directory opened once: every open under it starts from this descriptor.

    Given as the ``root`` of the functions here, the walk of each open starts from the folder
    opened when this was made, never from the root's name again: a root renamed and replaced
    by a symlink (or another folder) between a caller's check and an open does not lead the
    open elsewhere. Name-based answers (:func:`resolve_in_root`, :func:`relative_in_root`) use
    :attr:`path`, so a swapped name resolves outside and is refused there.

    Args:
        root: the directory (resolved here; opened without following a link).

    Raises:
        ConfigurationError: ``root`` is not an existing directory.
    """

    def __init__(self, root: StrPath) -> None:
        self.path = _root_dir(root)
        try:
            self._fd = os.open(self.path, _DIR_FLAGS)
        except OSError as exc:
            raise ConfigurationError(f"root {self.path} cannot be opened: {exc}") from exc
        weakref.finalize(self, os.close, self._fd)

    def __fspath__(self) -> str:
        return str(self.path)

    def __repr__(self) -> str:
        return f"HeldRoot({str(self.path)!r})"

    def identity(self) -> tuple[int, int]:
        """The held folder's ``(st_dev, st_ino)``, whatever its name leads to now."""
        info = os.fstat(self._fd)
        return (info.st_dev, info.st_ino)

    def opened(self) -> int:
        """A new descriptor of the held folder (the caller closes it)."""
        return os.dup(self._fd)


def _root_dir(root: StrPath) -> Path:
    if isinstance(root, HeldRoot):
        return root.path
    try:
        real = Path(os.path.realpath(os.fspath(root)))
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"root must be a directory path, got {root!r}") from exc
    if not real.is_dir():
        raise ConfigurationError(f"root {os.fspath(root)!r} is not an existing directory")
    return real


def _parts(root: Path, user_path: StrPath, *, allow_root: bool = False) -> list[str]:
    """The components of ``user_path`` after the lexical refusals (no file system access);
    ``allow_root`` lets ``.``, ``./`` or ``.//`` name the root itself (``[]``)."""
    try:
        text = os.fspath(user_path)
    except TypeError as exc:
        raise ConfigurationError(f"path must be a str or os.PathLike, got {user_path!r}") from exc
    if not isinstance(text, str):
        raise ConfigurationError(f"path must be text, got {type(text).__name__}")
    shown = str(root)
    if "\x00" in text:
        raise PathEscapeError(shown, text, "it contains a NUL byte")
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        raise PathEscapeError(
            shown, text, "it holds a lone surrogate, which no file name can hold"
        ) from None
    if not text.strip():
        if allow_root:
            return []
        raise PathEscapeError(shown, text, "it is empty")
    windows = PureWindowsPath(text)
    if PurePosixPath(text).is_absolute() or windows.drive or windows.root:
        raise PathEscapeError(
            shown, text, "absolute paths are not allowed; give one relative to the root"
        )
    # Both separators count: a "..\\" that is harmless here is an escape on Windows.
    parts = [p for p in text.replace("\\", "/").split("/") if p not in ("", ".")]
    if ".." in parts:
        raise PathEscapeError(shown, text, "'..' components are not allowed")
    if not parts and not allow_root:
        raise PathEscapeError(shown, text, "it names the root itself, not a file in it")
    if len(parts) > MAX_PATH_DEPTH:
        raise PathEscapeError(shown, text, _too_deep())
    return parts


def _too_deep() -> str:
    return f"it is more than {MAX_PATH_DEPTH} folders deep"


def resolve_in_root(root: StrPath, user_path: StrPath) -> Path:
    """The absolute, resolved path ``user_path`` names inside ``root``.

    Args:
        root: the directory every path must stay in (must exist).
        user_path: a path relative to ``root``, as a model or user gave it.

    Returns:
        The resolved path (symlinks followed), inside the resolved root. It need not exist.

    Raises:
        PathEscapeError: a NUL byte, an absolute path, a ``..`` component, or a path that
            resolves outside the root (a symlink pointing out, for instance).
        ConfigurationError: ``root`` is not an existing directory.

    A path checked here can still be swapped for a symlink before it is opened: open it with
    :func:`open_in_root`, which checks again at open time.
    """
    base = _root_dir(root)
    parts = _parts(base, user_path)
    resolved = Path(os.path.realpath(base.joinpath(*parts)))
    if not resolved.is_relative_to(base):
        raise PathEscapeError(
            str(base), os.fspath(user_path), f"it resolves to {resolved}, outside the root"
        )
    return resolved


def relative_in_root(root: StrPath, user_path: StrPath) -> str:
    """The path a name rule is checked on: ``user_path`` resolved inside ``root``.

    Symlinks are followed, ``.``, ``//`` and ``\\`` are normalised away, and the result is
    relative to the root, ``/``-separated (``"."`` for the root itself): ``.//secrets/k``,
    ``./secrets/k`` and a link ``alias -> secrets`` as ``alias/k`` all give ``secrets/k``.
    A path that is refused (outside, absolute, ``..``) comes back normalised as written; a
    tool refuses it anyway.
    """
    base = _root_dir(root)
    text = os.fspath(user_path)
    lexical = posixpath.normpath(str(text).replace("\\", "/"))
    try:
        parts = _parts(base, text, allow_root=True)
    except PathEscapeError:
        return lexical
    try:
        resolved = Path(os.path.realpath(base.joinpath(*parts)))
    except OSError:  # a link swapped while it was read: the names as given (opens check again)
        return "/".join(parts)
    if not resolved.is_relative_to(base):
        return lexical
    return resolved.relative_to(base).as_posix() or "."


_MODES: dict[str, int] = {
    "r": os.O_RDONLY,
    "w": os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
    "a": os.O_WRONLY | os.O_CREAT | os.O_APPEND,
    "x": os.O_WRONLY | os.O_CREAT | os.O_EXCL,
}


def _flags(mode: str) -> int:
    base = mode.replace("b", "").replace("t", "")
    plus = base.endswith("+")
    kind = base.removesuffix("+")
    if kind not in _MODES or len(mode) - len(base) > 1 or ("b" in mode and "t" in mode):
        raise ConfigurationError(
            f"mode must be one of r, w, a, x with optional + and b/t (like open()), got {mode!r}"
        )
    flags = _MODES[kind]
    if plus:
        flags = (flags & ~(os.O_RDONLY | os.O_WRONLY)) | os.O_RDWR
    return flags | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)


def open_in_root(root: StrPath, user_path: StrPath, mode: str = "r", **open_kwargs: Any) -> IO[Any]:
    """Open ``user_path`` inside ``root``, checked at open time (see the module docstring).

    Args:
        root: the directory every path must stay in (must exist).
        user_path: a path relative to ``root``, as a model or user gave it.
        mode: as for :func:`open` (``"r"``, ``"rb"``, ``"w"``, ``"a+"``, ``"x"``...).
        **open_kwargs: passed to :func:`os.fdopen` (``encoding``, ``errors``, ``newline``...).

    Returns:
        The open file object.

    Raises:
        PathEscapeError: the path is refused, or at the moment of opening it led outside the
            root or to something other than a regular file.
        ConfigurationError: ``root`` is not an existing directory, or ``mode`` is not valid.
        OSError: the file system said no (e.g. ``FileNotFoundError``).
    """
    base = _root_dir(root)
    parts = _parts(base, user_path)
    flags = _flags(mode)
    shown = os.fspath(user_path)
    if os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW"):
        fd, _ = _open_walking(base, parts, flags, shown, held=_held(root))
    else:  # pragma: no cover - Windows
        fd = _open_checked_twice(base, user_path, flags, shown)
    try:
        return os.fdopen(fd, mode, **open_kwargs)
    except BaseException:
        os.close(fd)
        raise


def open_file_in_root(
    root: StrPath, user_path: StrPath, mode: str = "r", **open_kwargs: Any
) -> tuple[IO[Any], str]:
    """:func:`open_in_root`, and the path relative to the root of the file it opened.

    The path is the one the open walked (symlinks resolved, ``/``-separated): a rule on names
    checked on it holds whatever was swapped in after an earlier check.
    """
    base = _root_dir(root)
    parts = _parts(base, user_path)
    flags = _flags(mode)
    shown = os.fspath(user_path)
    if os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW"):
        fd, names = _open_walking(base, parts, flags, shown, held=_held(root))
        real = "/".join(names)
    else:  # pragma: no cover - Windows
        fd = _open_checked_twice(base, user_path, flags, shown)
        real = resolve_in_root(base, user_path).relative_to(base).as_posix()
    try:
        return os.fdopen(fd, mode, **open_kwargs), real
    except BaseException:
        os.close(fd)
        raise


def open_dir_in_root(root: StrPath, user_path: StrPath, *, create: bool = False) -> tuple[int, str]:
    """A descriptor of the directory ``user_path`` names in ``root``, opened at open time.

    Args:
        root: the directory every path must stay in (must exist).
        user_path: a directory relative to ``root``; ``""`` or ``"."`` is the root itself.
        create: make the missing directories on the way (as ``os.makedirs``), each one made and
            opened in the descriptor of the one before it, so none is ever made outside.

    Returns:
        The descriptor (the caller closes it) and the directory's path relative to the root,
        symlinks resolved (``"."`` for the root).

    Raises:
        PathEscapeError: the path is refused or led outside the root when it was opened.
        NotADirectoryError, FileNotFoundError: what the file system said.
    """
    base = _root_dir(root)
    text = os.fspath(user_path)
    parts = _parts(base, text, allow_root=True)
    if not (os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW")):  # pragma: no cover
        raise PathEscapeError(str(base), str(text), "directory walks need POSIX dir_fd support")
    fd, names = _open_walking(
        base, parts, 0, str(text), directory=True, create=create, held=_held(root)
    )
    return fd, "/".join(names) or "."


def open_entry_in_root(root: StrPath, user_path: StrPath) -> tuple[int, str, bool]:
    """A descriptor of the regular file or the directory ``user_path`` names, opened once.

    For a caller that takes either (grep's ``path``): deciding which it is from the name and
    then opening it by the name again leaves a gap in which a symlink swapped in leads
    elsewhere. Here the one open decides: what the descriptor is (``fstat``) is what it is.

    Args:
        root: the directory every path must stay in (must exist).
        user_path: a path relative to ``root``; ``""`` or ``"."`` is the root itself.

    Returns:
        The descriptor (the caller closes it), the path relative to the root that was opened
        (symlinks resolved, ``"."`` for the root) and whether it is a directory.

    Raises:
        PathEscapeError: the path is refused, led outside the root when it was opened, or names
            something other than a regular file or a directory (a FIFO, a device).
        OSError: what the file system said (e.g. ``FileNotFoundError``).
    """
    base = _root_dir(root)
    text = os.fspath(user_path)
    parts = _parts(base, text, allow_root=True)
    if not (os.open in os.supports_dir_fd and hasattr(os, "O_NOFOLLOW")):  # pragma: no cover
        raise PathEscapeError(str(base), str(text), "opening needs POSIX dir_fd support")
    if not parts:
        fd, _ = _open_walking(base, parts, 0, str(text), directory=True, held=_held(root))
        return fd, ".", True
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)
    fd, names = _open_walking(base, parts, flags, str(text), either=True, held=_held(root))
    try:
        is_dir = stat.S_ISDIR(os.fstat(fd).st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd, "/".join(names) or ".", is_dir


def walk_files(
    top_fd: int,
    *,
    skip: frozenset[str] = frozenset(),
    stop: Callable[[], bool] | None = None,
    max_depth: int | None = None,
    too_deep: Callable[[str], None] | None = None,
) -> Iterator[tuple[str, str, int]]:
    """``(directory, name, directory descriptor)`` of each regular file below ``top_fd``.

    ``directory`` is relative to ``top_fd`` (``""`` for its own files). Directories come
    sorted, depth first, a directory's files before its subdirectories; names in ``skip`` are
    not entered; ``stop()`` is asked before each directory is read (True ends the walk: a tree
    of empty directories yields nothing a caller could stop at). Every subdirectory is opened
    in its parent's descriptor with ``O_NOFOLLOW``, so one swapped for a symlink while the walk
    runs is skipped, never entered. The descriptor is valid until the next item: open the file
    in it (``dir_fd=``) before moving on.

    The walk holds one descriptor per level it is in: ``max_depth`` bounds the levels entered
    (a chain of folders thousands deep would exhaust the process's descriptors, failing every
    other open meanwhile); ``too_deep(directory)`` is told of each folder whose subfolders were
    not entered for it.
    """
    frames: list[tuple[int, str, list[str]]] = []  # (fd, relative dir, subdirs still to visit)
    fd, rel = top_fd, ""
    try:
        while True:
            if stop is not None and stop():
                return
            with os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.is_file(follow_symlinks=False):
                        yield rel, entry.name, fd
            subdirs = []
            for entry in entries:
                with contextlib.suppress(OSError):
                    if entry.name not in skip and entry.is_dir(follow_symlinks=False):
                        subdirs.append(entry.name)
            if subdirs and max_depth is not None and len(frames) >= max_depth:
                subdirs = []
                if too_deep is not None:
                    too_deep(rel)
            frames.append((fd, rel, subdirs[::-1]))
            fd = -1
            while frames and fd < 0:
                parent, parent_rel, todo = frames[-1]
                if not todo:
                    frames.pop()
                    if parent != top_fd:
                        os.close(parent)
                    continue
                name = todo.pop()
                try:
                    fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
                except OSError:  # gone, or swapped for a symlink: not entered
                    continue
                rel = f"{parent_rel}/{name}" if parent_rel else name
            if fd < 0:
                return
    finally:
        for parent, _, _ in frames:
            if parent != top_fd:
                os.close(parent)
        if fd >= 0 and fd != top_fd:
            os.close(fd)


def _open_walking(
    base: Path,
    parts: list[str],
    flags: int,
    shown: str,
    *,
    directory: bool = False,
    create: bool = False,
    either: bool = False,
    held: HeldRoot | None = None,
) -> tuple[int, list[str]]:
    """Open ``parts`` below ``base`` one component at a time, symlinks followed by hand.

    Returns the descriptor and the components actually opened (the path relative to the root
    that the descriptor is, symlinks resolved): a name rule can be checked on it race-free.
    ``directory`` opens a directory (``parts`` may be empty: the root); ``create`` makes the
    missing directories on the way, each one in the directory descriptor before it;
    ``either`` takes a directory at the last step as well as a regular file; ``held``: the
    walk starts from its descriptor rather than from ``base``'s name.
    """

    def refuse(why: str) -> PathEscapeError:
        return PathEscapeError(str(base), shown, why)

    stack: list[int] = [_start(base, held)]
    names: list[str] = []  # the real components of stack[1:]
    pending = list(reversed(parts))  # components still to open, next one last
    links = 0
    try:
        while pending:
            name = pending.pop()
            if name in ("", "."):
                continue
            if name == "..":  # only from a symlink's target: the user's own path has none
                if len(stack) == 1:
                    raise refuse("a symlink on the way leads out of the root")
                os.close(stack.pop())
                names.pop()
                continue
            file_step = not pending and not directory
            try:
                fd = _open_step(name, stack[-1], flags if file_step else None, create)
            except OSError as exc:
                if exc.errno not in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise
                target = _symlink_target(name, stack[-1])
                if target is None:
                    if exc.errno == errno.ENOTDIR:
                        raise
                    raise refuse(f"{name!r} cannot be opened safely") from exc
                links += 1
                if links > _MAX_SYMLINKS:
                    raise refuse("too many symlinks (a loop?)") from exc
                pending.extend(reversed(_link_parts(base, target, refuse)))
                if target.startswith("/"):  # absolute but inside the root: restart from it
                    while len(stack) > 1:
                        os.close(stack.pop())
                    names.clear()
                continue
            names.append(name)
            if file_step:
                return _regular_file(fd, refuse, directory_too=either), names
            if len(stack) >= MAX_PATH_DEPTH:  # links led this deep: one descriptor per level
                os.close(fd)
                raise refuse(_too_deep())
            stack.append(fd)
        if not directory:
            raise refuse("it names the root itself, not a file in it")
        return stack.pop(), names
    finally:
        for fd in stack:
            os.close(fd)


def _start(base: Path, held: HeldRoot | None) -> int:
    """The descriptor a walk starts from: the held root's, else the root opened by name."""
    if held is not None:
        return held.opened()
    return os.open(base, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))


def _held(root: StrPath) -> HeldRoot | None:
    return root if isinstance(root, HeldRoot) else None


def _open_step(name: str, dir_fd: int, file_flags: int | None, create: bool) -> int:
    """One component opened in ``dir_fd`` without following a symlink: the file (with
    ``file_flags``) or a directory (made first when missing and ``create``)."""
    if file_flags is not None:
        return os.open(name, file_flags | os.O_NOFOLLOW | os.O_NONBLOCK, 0o666, dir_fd=dir_fd)
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise
    with contextlib.suppress(FileExistsError):  # made meanwhile by someone else: open it
        os.mkdir(name, 0o777, dir_fd=dir_fd)
    return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)


def _symlink_target(name: str, dir_fd: int) -> str | None:
    try:
        return os.readlink(name, dir_fd=dir_fd)
    except OSError:
        return None  # not a symlink after all (or gone): the caller refuses


def _link_parts(base: Path, target: str, refuse: Callable[[str], PathEscapeError]) -> list[str]:
    if "\x00" in target:
        raise refuse("a symlink on the way has a NUL byte in its target")
    if target.startswith("/"):
        real = PurePosixPath(target)
        if not real.is_relative_to(base):
            raise refuse(f"a symlink on the way points to {target}, outside the root")
        return list(real.relative_to(base).parts)
    return [p for p in target.split("/") if p not in ("", ".")]


def _regular_file(
    fd: int, refuse: Callable[[str], PathEscapeError], *, directory_too: bool = False
) -> int:
    try:
        info = os.fstat(fd)
        if directory_too and stat.S_ISDIR(info.st_mode):
            return fd
        if not stat.S_ISREG(info.st_mode):
            raise refuse("it is not a regular file")
        os.set_blocking(fd, True)  # opened non-blocking only so that a FIFO could not hang us
    except BaseException:
        os.close(fd)
        raise
    return fd


def _open_checked_twice(
    base: Path, user_path: StrPath, flags: int, shown: str
) -> int:  # pragma: no cover
    resolved = resolve_in_root(base, user_path)
    fd = os.open(resolved, flags, 0o666)
    try:
        again = resolve_in_root(base, user_path)
        if not os.path.samestat(os.fstat(fd), os.stat(again)):
            raise PathEscapeError(str(base), shown, "it changed while being opened")
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise PathEscapeError(str(base), shown, "it is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd
