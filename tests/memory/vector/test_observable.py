"""ObservableStore: reports every call, keeps the inner store's capabilities visible."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from goagent_py.memory.vector.base import (
    BulkVectorStore,
    CountableStore,
    SearchOptions,
    UpsertEntry,
    Vector,
    VectorStore,
)
from goagent_py.memory.vector.observable import (
    ObservableStore,
    VectorStoreObserver,
    merge_observers,
)
from goagent_py.messages import Message, ScoredMessage, user_message


class PlainStore:
    def __init__(self) -> None:
        self.data: dict[str, Message] = {}
        self.fail = False

    async def upsert(self, id: str, vector: Vector, message: Message) -> None:
        if self.fail:
            raise RuntimeError("boom")
        self.data[id] = message

    async def search(
        self, vector: Vector, options: SearchOptions | None = None
    ) -> list[ScoredMessage]:
        if self.fail:
            raise RuntimeError("boom")
        return [ScoredMessage(m, 1.0, i) for i, m in self.data.items()]

    async def delete(self, id: str) -> None:
        self.data.pop(id, None)


class BulkStore(PlainStore):
    async def upsert_batch(self, entries: Sequence[UpsertEntry]) -> None:
        for e in entries:
            await self.upsert(e.id, e.vector, e.message)

    async def delete_batch(self, ids: Sequence[str]) -> None:
        for i in ids:
            await self.delete(i)


class CountStore(PlainStore):
    async def count(self) -> int:
        return len(self.data)


class BulkCountStore(BulkStore, CountStore):
    pass


class Recorder(VectorStoreObserver):
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []

    def on_upsert(self, id: str, duration: float, error: BaseException | None) -> None:
        self.events.append(("upsert", id, error))

    async def on_search(
        self, top_k: int, results: int, duration: float, error: BaseException | None
    ) -> None:
        assert duration >= 0
        self.events.append(("search", top_k, results, error))

    def on_delete(self, id: str, duration: float, error: BaseException | None) -> None:
        self.events.append(("delete", id, error))

    def on_upsert_batch(self, count: int, duration: float, error: BaseException | None) -> None:
        self.events.append(("upsert_batch", count, error))

    def on_delete_batch(self, count: int, duration: float, error: BaseException | None) -> None:
        self.events.append(("delete_batch", count, error))

    def on_count(self, count: int, duration: float, error: BaseException | None) -> None:
        self.events.append(("count", count, error))


@pytest.mark.parametrize(
    ("inner", "bulk", "countable"),
    [
        (PlainStore, False, False),
        (BulkStore, True, False),
        (CountStore, False, True),
        (BulkCountStore, True, True),
    ],
)
def test_capabilities_follow_the_inner_store(inner: type, bulk: bool, countable: bool) -> None:
    store = ObservableStore(inner(), Recorder())
    assert isinstance(store, VectorStore)
    assert isinstance(store, ObservableStore)
    assert isinstance(store, BulkVectorStore) is bulk
    assert isinstance(store, CountableStore) is countable


async def test_every_call_is_reported() -> None:
    rec = Recorder()
    store = ObservableStore(BulkCountStore(), rec)
    assert isinstance(store, BulkVectorStore)
    assert isinstance(store, CountableStore)
    await store.upsert("a", [1.0], user_message("x"))
    found = await store.search([1.0], SearchOptions(top_k=4))
    assert len(found) == 1
    await store.upsert_batch([UpsertEntry("b", [1.0], user_message("y"))])
    assert await store.count() == 2
    await store.delete_batch(["a", "b", "c"])
    await store.delete("zz")
    assert rec.events == [
        ("upsert", "a", None),
        ("search", 4, 1, None),
        ("upsert_batch", 1, None),
        ("count", 2, None),
        ("delete_batch", 3, None),
        ("delete", "zz", None),
    ]


async def test_errors_propagate_unchanged_and_are_reported() -> None:
    rec = Recorder()
    inner = PlainStore()
    inner.fail = True
    store = ObservableStore(inner, rec)
    with pytest.raises(RuntimeError, match="boom"):
        await store.upsert("a", [1.0], user_message("x"))
    with pytest.raises(RuntimeError, match="boom"):
        await store.search([1.0])
    assert [e[0] for e in rec.events] == ["upsert", "search"]
    assert isinstance(rec.events[0][2], RuntimeError)
    assert rec.events[1][1:3] == (3, 0)


async def test_a_failing_or_partial_observer_never_breaks_the_store(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def on_upsert(self, *args: Any) -> None:
            raise ValueError("observer bug")

    store = ObservableStore(PlainStore(), Broken())
    await store.upsert("a", [1.0], user_message("x"))  # observer raises: logged, ignored
    await store.delete("a")  # observer has no on_delete: skipped
    assert "observer bug" in caplog.text


async def test_merge_observers_calls_each_in_order() -> None:
    order: list[str] = []

    class First:
        def on_delete(self, id: str, duration: float, error: BaseException | None) -> None:
            order.append("first")
            raise RuntimeError("first fails")

    class Second:
        async def on_delete(self, id: str, duration: float, error: BaseException | None) -> None:
            order.append("second")

    store = ObservableStore(PlainStore(), merge_observers(First(), Second()))
    await store.delete("a")
    assert order == ["first", "second"]
    rec = Recorder()
    assert merge_observers(rec) is rec
    await ObservableStore(PlainStore(), merge_observers()).delete("x")  # no-op observer


async def test_aclose_forwards_to_the_inner_store() -> None:
    closed: list[bool] = []

    class Closable(PlainStore):
        async def aclose(self) -> None:
            closed.append(True)

    async with ObservableStore(Closable(), Recorder()) as store:
        assert store.inner is not None
    assert closed == [True]
