"""One run per stored conversation, whoever opens it: the hold a run keeps on its record.

A :class:`~goagent_py.Session` refuses a second prompt while it runs, but two sessions over
one stored conversation (two ``SQLiteStorage(path, session_id="t")``, in one process or two)
each appended their turns to the record, interleaved. So a run holds its conversation, where
the record is, for its whole duration (docs/sessions.md "One run at a time"):

- in this process, a registry of the conversations that runs hold (two storages on one file
  share no object, only the key);
- across processes, a POSIX byte-range lock (``fcntl.lockf``) on a lock file beside the
  record, one byte per conversation at an offset from a hash of its key, as the served app
  does for its threads: the kernel releases it when the process dies, however it dies.

A storage offers its hold as ``hold_run()`` (an async context manager raising
:class:`~goagent_py.errors.SessionBusyError`); this module has the shared parts.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import threading
from collections.abc import Hashable, Iterator
from typing import ClassVar

from goagent_py.errors import SessionBusyError

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: the in-process registry only
    fcntl = None  # type: ignore[assignment]

__all__ = ["ByteLocks", "busy_error", "held_in_process", "lock_offset"]

_SLOTS = 1 << 62  # offsets in the lock file (a lock takes no space: the file stays empty)
# struct flock on Linux (x86-64, aarch64): short type, short whence, off_t start, off_t len,
# pid_t pid (padded).
_FLOCK = "hhqqi4x"

_registry_lock = threading.Lock()
_held: set[Hashable] = set()


def _forked() -> None:
    """A forked child holds none of its parent's locks (POSIX record locks are not inherited),
    so none of its runs either."""
    global _registry_lock
    _registry_lock = threading.Lock()
    _held.clear()


os.register_at_fork(after_in_child=_forked)


@contextlib.contextmanager
def held_in_process(key: Hashable, busy: SessionBusyError) -> Iterator[None]:
    """Hold ``key`` for this process's run, or raise ``busy`` when another run here holds it."""
    with _registry_lock:
        if key in _held:
            raise busy
        _held.add(key)
    try:
        yield
    finally:
        with _registry_lock:
            _held.discard(key)


def lock_offset(*parts: str) -> int:
    """The byte of a lock file that stands for the conversation named by ``parts``."""
    text = "\x1f".join(f"{len(p)}:{p}" for p in parts)
    digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big") % _SLOTS


class ByteLocks:
    """Exclusive byte-range locks on one lock file, across processes (the stored
    conversations' run holds, through :meth:`at`, and the served app's thread ownership,
    docs/serve.md, on an instance of its own).

    One descriptor per file for the process's life: closing any descriptor of a file lets go
    of every lock the process holds on it (POSIX record locks). Locks are per process: callers
    keep their own account of what this process holds (:func:`held_in_process`).
    """

    _open: ClassVar[dict[str, ByteLocks]] = {}
    _open_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    @classmethod
    def at(cls, path: str) -> ByteLocks | None:
        """The process's locks on the file at ``path`` (created if missing); None where the
        system has no byte-range locks (Windows).

        Raises:
            OSError: the file cannot be created or opened.
        """
        if fcntl is None:  # pragma: no cover - Windows
            return None
        key = os.path.realpath(path)
        with cls._open_lock:
            locks = cls._open.get(key)
            if locks is None:
                locks = cls._open[key] = cls(key)
            return locks

    @property
    def fd(self) -> int:
        """The descriptor the locks are taken on."""
        return self._fd

    def close(self) -> None:
        """Close the descriptor, letting go of every lock the process holds on the file (for
        an owner of its own instance, such as the served app's cluster, not :meth:`at`'s)."""
        os.close(self._fd)

    def take(self, at: int) -> int | None:
        """Lock byte ``at``: None when taken, else the pid of the process that holds it (-1
        when it cannot be told)."""
        try:
            fcntl.lockf(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, at)
        except OSError:
            return self.holder(at) or -1
        return None

    def release(self, at: int) -> None:
        """Unlock byte ``at``."""
        fcntl.lockf(self._fd, fcntl.LOCK_UN, 1, at)

    def holder(self, at: int) -> int | None:
        """The pid of another process that holds byte ``at``, or None."""
        asked = struct.pack(_FLOCK, fcntl.F_WRLCK, os.SEEK_SET, at, 1, 0)
        try:
            got = fcntl.fcntl(self._fd, fcntl.F_GETLK, asked)
        except OSError:
            return None
        kind, _, _, _, pid = struct.unpack(_FLOCK, got)
        return None if kind == fcntl.F_UNLCK or pid == os.getpid() else pid


def busy_error(what: str, session_id: str, holder: str = "") -> SessionBusyError:
    """The refusal of a run on a conversation another run holds: what is busy, what to do."""
    by = f" ({holder})" if holder else ""
    return SessionBusyError(
        f"{what} is busy: another run (a Session's or an agent's) is going on in it{by}; "
        "wait for that run to end (or abort it there), then prompt again, or use another "
        "session_id",
        session_id=session_id,
        holder=holder,
    )
