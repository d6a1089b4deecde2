"""LongTermMemory on FakeEmbedder: store/retrieve, dedupe, sessions, budgets, a real Agent."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from goagent_py import Agent
from goagent_py.errors import ConfigurationError, NoEmbeddableContentError
from goagent_py.memory.base import Chunk, LongTermMemoryProtocol
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.vector.base import SearchOptions, Vector
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.vector.sqlite_vec import SqliteVecStore
from goagent_py.messages import (
    ContentBlock,
    ImageBlock,
    Message,
    Role,
    ScoredMessage,
    TextBlock,
    assistant_message,
    user_message,
)
from goagent_py.testing import FakeEmbedder, ScriptedProvider

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16


def memory(**kwargs: Any) -> LongTermMemory:
    return LongTermMemory(FakeEmbedder(64), InMemoryVectorStore(), **kwargs)


# -- FakeEmbedder -----------------------------------------------------------------------------


async def test_fake_embedder_is_deterministic_unit_float32_and_word_sensitive() -> None:
    e = FakeEmbedder(32)
    a = await e.embed([TextBlock("My favourite colour is blue")])
    again = await FakeEmbedder(32).embed([TextBlock("my favourite   colour is BLUE")])
    related = await e.embed([TextBlock("what is my favourite colour")])
    unrelated = await e.embed([TextBlock("trains leave at noon")])
    assert a.dtype == np.float32
    assert a.shape == (32,)
    assert float(np.linalg.norm(a)) == pytest.approx(1.0, abs=1e-6)
    np.testing.assert_array_equal(a, again)
    assert float(a @ related) > float(a @ unrelated) + 0.3
    batch = await e.embed_batch([[TextBlock("trains leave at noon")], [TextBlock("x")]])
    assert batch.shape == (2, 32)
    np.testing.assert_array_equal(batch[0], unrelated)
    assert (e.embed_calls, e.batch_calls) == (3, 1)


async def test_fake_embedder_has_nothing_to_embed_without_text() -> None:
    e = FakeEmbedder()
    for blocks in ([], [ImageBlock(PNG, "image/png")], [TextBlock("   ")]):
        with pytest.raises(NoEmbeddableContentError):
            await e.embed(blocks)
    with pytest.raises(NoEmbeddableContentError):
        await e.embed_batch([[TextBlock("a")], [ImageBlock(PNG, "image/png")]])
    assert (await e.embed_batch([])).shape == (0, 16)
    with pytest.raises(ConfigurationError, match="positive int"):
        FakeEmbedder(0)


# -- store / retrieve -------------------------------------------------------------------------


async def test_store_then_retrieve_the_most_relevant() -> None:
    m = memory(top_k=2)
    assert isinstance(m, LongTermMemoryProtocol)
    await m.store(
        [
            user_message("my favourite colour is blue"),
            assistant_message("noted: your favourite colour is blue"),
            user_message("the train to Lyon leaves at noon"),
        ],
        session="alice",
    )
    found = await m.retrieve([TextBlock("what is my favourite colour?")], session="alice")
    assert len(found) == 2
    assert all("colour" in s.message.text for s in found)
    assert found[0].score >= found[1].score
    assert found[0].message.metadata["session"] == "alice"
    assert {s.message.role for s in found} == {Role.USER, Role.ASSISTANT}
    assert len(await m.retrieve([TextBlock("colour")], top_k=5, session="alice")) == 3


async def test_storing_the_same_turn_twice_does_not_duplicate() -> None:
    store = InMemoryVectorStore()
    m = LongTermMemory(FakeEmbedder(), store)
    turn = [user_message("hello"), assistant_message("hi there")]
    await m.store(turn, session="s")
    await m.store([user_message("hello"), assistant_message("hi there")], session="s")
    assert await store.count() == 2
    await m.store(turn, session="other")  # another session is another memory
    assert await store.count() == 4
    found = await m.retrieve([TextBlock("hello")], top_k=10, session="s")
    assert sorted(s.message.text for s in found) == ["hello", "hi there"]
    assert all(s.id.startswith("s:") for s in found)
    await m.forget(turn, session="s")
    assert await store.count() == 2


async def test_image_only_query_recalls_nothing_and_image_only_messages_are_skipped() -> None:
    store = InMemoryVectorStore()
    m = LongTermMemory(FakeEmbedder(), store)
    await m.store(
        [Message(Role.USER, [ImageBlock(PNG, "image/png")]), user_message("a cat photo")],
        session="s",
    )
    assert await store.count() == 1
    assert await m.retrieve([ImageBlock(PNG, "image/png")], top_k=3, session="s") == []
    assert await m.retrieve([], top_k=3, session="s") == []


async def test_threshold_and_extra_filter() -> None:
    m = memory(score_threshold=0.99)
    await m.store([user_message("alpha beta"), user_message("gamma delta")], session="s")
    found = await m.retrieve([TextBlock("alpha beta")], session="s")
    assert [s.message.text for s in found] == ["alpha beta"]
    found = await m.retrieve([TextBlock("alpha beta")], session="s", score_threshold=-1.0)
    assert len(found) == 2
    tagged = Message(Role.USER, [TextBlock("alpha beta")], metadata={"kind": "fact"})
    await m.store([tagged], session="s")
    found = await m.retrieve(
        [TextBlock("alpha")], session="s", score_threshold=-1.0, filter={"kind": "fact"}
    )
    assert [s.message.metadata["kind"] for s in found] == ["fact"]


async def test_no_threshold_by_default_recalls_the_best_whatever_their_score() -> None:
    # The library has no default threshold (scores depend on the embedder); the chat sets one.
    m = memory(top_k=2)
    assert m.score_threshold is None
    await m.store([user_message("alpha beta"), user_message("trains leave at noon")], session="s")
    found = await m.retrieve([TextBlock("alpha beta")], session="s")
    assert [s.message.text for s in found] == ["alpha beta", "trains leave at noon"]
    assert found[1].score < 0.3
    with_threshold = memory(top_k=2, score_threshold=0.3)
    await with_threshold.store(
        [user_message("alpha beta"), user_message("trains leave at noon")], session="s"
    )
    found = await with_threshold.retrieve([TextBlock("alpha beta")], session="s")
    assert [s.message.text for s in found] == ["alpha beta"]


@pytest.mark.parametrize("bad", ["0.3", True, float("nan"), [0.3]])
def test_a_threshold_that_is_not_a_number_is_refused(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="score_threshold"):
        memory(score_threshold=bad)


async def test_token_budget_drops_the_lowest_scores_first() -> None:
    m = memory(top_k=3)
    await m.store(
        [user_message("apples " * 4), user_message("apples pears " * 4), user_message("kiwis")],
        session="s",
    )
    everything = await m.retrieve([TextBlock("apples")], session="s")
    assert len(everything) == 3
    first_cost = (len(everything[0].message.text.encode()) + 3) // 4
    found = await m.retrieve([TextBlock("apples")], session="s", token_budget=first_cost)
    assert [s.id for s in found] == [everything[0].id]
    assert await m.retrieve([TextBlock("apples")], session="s", token_budget=0) == []

    class PerMessage:
        def count(self, message: Message) -> int:
            return 10

    counted = memory(token_budget=25, estimator=PerMessage())
    await counted.store([user_message("a b"), user_message("a c"), user_message("a d")])
    assert len(await counted.retrieve([TextBlock("a")], top_k=3)) == 2


async def test_batch_embedder_and_bulk_store_are_used_once() -> None:
    calls: list[int] = []

    class CountingStore(InMemoryVectorStore):
        async def upsert_batch(self, entries: Sequence[Any]) -> None:
            calls.append(len(entries))
            await super().upsert_batch(entries)

    embedder = FakeEmbedder()
    m = LongTermMemory(embedder, CountingStore())
    await m.store([user_message("one"), user_message("two"), user_message("three")])
    assert (embedder.batch_calls, embedder.embed_calls) == (1, 0)
    assert calls == [3]
    # One input with nothing to embed: the batch falls back to one call per input.
    await m.store([user_message("four"), Message(Role.USER, [ImageBlock(PNG, "image/png")])])
    assert embedder.embed_calls == 2
    assert calls == [3, 1]


async def test_plain_embedder_and_plain_store_fall_back() -> None:
    class PlainEmbedder:
        def __init__(self) -> None:
            self.inner = FakeEmbedder()

        async def embed(self, blocks: Sequence[ContentBlock]) -> Any:
            return await self.inner.embed(blocks)

    class PlainStore:
        def __init__(self) -> None:
            self.inner = InMemoryVectorStore()
            self.upserts = 0

        async def upsert(self, id: str, vector: Vector, message: Message) -> None:
            self.upserts += 1
            await self.inner.upsert(id, vector, message)

        async def search(
            self, vector: Vector, options: SearchOptions | None = None
        ) -> list[ScoredMessage]:
            return await self.inner.search(vector, options)

        async def delete(self, id: str) -> None:
            await self.inner.delete(id)

    store = PlainStore()
    m = LongTermMemory(PlainEmbedder(), store)
    await m.store([user_message("one"), user_message("two")], session="x")
    assert store.upserts == 2
    assert len(await m.retrieve([TextBlock("one")], top_k=5, session="x")) == 2


async def test_chunker_chunks_are_stored_with_their_metadata() -> None:
    class Halves:
        def chunk(
            self, blocks: Sequence[ContentBlock], metadata: dict[str, Any] | None = None
        ) -> list[Chunk]:
            words = " ".join(b.text for b in blocks if isinstance(b, TextBlock)).split()
            half = len(words) // 2
            return [
                Chunk([TextBlock(" ".join(part))], {**(metadata or {}), "chunk_index": i})
                for i, part in enumerate((words[:half], words[half:]))
            ]

    store = InMemoryVectorStore()
    m = LongTermMemory(FakeEmbedder(), store, chunker=Halves())
    await m.store([user_message("red green blue yellow")], session="s")
    assert await store.count() == 2
    found = await m.retrieve([TextBlock("yellow blue")], top_k=1, session="s")
    assert found[0].message.text == "blue yellow"
    metadata = found[0].message.metadata
    record = {
        "memory_state",
        *(k for k in metadata if k.startswith("goagent.") and k[8:] != "provenance"),
    }
    assert {k: v for k, v in metadata.items() if k not in record} == {
        "role": "user",
        "chunk_index": 1,
        "session": "s",
        "goagent.provenance": "user",
    }
    assert metadata["memory_state"] == "current"  # each chunk carries the memory's record
    assert found[0].id.endswith(":1")


def test_bad_configuration_is_rejected_early() -> None:
    with pytest.raises(ConfigurationError, match="embedder"):
        LongTermMemory(object(), InMemoryVectorStore())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="VectorStore"):
        LongTermMemory(FakeEmbedder(), object())  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="top_k"):
        memory(top_k=0)
    with pytest.raises(ConfigurationError, match="estimator"):
        memory(estimator=len)


# -- with a real Agent ------------------------------------------------------------------------


def recalled_block(provider: ScriptedProvider, call: int = 0) -> str:
    texts = [m.text for m in provider.requests[call].messages if "<recalled_memories>" in m.text]
    assert len(texts) <= 1
    return texts[0] if texts else ""


@pytest.mark.needs_extra("vector")
async def test_agents_sharing_a_store_never_recall_each_others_memories(tmp_path: Path) -> None:
    async with SqliteVecStore(tmp_path / "memory.db", dimensions=64) as store:
        shared = LongTermMemory(FakeEmbedder(64), store, top_k=5)
        alice_p = ScriptedProvider("Noted.", "Your colour is blue.")
        bob_p = ScriptedProvider("Noted.", "Your colour is green.")
        alice = Agent(provider=alice_p, model="m", name="alice", long_term_memory=shared)
        bob = Agent(provider=bob_p, model="m", name="bob", long_term_memory=shared)

        await alice.run("my favourite colour is blue")
        await bob.run("my favourite colour is green")
        assert await store.count() == 4
        assert recalled_block(alice_p, 0) == ""  # nothing stored yet for alice

        await alice.run("what is my favourite colour?")
        await bob.run("what is my favourite colour?")
        alice_recall = recalled_block(alice_p, 1)
        bob_recall = recalled_block(bob_p, 1)
        assert "my favourite colour is blue" in alice_recall
        assert "green" not in alice_recall
        assert "my favourite colour is green" in bob_recall
        assert "blue" not in bob_recall
        # The recall is one delimited context block before the new user message, not fake turns.
        sent = alice_p.requests[1].messages
        assert sent[-1].text == "what is my favourite colour?"
        assert sent[-2].text.startswith("<recalled_memories>")
        assert sent[-2].text.rstrip().endswith("</recalled_memories>")
        assert all(m.role == Role.USER for m in sent)

    # A new agent instance on the same file remembers (long-term memory across restarts).
    async with SqliteVecStore(tmp_path / "memory.db", dimensions=64) as store:
        again = ScriptedProvider("Blue.")
        agent = Agent(
            provider=again,
            model="m",
            name="alice",
            long_term_memory=LongTermMemory(FakeEmbedder(64), store),
        )
        await agent.run("favourite colour?")
        assert "my favourite colour is blue" in recalled_block(again)


async def test_an_image_only_prompt_does_not_fail_the_run() -> None:
    m = memory()
    await m.store([user_message("a photo of my cat")], session="")
    p = ScriptedProvider("A cat.")
    agent = Agent(provider=p, model="m", long_term_memory=m)
    answer = (await agent.run([ImageBlock(PNG, "image/png")])).text
    assert answer == "A cat."
    assert recalled_block(p) == ""


async def test_plain_embedder_embeds_chunks_concurrently_with_a_limit() -> None:
    import asyncio

    active = peak = 0

    class Slow:
        def __init__(self) -> None:
            self.inner = FakeEmbedder()

        async def embed(self, blocks: Sequence[ContentBlock]) -> Any:
            nonlocal active, peak
            active += 1
            peak = max(peak, active)
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            active -= 1
            return await self.inner.embed(blocks)

    m = LongTermMemory(Slow(), InMemoryVectorStore(), max_concurrency=3)
    await m.store([user_message(f"message {i}") for i in range(10)])
    assert peak == 3


async def test_embedder_and_store_errors_propagate() -> None:
    class Failing:
        async def embed(self, blocks: Sequence[ContentBlock]) -> Any:
            raise RuntimeError("embedding service down")

    m = LongTermMemory(Failing(), InMemoryVectorStore())
    with pytest.raises(RuntimeError, match="embedding service down"):
        await m.store([user_message("x")])
    with pytest.raises(RuntimeError, match="embedding service down"):
        await m.retrieve([TextBlock("x")], top_k=1)

    class WrongSize(FakeEmbedder):
        async def embed_batch(self, inputs: Sequence[Sequence[ContentBlock]]) -> Any:
            return (await super().embed_batch(inputs))[:1]

    with pytest.raises(ValueError, match="returned 1 vectors for 2 inputs"):
        await LongTermMemory(WrongSize(), InMemoryVectorStore()).store(
            [user_message("a"), user_message("b")]
        )
