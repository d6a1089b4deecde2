"""One ``goagent-py chat`` per conversation: a lock held while a chat has it open.

Two chats on one ``--db`` and ``--session`` each appended their turns to the one stored
conversation, interleaved (user, user, assistant, assistant), and both then read a jumble. A
chat therefore holds an exclusive lock on its conversation from start to exit: a lock file per
conversation beside the database (``chat.db-locks/``), taken with ``flock``, which the system
drops when the process ends however it ends, so a killed chat leaves nothing to clean up. A
second chat on the same conversation is refused at start with what to do; other conversations
of the same file are not affected. Where ``flock`` is not available (Windows, some network
file systems) the chat goes on without the lock.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
from pathlib import Path

from goagent_py.errors import MemoryStoreError

__all__ = ["ConversationLock"]

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class ConversationLock:
    """The lock on conversation ``session`` of the history database ``db``.

    Raises (from :meth:`acquire`):
        MemoryStoreError: another process (or another chat of this one) holds it.
    """

    def __init__(self, db: Path, session: str) -> None:
        digest = hashlib.sha256(session.encode("utf-8", "surrogatepass")).hexdigest()[:16]
        name = f"{_UNSAFE.sub('_', session)[:40]}-{digest}.lock"
        self.path = db.with_name(db.name + "-locks") / name
        self.db = db
        self.session = session
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise :class:`MemoryStoreError` naming who holds it."""
        try:
            import fcntl
        except ImportError:  # pragma: no cover - Windows: no lock
            return
        try:
            self.path.parent.mkdir(exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return  # a folder we cannot write: the database itself will say so
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = _holder(fd)
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return  # no flock on this file system: go on without the lock
            raise MemoryStoreError(
                f"conversation {self.session!r} of {self.db} is open in another goagent-py "
                f"chat{holder}; close that chat, or start another conversation with "
                "--session NAME"
            ) from None
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self._fd = fd

    async def aclose(self) -> None:
        """Release the lock (the process ending releases it too)."""
        fd, self._fd = self._fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _holder(fd: int) -> str:
    """`` (pid N)`` from the lock file's content, or "" when it holds no pid."""
    try:
        text = os.pread(fd, 32, 0).decode("ascii").strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return f" (pid {text})" if text.isdigit() else ""
