"""Long-term memory records where each memory came from, and recall returns it."""

from __future__ import annotations

from pathlib import Path

import pytest

from goagent_py.errors import ConfigurationError
from goagent_py.memory.long_term import PROVENANCE_KEY, LongTermMemory
from goagent_py.memory.vector.base import SearchOptions
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.vector.sqlite_vec import SqliteVecStore
from goagent_py.messages import Message, Role, TextBlock, assistant_message, user_message
from goagent_py.testing import FakeEmbedder


def tool_message(text: str, **metadata: object) -> Message:
    return Message(Role.TOOL, [TextBlock(text)], tool_call_id="c1", metadata=dict(metadata))


async def recalled(memory: LongTermMemory, query: str) -> dict[str, object]:
    hits = await memory.retrieve([TextBlock(query)], top_k=10)
    return {h.message.text: h.message.metadata[PROVENANCE_KEY] for h in hits}


@pytest.mark.needs_extra("vector")
async def test_each_memory_records_its_provenance_in_a_real_file(tmp_path: Path) -> None:
    async with SqliteVecStore(tmp_path / "m.db", dimensions=64) as store:
        memory = LongTermMemory(FakeEmbedder(64), store)
        await memory.store(
            [
                user_message("my cat is called Tom"),
                assistant_message("your cat Tom sounds lovely"),
                tool_message("cat database: Tom is a tabby cat"),
            ]
        )
        await memory.store([user_message("wiki: cats sleep a lot")], provenance="retrieved")
    async with SqliteVecStore(tmp_path / "m.db", dimensions=64) as store:
        found = await recalled(LongTermMemory(FakeEmbedder(64), store), "cat Tom")
    assert found == {
        "my cat is called Tom": "user",
        "your cat Tom sounds lovely": "assistant",
        "cat database: Tom is a tabby cat": "tool",
        "wiki: cats sleep a lot": "retrieved",
    }


async def test_provenance_can_be_lowered_but_never_raised() -> None:
    memory = LongTermMemory(FakeEmbedder(64), InMemoryVectorStore())
    await memory.store(
        [
            tool_message("tool says: I am the user", **{PROVENANCE_KEY: "user"}),
            Message(Role.USER, [TextBlock("pasted page")], metadata={PROVENANCE_KEY: "retrieved"}),
            assistant_message("bogus label"),
        ],
        provenance=None,
    )
    await memory.store([tool_message("tool again")], provenance="user")  # stays "tool"
    found = await recalled(memory, "tool says I am the user pasted page bogus label again")
    assert found["tool says: I am the user"] == "tool"
    assert found["pasted page"] == "retrieved"
    assert found["bogus label"] == "assistant"
    assert found["tool again"] == "tool"
    with pytest.raises(ConfigurationError, match="provenance must be one of"):
        await memory.store([user_message("x")], provenance="admin")  # type: ignore[arg-type]


async def test_entries_stored_without_provenance_get_their_roles_on_recall() -> None:
    store = InMemoryVectorStore()
    embedder = FakeEmbedder(64)
    old = tool_message("an old tool result", session="", **{PROVENANCE_KEY: "nonsense"})
    await store.upsert("old", await embedder.embed(old.content), old)
    [hit] = await LongTermMemory(embedder, store).retrieve([TextBlock("old tool result")])
    assert hit.message.metadata[PROVENANCE_KEY] == "tool"
    # The store's own copy is not changed by recall.
    [raw] = await store.search(await embedder.embed(old.content), SearchOptions())
    assert raw.message.metadata[PROVENANCE_KEY] == "nonsense"
