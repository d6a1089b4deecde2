"""One contract, every backend: in-memory, sqlite-vec, pgvector and qdrant run these unchanged."""

from __future__ import annotations

import math
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from goagent_py.errors import ConfigurationError, InvalidInputError
from goagent_py.memory.vector.base import (
    BulkVectorStore,
    CountableStore,
    GuardedStore,
    ListableStore,
    SearchOptions,
    UpsertEntry,
    VectorStore,
)
from goagent_py.memory.vector.observable import ObservableStore
from goagent_py.messages import ImageBlock, Message, Role, TextBlock

StoreFactory = Callable[..., Awaitable[Any]]  # the make_store fixture (conftest.py)
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def msg(text: str, **metadata: object) -> Message:
    return Message(Role.USER, [TextBlock(text)], metadata=dict(metadata))


def ids(results: list) -> list[str]:  # type: ignore[type-arg]
    return [r.id for r in results]


async def test_capabilities(make_store: StoreFactory) -> None:
    store = await make_store(3)
    assert isinstance(store, VectorStore)
    assert isinstance(store, BulkVectorStore)
    assert isinstance(store, CountableStore)
    wrapped = ObservableStore(store, object())
    for capability in (BulkVectorStore, CountableStore, ListableStore, GuardedStore):
        # Telemetry wraps every store: a capability it hid would silently turn off the
        # compare-and-set write of long-term memory, or its listing.
        assert isinstance(wrapped, capability) is isinstance(store, capability), capability


async def test_the_observed_store_lists_and_writes_guarded_as_the_store_does(
    make_store: StoreFactory,
) -> None:
    store = await make_store(3)
    if not isinstance(store, GuardedStore):
        pytest.skip(f"{type(store).__name__} is not a GuardedStore")
    reports: list[str] = []

    class Observer:
        def on_entries(self, count: int, duration: float, error: BaseException | None) -> None:
            reports.append(f"entries {count}")

        def on_upsert_batch_if(
            self, count: int, written: bool, duration: float, error: BaseException | None
        ) -> None:
            reports.append(f"upsert_batch_if {count} {written}")

    wrapped = ObservableStore(store, Observer())
    assert isinstance(wrapped, GuardedStore)
    scope = {"session": "s"}
    version = await wrapped.version(scope)
    entry = UpsertEntry("a", [1.0, 0.0, 0.0], msg("first", session="s"))
    assert await wrapped.upsert_batch_if([entry], filter=scope, version=version)
    stale = UpsertEntry("b", [0.0, 1.0, 0.0], msg("stale", session="s"))
    assert not await wrapped.upsert_batch_if([stale], filter=scope, version=version)
    assert [m.id for m in await wrapped.entries(scope)] == ["a"]
    assert reports == ["upsert_batch_if 1 True", "upsert_batch_if 1 False", "entries 1"]


async def test_empty_store_finds_nothing(make_store: StoreFactory) -> None:
    store = await make_store(3)
    assert await store.search([1.0, 0.0, 0.0]) == []
    assert await store.count() == 0


async def test_upsert_then_search_round_trips_the_message(make_store: StoreFactory) -> None:
    store = await make_store(3)
    original = Message(
        Role.ASSISTANT,
        [TextBlock("the cat sat"), ImageBlock(PNG, "image/png")],
        metadata={"session": "s", "n": 3, "ok": True, "tag": "x"},
    )
    await store.upsert("a", [1.0, 0.0, 0.0], original)
    [hit] = await store.search([1.0, 0.0, 0.0])
    assert hit.id == "a"
    assert hit.score == pytest.approx(1.0, abs=1e-5)
    assert hit.message == original


async def test_cosine_does_not_assume_unit_vectors(make_store: StoreFactory) -> None:
    store = await make_store(3)
    await store.upsert("long", [10.0, 0.0, 0.0], msg("long"))
    await store.upsert("diag", [3.0, 3.0, 0.0], msg("diag"))
    hits = await store.search([0.5, 0.0, 0.0], SearchOptions(top_k=5))
    assert ids(hits) == ["long", "diag"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-5)
    assert hits[1].score == pytest.approx(math.sqrt(0.5), abs=1e-5)


async def test_upsert_replaces_the_same_id(make_store: StoreFactory) -> None:
    store = await make_store(3)
    await store.upsert("a", [1.0, 0.0, 0.0], msg("first", session="s"))
    await store.upsert("a", [0.0, 1.0, 0.0], msg("second", session="t"))
    assert await store.count() == 1
    [hit] = await store.search([0.0, 1.0, 0.0])
    assert hit.message.text == "second"
    assert hit.score == pytest.approx(1.0, abs=1e-5)
    assert await store.search([0.0, 1.0, 0.0], SearchOptions(filter={"session": "s"})) == []
    assert ids(await store.search([0.0, 1.0, 0.0], SearchOptions(filter={"session": "t"}))) == ["a"]


async def test_search_orders_by_score_and_honours_top_k(make_store: StoreFactory) -> None:
    store = await make_store(3)
    await store.upsert_batch(
        [
            UpsertEntry("far", [0.0, 1.0, 0.0], msg("far")),
            UpsertEntry("near", [1.0, 0.1, 0.0], msg("near")),
            UpsertEntry("mid", [1.0, 1.0, 0.0], msg("mid")),
            UpsertEntry("opposite", [-1.0, 0.0, 0.0], msg("opposite")),
        ]
    )
    hits = await store.search([1.0, 0.0, 0.0], SearchOptions(top_k=10))
    assert ids(hits) == ["near", "mid", "far", "opposite"]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert hits[-1].score == pytest.approx(-1.0, abs=1e-5)
    assert ids(await store.search([1.0, 0.0, 0.0], SearchOptions(top_k=2))) == ["near", "mid"]


async def test_score_threshold_keeps_scores_at_or_above(make_store: StoreFactory) -> None:
    store = await make_store(3)
    await store.upsert("same", [1.0, 0.0, 0.0], msg("same"))
    await store.upsert("diag", [1.0, 1.0, 0.0], msg("diag"))  # 0.707
    await store.upsert("ortho", [0.0, 0.0, 1.0], msg("ortho"))  # 0.0
    hits = await store.search([1.0, 0.0, 0.0], SearchOptions(top_k=10, score_threshold=0.7))
    assert ids(hits) == ["same", "diag"]
    hits = await store.search([1.0, 0.0, 0.0], SearchOptions(top_k=10, score_threshold=0.99))
    assert ids(hits) == ["same"]


async def test_metadata_filter_is_exact_and_and_ed(make_store: StoreFactory) -> None:
    store = await make_store(3)
    await store.upsert_batch(
        [
            UpsertEntry("a", [1.0, 0.0, 0.0], msg("a", kind="note", n=1, pinned=True)),
            UpsertEntry("b", [1.0, 0.2, 0.0], msg("b", kind="note", n=2, pinned=False)),
            UpsertEntry("c", [1.0, 0.4, 0.0], msg("c", kind="fact", n=1.0)),
            UpsertEntry("d", [1.0, 0.6, 0.0], msg("d", n=True)),
            UpsertEntry("e", [1.0, 0.8, 0.0], msg("e")),
        ]
    )
    q = [1.0, 0.0, 0.0]

    async def find(**f: object) -> list[str]:
        return ids(await store.search(q, SearchOptions(top_k=10, filter=f)))

    assert await find(kind="note") == ["a", "b"]
    assert await find(kind="note", n=2) == ["b"]
    assert await find(n=1) == ["a", "c"]  # numbers compare numerically, bools are not numbers
    assert await find(n=True) == ["d"]
    assert await find(pinned=False) == ["b"]
    assert await find(kind="nothing") == []
    assert await find(missing="x") == []
    assert ids(await store.search(q, SearchOptions(top_k=10, filter={}))) == list("abcde")


async def test_filter_with_threshold(make_store: StoreFactory) -> None:
    store = await make_store(3)
    await store.upsert("a", [1.0, 0.0, 0.0], msg("a", kind="x"))
    await store.upsert("b", [0.0, 1.0, 0.0], msg("b", kind="x"))
    await store.upsert("c", [1.0, 0.0, 0.0], msg("c", kind="y"))
    hits = await store.search(
        [1.0, 0.0, 0.0], SearchOptions(top_k=10, score_threshold=0.5, filter={"kind": "x"})
    )
    assert ids(hits) == ["a"]


async def test_sessions_are_isolated_and_top_k_counts_after_filtering(
    make_store: StoreFactory,
) -> None:
    store = await make_store(3)
    # bob's entries are all closer to the query than alice's: a post-filter would starve alice.
    await store.upsert_batch(
        [
            UpsertEntry(f"bob-{i}", [1.0, 0.01 * i, 0.0], msg(f"bob {i}", session="bob"))
            for i in range(12)
        ]
        + [
            UpsertEntry(
                f"alice-{i}", [0.2 * i, 1.0, 0.0], msg(f"alice {i}", session="alice", k="v")
            )
            for i in range(4)
        ]
        + [UpsertEntry("nobody", [1.0, 0.0, 0.0], msg("nobody"))]
    )
    q = [1.0, 0.0, 0.0]
    alice = await store.search(q, SearchOptions(top_k=3, filter={"session": "alice"}))
    assert ids(alice) == ["alice-3", "alice-2", "alice-1"]
    assert all(h.message.metadata["session"] == "alice" for h in alice)
    bob = await store.search(q, SearchOptions(top_k=20, filter={"session": "bob"}))
    assert len(bob) == 12
    assert all(h.id.startswith("bob-") for h in bob)
    both = await store.search(q, SearchOptions(top_k=2, filter={"session": "alice", "k": "v"}))
    assert ids(both) == ["alice-3", "alice-2"]
    assert await store.search(q, SearchOptions(filter={"session": "carol"})) == []
    assert await store.search(q, SearchOptions(filter={"session": ""})) == []


async def test_delete_and_delete_batch(make_store: StoreFactory) -> None:
    store = await make_store(3)
    await store.upsert_batch(
        [UpsertEntry(i, [1.0, float(n), 0.0], msg(i)) for n, i in enumerate("abcd")]
    )
    await store.delete("a")
    await store.delete("a")  # missing: no error
    assert await store.count() == 3
    await store.delete_batch(["b", "zz", "c"])
    assert ids(await store.search([1.0, 0.0, 0.0], SearchOptions(top_k=10))) == ["d"]
    assert await store.count() == 1
    await store.delete_batch([])
    await store.upsert_batch([])
    assert await store.count() == 1


async def test_bulk_upsert_last_duplicate_wins(make_store: StoreFactory) -> None:
    store = await make_store(3)
    await store.upsert_batch(
        [
            UpsertEntry("a", [1.0, 0.0, 0.0], msg("old")),
            UpsertEntry("b", [0.0, 1.0, 0.0], msg("b")),
            UpsertEntry("a", [1.0, 0.0, 0.0], msg("new")),
        ]
    )
    assert await store.count() == 2
    hits = await store.search([1.0, 0.0, 0.0], SearchOptions(top_k=1))
    assert hits[0].message.text == "new"


@pytest.mark.parametrize(
    ("vector", "match"),
    [
        ([1.0, 0.0], "2 dimensions but the store holds 3"),
        ([1.0, 0.0, 0.0, 0.0], "4 dimensions"),
        ([1.0, float("nan"), 0.0], "NaN"),
        ([0.0, 0.0, 0.0], "all zeros"),
        ([], "non-empty"),
    ],
)
async def test_bad_vectors_are_rejected_and_nothing_is_lost(
    make_store: StoreFactory, vector: list[float], match: str
) -> None:
    store = await make_store(3)
    await store.upsert("keep", [1.0, 0.0, 0.0], msg("keep"))
    with pytest.raises(ValueError, match=match):
        await store.upsert("bad", vector, msg("bad"))
    with pytest.raises(ValueError, match=match):
        await store.upsert_batch(
            [UpsertEntry("ok", [0.0, 1.0, 0.0], msg("ok")), UpsertEntry("bad", vector, msg("x"))]
        )
    with pytest.raises(ValueError, match=match):
        await store.search(vector)
    assert await store.count() == 1
    assert ids(await store.search([1.0, 0.0, 0.0], SearchOptions(top_k=5))) == ["keep"]


@pytest.mark.parametrize(
    ("filter", "match"),
    [
        ({"tags": ["a"]}, "must be a str, int, float or bool"),
        ({"x": None}, "must be a str, int, float or bool"),
        ({"a.b": "x"}, "filter key"),
        ({"x": float("inf")}, "finite"),
        ({"n": 2**64}, "beyond 64 bits"),
        ({"n": -(2**63) - 1}, "beyond 64 bits"),
    ],
)
async def test_unsupported_filters_are_a_clear_error(
    make_store: StoreFactory, filter: dict[str, object], match: str
) -> None:
    store = await make_store(3)
    await store.upsert("a", [1.0, 0.0, 0.0], msg("a"))
    with pytest.raises(InvalidInputError, match=f"bad filter.*{match}"):
        await store.search([1.0, 0.0, 0.0], SearchOptions(filter=filter))
    with pytest.raises(ValueError, match=match):  # as before ConfigurationError was one
        await store.count(filter)


async def test_results_are_copies(make_store: StoreFactory) -> None:
    store = await make_store(3)
    original = msg("a", tag="x")
    vector = [1.0, 0.0, 0.0]
    await store.upsert("a", vector, original)
    original.metadata["tag"] = "changed"
    vector[0] = 0.0
    vector[1] = 1.0
    [hit] = await store.search([1.0, 0.0, 0.0])
    assert hit.message.metadata["tag"] == "x"
    assert hit.score == pytest.approx(1.0, abs=1e-5)
    hit.message.metadata["tag"] = "mutated"
    [again] = await store.search([1.0, 0.0, 0.0])
    assert again.message.metadata["tag"] == "x"


# -- metric="l2": the same contract under Euclidean distance ----------------------------------


async def test_l2_ranks_by_euclidean_distance_with_score_one_over_one_plus_d(
    make_store: StoreFactory,
) -> None:
    store = await make_store(3, metric="l2")
    assert store.metric == "l2"
    await store.upsert("same", [1.0, 0.0, 0.0], msg("same"))
    await store.upsert("near", [1.0, 0.5, 0.0], msg("near"))  # cosine 0.89, distance 0.5
    await store.upsert("far", [10.0, 0.0, 0.0], msg("far"))  # cosine 1.0, distance 9
    hits = await store.search([1.0, 0.0, 0.0], SearchOptions(top_k=5))
    assert ids(hits) == ["same", "near", "far"]  # cosine would put "far" before "near"
    assert [h.score for h in hits] == pytest.approx([1.0, 1 / 1.5, 1 / 10], abs=1e-5)


async def test_l2_threshold_filters_and_zero_vectors(make_store: StoreFactory) -> None:
    store = await make_store(3, metric="l2")
    entries = [
        UpsertEntry("origin", [0.0, 0.0, 0.0], msg("origin", session="a")),  # fine under l2
        UpsertEntry("one", [1.0, 0.0, 0.0], msg("one", session="a", kind="x")),
        UpsertEntry("three", [3.0, 0.0, 0.0], msg("three", session="b", kind="x")),
    ]
    await store.upsert_batch(entries)
    [hit] = await store.search([0.0, 0.0, 0.0], SearchOptions(top_k=1))
    assert (hit.id, hit.score) == ("origin", pytest.approx(1.0))
    # score >= 0.5 means distance <= 1: "origin" and "one", not "three" (distance 3).
    hits = await store.search([0.0, 0.0, 0.0], SearchOptions(top_k=5, score_threshold=0.5))
    assert ids(hits) == ["origin", "one"]
    hits = await store.search([3.0, 0.0, 0.0], SearchOptions(top_k=5, filter={"session": "a"}))
    assert ids(hits) == ["one", "origin"]
    assert [h.score for h in hits] == pytest.approx([1 / 3, 1 / 4], abs=1e-5)
    hits = await store.search([0.0, 0.0, 0.0], SearchOptions(top_k=5, filter={"kind": "x"}))
    assert ids(hits) == ["one", "three"]
    assert [h.score for h in hits] == pytest.approx([1 / 2, 1 / 4], abs=1e-5)


async def test_l2_still_rejects_bad_vectors(make_store: StoreFactory) -> None:
    store = await make_store(3, metric="l2")
    await store.upsert("a", [1.0, 2.0, 3.0], msg("a"))
    for bad in ([1.0, 2.0], [float("nan"), 0.0, 0.0]):
        with pytest.raises(ValueError, match=r"dimensions|NaN"):
            await store.upsert("b", bad, msg("b"))
    assert await store.count() == 1


async def test_unknown_metric_is_a_configuration_error(make_store: StoreFactory) -> None:
    with pytest.raises(ConfigurationError, match="unknown metric 'dot'"):
        await make_store(3, metric="dot")


async def test_count_with_a_filter_counts_what_a_search_would_match(
    make_store: StoreFactory,
) -> None:
    store = await make_store(3)
    await store.upsert_batch(
        [
            UpsertEntry("a", [1.0, 0.0, 0.0], msg("a", session="alice", kind="note", n=1)),
            UpsertEntry("b", [0.0, 1.0, 0.0], msg("b", session="alice", kind="fact", n=2)),
            UpsertEntry("c", [0.0, 0.0, 1.0], msg("c", session="bob", kind="note", n=1)),
            UpsertEntry("d", [1.0, 1.0, 0.0], msg("d", kind="note", flag=True)),
        ]
    )
    assert await store.count() == 4
    assert await store.count({}) == 4
    assert await store.count({"session": "alice"}) == 2
    assert await store.count({"session": "carol"}) == 0
    assert await store.count({"kind": "note"}) == 3
    assert await store.count({"session": "alice", "kind": "note"}) == 1
    assert await store.count({"n": 1}) == 2
    assert await store.count({"flag": True}) == 1
    assert await store.count({"flag": 1}) == 0  # a bool is not a number, as in search
    with pytest.raises(ValueError, match="filter key"):
        await store.count({"bad key": "x"})
    wrapped = ObservableStore(store, object())
    assert await wrapped.count({"session": "bob"}) == 1


async def test_metadata_that_is_not_json_data_is_refused_by_every_store(
    make_store: StoreFactory,
) -> None:
    # The in-memory store used to keep it, so code that worked there failed on a real backend.
    store = await make_store(3)
    with pytest.raises((ValueError, ConfigurationError), match="must be JSON data"):
        await store.upsert("a", [1.0, 0.0, 0.0], msg("x", bad=object()))
    with pytest.raises((ValueError, ConfigurationError), match="must be JSON data"):
        await store.upsert("b", [1.0, 0.0, 0.0], msg("x", nan=float("nan")))
    assert await store.count() == 0
