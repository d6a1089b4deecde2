"""Which hold a run takes on its stored conversation: one answer for a
:class:`~goagent_py.Session` and for a bare run of an :class:`~goagent_py.Agent`
(docs/sessions.md "One run per stored conversation, whoever opens it").

A storage offers its own hold as ``hold_run()`` (an async context manager raising
:class:`~goagent_py.errors.SessionBusyError`): the SQLite, PostgreSQL and in-memory storages
do, across processes where the record is shared. A storage (or a short-term memory) of one's
own without it still gets the hold of this process: a registry entry keyed by its
conversation (:func:`~goagent_py._conversation.conversation_key`: its ``conversation_key``
attribute when it has one, else the object itself). That hold does not reach other
processes; a warning says so once per type (docs/sessions.md "A storage of your own").
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable
from typing import Any

from goagent_py._conversation import conversation_key
from goagent_py._run_hold import busy_error, held_in_process

__all__ = ["record_hold"]

_log = logging.getLogger("goagent_py")
_warned: set[type] = set()

Hold = Callable[[], contextlib.AbstractAsyncContextManager[object]]


def record_hold(memory: object) -> Hold | None:
    """The hold of the conversation ``memory`` (an agent's short-term memory) keeps: its own
    ``hold_run``, its storage's, or this process's registry hold on it; None without memory.
    """
    if memory is None:
        return None
    storage = getattr(memory, "storage", None)
    for target in (memory, storage):
        hold = getattr(target, "hold_run", None)
        if callable(hold):
            return hold  # type: ignore[no-any-return]
    return lambda: _held_here(memory, memory if storage is None else storage)


@contextlib.asynccontextmanager
async def _held_here(memory: object, target: object) -> AsyncIterator[None]:
    """Hold ``memory``'s conversation in this process only (its storage, ``target``, has no
    ``hold_run``)."""
    kind = type(target)
    if kind not in _warned:
        _warned.add(kind)
        _log.warning(
            "%s has no hold_run(): its runs are held in this process only, so a run in "
            "another process can interleave its turns in the same record; give it a "
            "hold_run() (docs/sessions.md 'A storage of your own')",
            kind.__name__,
        )
    session_id: Any = getattr(target, "session_id", "")
    busy = busy_error(
        f"this {kind.__name__}'s conversation", session_id if isinstance(session_id, str) else ""
    )
    with held_in_process(("conversation", conversation_key(memory)), busy):
        yield
