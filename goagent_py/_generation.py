"""Which state of a conversation a caller last read, so that a write based on that read is
refused once the conversation was cleared since (docs/sessions.md "A conversation cleared
under a run").

Each storage keeps a *generation* per conversation, which every clear increments (never
reset: a cleared conversation keeps its counter). A storage's ``load`` records the
generation it read in the caller's context (:class:`ReadFence`); its writes check, in their
own transaction, that the generation is still that one, and raise
:class:`~goagent_py.errors.ConversationClearedError` otherwise. A run loads, then appends
each turn, in one task: its writes are fenced by its own read, whatever other tasks or
processes read meanwhile. A context that never read the conversation writes unfenced (as
before); one that cleared it goes on from the clear.

Per storage object and context (a ``ContextVar``, as the PostgreSQL run lease's fencing token),
not per storage object alone: one storage shared by a streaming run and a "new chat" button in
another task must fence the run, whose read came before the button's clear.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from contextvars import ContextVar
from types import MappingProxyType

from goagent_py.errors import ConversationClearedError

__all__ = ["STALE", "ReadFence", "cleared_error", "expect_generation", "generation_read"]

# storage object's key -> (the fence's epoch, the generation) this context last read (or
# cleared to).
_seen: ContextVar[Mapping[int, tuple[int, int]]] = ContextVar(
    "goagent_read_generations", default=MappingProxyType({})
)
_keys = itertools.count(1)
# A context keeps the generations of this many storages at most (a task that opens a storage
# per job would otherwise grow its context without end); the oldest are forgotten first, and a
# forgotten one writes unfenced, as a storage never read does.
_KEEP = 64


STALE = -1
"""What :meth:`ReadFence.expected` gives a context whose read came before the fence was renewed
(a storage that reopened its file): no generation equals it, so its writes are refused."""


class ReadFence:
    """One storage object's fence: the generation each context last read."""

    __slots__ = ("_epoch", "_key")

    def __init__(self) -> None:
        self._key = next(_keys)
        self._epoch = 0  # renewals so far (see renew)

    def read(self, generation: int) -> None:
        """Record that this context read (or cleared the conversation to) ``generation``."""
        seen = _seen.get()
        value = (self._epoch, generation)
        if seen.get(self._key) == value:
            return
        fresh = {key: old for key, old in seen.items() if key != self._key}
        fresh[self._key] = value
        for key in list(fresh)[: max(0, len(fresh) - _KEEP)]:
            del fresh[key]
        _seen.set(MappingProxyType(fresh))

    def expected(self) -> int | None:
        """The generation this context last read, None if it never read the conversation,
        :data:`STALE` if it read it before :meth:`renew`."""
        seen = _seen.get().get(self._key)
        if seen is None:
            return None
        return seen[1] if seen[0] == self._epoch else STALE

    def renew(self) -> None:
        """Make every read so far stale (in every context): the storage reads another file
        now (a backup restored over its own: ``SQLiteStorage.reopen``), so what was read from
        the old one is no base for a write, whatever the new one's generation is."""
        self._epoch += 1


def _fence_of(storage: object) -> ReadFence | None:
    # The storages of this package keep their fence as ``_fence``; another storage has none.
    fence = getattr(storage, "_fence", None)
    return fence if isinstance(fence, ReadFence) else None


def generation_read(storage: object) -> int | None:
    """The generation of its conversation that ``storage`` last read in this context; None
    when it never read it here, or keeps no fence (a storage of another package).

    A durable run's load and appends are separate activities (separate tasks, often separate
    workers and storage objects): the load activity reports this with the history, the
    workflow records it, and each append activity puts it back (:func:`expect_generation`)."""
    fence = _fence_of(storage)
    return None if fence is None else fence.expected()


def expect_generation(storage: object, generation: int) -> None:
    """Make this context's writes through ``storage`` go on from ``generation``, as if it had
    read the conversation at that generation here (see :func:`generation_read`); nothing for
    a storage without a fence."""
    fence = _fence_of(storage)
    if fence is not None:
        fence.read(generation)


def cleared_error(where: str, session_id: str) -> ConversationClearedError:
    """The refusal of a write whose read came before the conversation's clear."""
    return ConversationClearedError(
        f"{where}: the conversation was cleared (by another process or task) after this "
        "writer read it, so this write was refused and nothing of it stored (it would have "
        "put the rest of a cleared turn back); load the conversation again to go on from what "
        "it holds now",
        session_id=session_id,
    )
