"""A vector-store wrapper that reports every call, with its duration and error, to an observer.

``ObservableStore(store, observer)`` keeps the wrapped store's optional capabilities: the
wrapper is a :class:`~goagent_py.memory.vector.base.BulkVectorStore`,
:class:`~goagent_py.memory.vector.base.CountableStore`,
:class:`~goagent_py.memory.vector.base.ListableStore`,
:class:`~goagent_py.memory.vector.base.GuardedStore` or
:class:`~goagent_py.memory.vector.base.EmbedderRecordStore` exactly when the inner store is one
(the reference's wrapper hid ``count``; a hidden ``GuardedStore`` would turn off long-term
memory's compare-and-set write wherever telemetry is on, a hidden record its embedder check).

An observer implements any subset of the :class:`VectorStoreObserver` methods, sync or async.
Subclass :class:`VectorStoreObserver` to inherit no-op defaults for the rest, or pass any object
with some of those methods. An observer that raises is logged and never breaks the store call;
the store's own errors propagate unchanged.
"""

from __future__ import annotations

import functools
import inspect
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar, runtime_checkable

from goagent_py.errors import ConfigurationError
from goagent_py.memory.vector.base import (
    BulkVectorStore,
    CountableStore,
    EmbedderRecordStore,
    GuardedStore,
    ListableStore,
    SearchOptions,
    UpsertEntry,
    Vector,
    VectorStore,
)
from goagent_py.messages import Message, ScoredMessage

__all__ = ["ObservableStore", "VectorStoreObserver", "merge_observers"]

_log = logging.getLogger("goagent_py.memory.vector")

T = TypeVar("T")

OBSERVER_METHODS: tuple[str, ...] = (
    "on_upsert",
    "on_search",
    "on_delete",
    "on_upsert_batch",
    "on_delete_batch",
    "on_count",
    "on_entries",
    "on_upsert_batch_if",
)


@runtime_checkable
class VectorStoreObserver(Protocol):
    """Receives one report per vector-store call, after the call finished.

    Every method is optional and may be sync or async. ``duration`` is in seconds; ``error`` is
    the exception the call raised, or None on success. Subclass this protocol to get no-op
    defaults and override what you need.
    """

    def on_upsert(self, id: str, duration: float, error: BaseException | None) -> Any:
        """An ``upsert`` of entry ``id`` finished."""
        return None

    def on_search(
        self, top_k: int, results: int, duration: float, error: BaseException | None
    ) -> Any:
        """A ``search`` asking for ``top_k`` results returned ``results`` of them (0 on error)."""
        return None

    def on_delete(self, id: str, duration: float, error: BaseException | None) -> Any:
        """A ``delete`` of entry ``id`` finished."""
        return None

    def on_upsert_batch(self, count: int, duration: float, error: BaseException | None) -> Any:
        """An ``upsert_batch`` of ``count`` entries finished."""
        return None

    def on_delete_batch(self, count: int, duration: float, error: BaseException | None) -> Any:
        """A ``delete_batch`` of ``count`` ids finished."""
        return None

    def on_count(self, count: int, duration: float, error: BaseException | None) -> Any:
        """A ``count`` returned ``count`` (0 on error)."""
        return None

    def on_entries(self, count: int, duration: float, error: BaseException | None) -> Any:
        """An ``entries`` listing returned ``count`` entries (0 on error)."""
        return None

    def on_upsert_batch_if(
        self, count: int, written: bool, duration: float, error: BaseException | None
    ) -> Any:
        """A guarded ``upsert_batch_if`` of ``count`` entries finished; ``written`` is False
        when the scope had changed (nothing was written) or on error."""
        return None


async def _notify(observer: object, name: str, *args: Any) -> None:
    callback: Callable[..., Any] | None = getattr(observer, name, None)
    if callback is None:
        return
    try:
        result = callback(*args)
        if inspect.isawaitable(result):
            await result
    except Exception:
        _log.exception("vector-store observer %s.%s raised; ignored", type(observer).__name__, name)


class _MergedObserver(VectorStoreObserver):
    """Calls each observer in turn; one that raises does not stop the ones after it."""

    def __init__(self, observers: Sequence[object]) -> None:
        self.observers = tuple(observers)

    async def _all(self, name: str, *args: Any) -> None:
        for observer in self.observers:
            await _notify(observer, name, *args)

    async def on_upsert(self, id: str, duration: float, error: BaseException | None) -> None:
        await self._all("on_upsert", id, duration, error)

    async def on_search(
        self, top_k: int, results: int, duration: float, error: BaseException | None
    ) -> None:
        await self._all("on_search", top_k, results, duration, error)

    async def on_delete(self, id: str, duration: float, error: BaseException | None) -> None:
        await self._all("on_delete", id, duration, error)

    async def on_upsert_batch(
        self, count: int, duration: float, error: BaseException | None
    ) -> None:
        await self._all("on_upsert_batch", count, duration, error)

    async def on_delete_batch(
        self, count: int, duration: float, error: BaseException | None
    ) -> None:
        await self._all("on_delete_batch", count, duration, error)

    async def on_count(self, count: int, duration: float, error: BaseException | None) -> None:
        await self._all("on_count", count, duration, error)

    async def on_entries(self, count: int, duration: float, error: BaseException | None) -> None:
        await self._all("on_entries", count, duration, error)

    async def on_upsert_batch_if(
        self, count: int, written: bool, duration: float, error: BaseException | None
    ) -> None:
        await self._all("on_upsert_batch_if", count, written, duration, error)


def merge_observers(*observers: object) -> VectorStoreObserver:
    """Combine observers: each report goes to every observer, in the order given.

    No observers gives a no-op observer; one is returned as is.
    """
    if len(observers) == 1 and isinstance(observers[0], VectorStoreObserver):
        return observers[0]
    return _MergedObserver(observers)


class ObservableStore:
    """Wraps a vector store and reports each call to ``observer``.

    The instance has each optional capability (bulk, countable, listable, guarded) exactly
    when ``store`` has it, so ``isinstance(ObservableStore(s, o), GuardedStore)`` answers like
    ``isinstance(s, GuardedStore)``.

    Args:
        store: the store to wrap.
        observer: receives the reports (any subset of :class:`VectorStoreObserver` methods).
    """

    _inner: VectorStore
    _observer: object

    def __new__(cls, store: VectorStore, observer: object) -> ObservableStore:
        if cls is ObservableStore:
            mixins = tuple(mixin for proto, mixin in _CAPABILITIES if isinstance(store, proto))
            if mixins:
                cls = _with_capabilities(mixins)
        return super().__new__(cls)

    def __init__(self, store: VectorStore, observer: object) -> None:
        if not isinstance(store, VectorStore):
            raise ConfigurationError(
                f"ObservableStore needs a VectorStore, got {type(store).__name__}"
            )
        self._inner = store
        self._observer = observer

    @property
    def inner(self) -> VectorStore:
        """The wrapped store."""
        return self._inner

    def __repr__(self) -> str:
        return f"ObservableStore({self._inner!r})"

    async def _timed(
        self, call: Awaitable[T], report: Callable[[T | None, float, BaseException | None], Any]
    ) -> T:
        start = time.perf_counter()
        try:
            result = await call
        except Exception as exc:
            await report(None, time.perf_counter() - start, exc)
            raise
        await report(result, time.perf_counter() - start, None)
        return result

    async def upsert(self, id: str, vector: Vector, message: Message) -> None:
        """Upsert through the inner store and report ``on_upsert``."""

        async def report(_: object, duration: float, error: BaseException | None) -> None:
            await _notify(self._observer, "on_upsert", id, duration, error)

        await self._timed(self._inner.upsert(id, vector, message), report)

    async def search(
        self, vector: Vector, options: SearchOptions | None = None
    ) -> list[ScoredMessage]:
        """Search the inner store and report ``on_search``."""
        top_k = (options or SearchOptions()).top_k

        async def report(
            found: list[ScoredMessage] | None, duration: float, error: BaseException | None
        ) -> None:
            n = len(found) if found is not None else 0
            await _notify(self._observer, "on_search", top_k, n, duration, error)

        return await self._timed(self._inner.search(vector, options), report)

    async def delete(self, id: str) -> None:
        """Delete through the inner store and report ``on_delete``."""

        async def report(_: object, duration: float, error: BaseException | None) -> None:
            await _notify(self._observer, "on_delete", id, duration, error)

        await self._timed(self._inner.delete(id), report)

    async def aclose(self) -> None:
        """Close the inner store if it has ``aclose``."""
        close = getattr(self._inner, "aclose", None)
        if close is not None:
            await close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()


class _BulkMixin(ObservableStore):
    async def upsert_batch(self, entries: Sequence[UpsertEntry]) -> None:
        """Bulk upsert through the inner store and report ``on_upsert_batch``."""
        inner = self._inner
        assert isinstance(inner, BulkVectorStore)
        n = len(entries)

        async def report(_: object, duration: float, error: BaseException | None) -> None:
            await _notify(self._observer, "on_upsert_batch", n, duration, error)

        await self._timed(inner.upsert_batch(entries), report)

    async def delete_batch(self, ids: Sequence[str]) -> None:
        """Bulk delete through the inner store and report ``on_delete_batch``."""
        inner = self._inner
        assert isinstance(inner, BulkVectorStore)
        n = len(ids)

        async def report(_: object, duration: float, error: BaseException | None) -> None:
            await _notify(self._observer, "on_delete_batch", n, duration, error)

        await self._timed(inner.delete_batch(ids), report)


class _CountMixin(ObservableStore):
    async def count(self, filter: Mapping[str, Any] | None = None) -> int:
        """Count through the inner store and report ``on_count``."""
        inner = self._inner
        assert isinstance(inner, CountableStore)

        async def report(n: int | None, duration: float, error: BaseException | None) -> None:
            await _notify(self._observer, "on_count", n or 0, duration, error)

        # Without a filter, call count() bare: stores written before count took one still work.
        return await self._timed(inner.count(filter) if filter else inner.count(), report)


class _ListMixin(ObservableStore):
    async def entries(self, filter: Mapping[str, Any] | None = None) -> list[ScoredMessage]:
        """List through the inner store and report ``on_entries``."""
        inner = self._inner
        assert isinstance(inner, ListableStore)

        async def report(
            found: list[ScoredMessage] | None, duration: float, error: BaseException | None
        ) -> None:
            await _notify(self._observer, "on_entries", len(found or ()), duration, error)

        return await self._timed(inner.entries(filter), report)


class _GuardMixin(ObservableStore):
    async def version(self, filter: Mapping[str, Any]) -> str:
        """The inner store's version token of ``filter`` (not reported: a read of ids)."""
        inner = self._inner
        assert isinstance(inner, GuardedStore)
        return await inner.version(filter)

    async def upsert_batch_if(
        self, entries: Sequence[UpsertEntry], *, filter: Mapping[str, Any], version: str
    ) -> bool:
        """Guarded bulk upsert through the inner store and report ``on_upsert_batch_if``."""
        inner = self._inner
        assert isinstance(inner, GuardedStore)
        n = len(entries)

        async def report(
            written: bool | None, duration: float, error: BaseException | None
        ) -> None:
            await _notify(self._observer, "on_upsert_batch_if", n, bool(written), duration, error)

        return await self._timed(
            inner.upsert_batch_if(entries, filter=filter, version=version), report
        )


class _RecordMixin(ObservableStore):
    async def embedder_record(self) -> str | None:
        """The inner store's embedder record (not reported: one small read)."""
        inner = self._inner
        assert isinstance(inner, EmbedderRecordStore)
        return await inner.embedder_record()

    async def replace_embedder_record(self, expected: str | None, record: str) -> bool:
        """Swap the inner store's embedder record (not reported)."""
        inner = self._inner
        assert isinstance(inner, EmbedderRecordStore)
        return await inner.replace_embedder_record(expected, record)


# Each optional protocol and the mixin that forwards it; the wrapper's class is composed from
# the mixins the inner store's capabilities call for (one cached class per combination).
_CAPABILITIES: tuple[tuple[type, type[ObservableStore]], ...] = (
    (BulkVectorStore, _BulkMixin),
    (CountableStore, _CountMixin),
    (ListableStore, _ListMixin),
    (GuardedStore, _GuardMixin),
    (EmbedderRecordStore, _RecordMixin),
)


@functools.cache
def _with_capabilities(mixins: tuple[type[ObservableStore], ...]) -> type[ObservableStore]:
    return type("ObservableStore", mixins, {"__module__": __name__})
