"""Chroma specifics: persistence, what the collection records, names, the missing extra."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from goagent_py.errors import ConfigurationError, MissingExtraError
from goagent_py.memory.vector.base import SearchOptions, UpsertEntry
from goagent_py.messages import Message, Role, TextBlock

pytest.importorskip("chromadb", reason="the chroma extra is not installed")

from goagent_py.memory.vector.chroma import ChromaStore


def msg(text: str, **metadata: object) -> Message:
    return Message(Role.USER, [TextBlock(text)], metadata=dict(metadata))


async def test_chroma_persists_across_reopen_and_refuses_other_settings(tmp_path: Path) -> None:
    path = tmp_path / "chroma"
    async with ChromaStore(path, collection="notes", dimensions=3) as store:
        await store.upsert("a", [1.0, 0.0, 0.0], msg("remember me", session="alice", n=2))
    async with ChromaStore(path, collection="notes", dimensions=3) as store:
        assert await store.count() == 1
        [hit] = await store.search([1.0, 0.0, 0.0], SearchOptions(filter={"session": "alice"}))
        assert hit.message.text == "remember me"
        assert hit.message.metadata == {"session": "alice", "n": 2}  # the int comes back
    async with ChromaStore(path, collection="notes", dimensions=4) as other:
        with pytest.raises(ConfigurationError, match="holds 3-dimensional vectors"):
            await other.count()
    async with ChromaStore(path, collection="notes", dimensions=3, metric="l2") as other:
        with pytest.raises(ConfigurationError, match="made with metric='cosine'"):
            await other.count()


async def test_chroma_ties_break_by_id_beyond_the_first_results(tmp_path: Path) -> None:
    async with ChromaStore(tmp_path / "c", dimensions=3) as store:
        await store.upsert_batch(
            [_entry(f"e{i:02d}") for i in reversed(range(40))]  # 40 identical vectors
        )
        hits = await store.search([1.0, 0.0, 0.0], SearchOptions(top_k=3))
        assert [h.id for h in hits] == ["e00", "e01", "e02"]


def _entry(id: str) -> UpsertEntry:
    return UpsertEntry(id, [1.0, 0.0, 0.0], msg(id))


@pytest.mark.parametrize("name", ["ab", "_x_", "x_", "bad-name", "a" * 64, "x y"])
def test_chroma_collection_names_are_checked_at_construction(name: str, tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match="collection name"):
        ChromaStore(tmp_path / "c", collection=name, dimensions=3)


def test_chroma_missing_extra_names_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "chromadb", None)
    with pytest.raises(MissingExtraError, match=r"goagent-py\[chroma\]"):
        ChromaStore(tmp_path / "c", dimensions=3)
