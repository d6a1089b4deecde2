"""The memories panel's route: ``GET /api/memories/history`` (issue 31).

A user's current facts with their change history (what changed, when, which decider, from which
message); ``?all=1`` adds the memories a newer fact replaced or a retraction deleted. Never
another user's memories. A server without a long-term memory that can list answers
``"enabled": false`` (200: the page asks on every load).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from goagent_py import Agent
from goagent_py.memory.deciders import RuleDecider
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import user_message
from goagent_py.serve import ThreadContext, create_app
from goagent_py.testing import FakeEmbedder, ScriptedProvider


def _app(tmp_path: Path, ltm: Any) -> Any:
    def factory(ctx: ThreadContext) -> Agent:
        return Agent(
            provider=ScriptedProvider("ok"),
            model="scripted",
            name=ctx.memory_scope,
            short_term_memory=ctx.short_term_memory,
            long_term_memory=ltm,
        )

    return create_app(factory, storage_path=str(tmp_path / "serve.db"), long_term_memory=ltm)


def _client(app: Any) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1")


async def test_history_lists_current_facts_with_their_changes(tmp_path: Path) -> None:
    ltm = LongTermMemory(FakeEmbedder(64), InMemoryVectorStore(), decider=RuleDecider())
    # The server without auth serves the user "local" (scope "user-local").
    await ltm.store([user_message("I live in Lisbon.")], session="user-local")
    await ltm.store([user_message("I moved to Porto last month.")], session="user-local")
    await ltm.store([user_message("My phone number is 555-0100.")], session="user-local")
    await ltm.store([user_message("Forget my phone number.")], session="user-local")
    await ltm.store([user_message("I live in Oslo.")], session="user-bob")
    app = _app(tmp_path, ltm)
    async with _client(app) as client:
        r = await client.get("/api/memories/history")
        assert r.status_code == 200
        data = r.json()
        assert data["enabled"] is True
        [porto] = data["memories"]
        assert porto["text"] == "I live in Porto."
        assert porto["state"] == "current"
        assert porto["id"].startswith("user-local:")
        assert porto["created_at"] is not None
        assert porto["invalid_at"] is None
        assert [(c["op"], c["decider"], c["previous"], c["text"]) for c in porto["history"]] == [
            ("add", "rules", "", "I live in Lisbon."),
            ("update", "rules", "I live in Lisbon.", "I live in Porto."),
        ]
        assert all(c["at"] and c["source_message"] for c in porto["history"])

        everything = (await client.get("/api/memories/history", params={"all": "1"})).json()
        states = {m["text"]: m["state"] for m in everything["memories"]}
        assert states == {
            "I live in Lisbon.": "superseded",
            "I live in Porto.": "current",
            "My phone number is 555-0100.": "deleted",
        }
        lisbon = next(m for m in everything["memories"] if m["text"] == "I live in Lisbon.")
        assert lisbon["superseded_by"] == porto["id"]
        assert lisbon["invalid_at"] is not None
        # Bob's Oslo is his alone.
        assert "I live in Oslo." not in states
    await app.aclose()


async def test_history_is_off_without_a_long_term_memory(tmp_path: Path) -> None:
    app = _app(tmp_path, None)
    async with _client(app) as client:
        r = await client.get("/api/memories/history")
        assert r.status_code == 200
        assert r.json() == {
            "enabled": False,
            "memories": [],
            "reason": "this server has no long-term memory",
        }
    await app.aclose()


async def test_history_is_off_for_a_store_that_cannot_list(tmp_path: Path) -> None:
    class Unlistable:
        """A store without entries(): recall works, listing does not."""

        def __init__(self) -> None:
            self.inner = InMemoryVectorStore()

        async def upsert(self, id: str, vector: Any, message: Any) -> None:
            await self.inner.upsert(id, vector, message)

        async def search(self, vector: Any, options: Any = None) -> Any:
            return await self.inner.search(vector, options)

        async def delete(self, id: str) -> None:
            await self.inner.delete(id)

    app = _app(tmp_path, LongTermMemory(FakeEmbedder(64), Unlistable()))
    async with _client(app) as client:
        data = (await client.get("/api/memories/history")).json()
        assert data["enabled"] is False
        assert "cannot list its entries" in data["reason"]
    await app.aclose()


@pytest.mark.parametrize("path", ["/api/memories/history"])
async def test_forget_does_not_take_the_history_route(tmp_path: Path, path: str) -> None:
    # DELETE /api/memories/history is a forget of an id "history": not one of the user's.
    ltm = LongTermMemory(FakeEmbedder(64), InMemoryVectorStore())
    app = _app(tmp_path, ltm)
    async with _client(app) as client:
        assert (await client.delete(path)).status_code == 404
    await app.aclose()
