"""Searching a store without copying what the caller then drops.

A store that keeps Python objects (the in-memory one) hands out copies from ``search``, so a
caller that changes a result never changes what is stored. A caller that asks for more
candidates than it returns (the RAG pipeline asks for 30 to keep 3; long-term memory for a few
more than ``top_k``) paid for a deep copy of each: most of an in-memory vector search's own
time. Such a store also has ``search_shared``: the same hits holding its own messages, which
the caller reads and never changes, copying (:func:`owned`) only what it hands on; and
``entries_shared``, the same for its listing (a consolidation reads every entry of a scope to
find the latest statement, and hands on a few).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from goagent_py._deepcopy import deepcopy
from goagent_py.memory.vector.base import SearchOptions, Vector, VectorStore
from goagent_py.messages import ScoredMessage

__all__ = ["SharedEntries", "SharedSearch", "entries_shared", "owned", "search_shared"]


@runtime_checkable
class SharedSearch(Protocol):
    """A store whose ``search_shared`` returns the hits of ``search`` without copying them."""

    async def search_shared(
        self, vector: Vector, options: SearchOptions | None = None
    ) -> list[ScoredMessage]:
        """The hits of ``search``, holding the store's own messages: read them, never change
        them; hand on only :func:`owned` copies."""
        ...


@runtime_checkable
class SharedEntries(Protocol):
    """A store whose ``entries_shared`` lists the entries of ``entries`` without copying them."""

    async def entries(self, filter: Mapping[str, Any] | None = None) -> list[ScoredMessage]:
        """Every entry matching ``filter`` (copies)."""
        ...

    async def entries_shared(self, filter: Mapping[str, Any] | None = None) -> list[ScoredMessage]:
        """The entries of ``entries``, holding the store's own messages: read them, never
        change them; hand on only :func:`owned` copies."""
        ...


async def search_shared(
    store: VectorStore, vector: Vector, options: SearchOptions
) -> tuple[list[ScoredMessage], bool]:
    """``store``'s hits, and whether they hold the store's own messages (then the caller
    copies what it keeps with :func:`owned`)."""
    if isinstance(store, SharedSearch) and _same(store, "search", "search_shared"):
        return await store.search_shared(vector, options), True
    return await store.search(vector, options), False


async def entries_shared(store: Any, filter: Mapping[str, Any]) -> tuple[list[ScoredMessage], bool]:
    """``store``'s entries matching ``filter`` (a listable store), and whether they hold the
    store's own messages (then the caller copies what it hands on with :func:`owned`)."""
    if isinstance(store, SharedEntries) and _same(store, "entries", "entries_shared"):
        return await store.entries_shared(filter), True
    found: list[ScoredMessage] = await store.entries(filter)
    return found, False


def _same(store: object, plain: str, shared: str) -> bool:
    """Whether ``store``'s method ``plain`` is the one its ``shared`` goes with: a subclass
    that overrides ``plain`` (to filter, rescore or wrap it) is read through it."""
    kind = type(store)
    owner = next((c for c in kind.__mro__ if shared in c.__dict__), None)
    return owner is not None and getattr(kind, plain, None) is owner.__dict__.get(plain)


def owned(hit: ScoredMessage) -> ScoredMessage:
    """``hit`` with a message of its own (a deep copy)."""
    return ScoredMessage(deepcopy(hit.message), hit.score, hit.id)
