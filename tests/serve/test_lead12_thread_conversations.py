"""A served thread is its own conversation: an agent factory that gives threads a memory of its
own (one conversation for every thread and user) is refused, never run (docs/serve.md)."""

from __future__ import annotations

from typing import Any

from goagent_py import Agent
from goagent_py.memory import InMemoryStorage, ShortTermMemory
from goagent_py.messages import Role
from goagent_py.serve import ThreadContext, create_app
from goagent_py.testing import ScriptedProvider


async def _thread(client: Any) -> str:
    r = await client.post("/api/threads", json={})
    assert r.status_code == 201
    return str(r.json()["id"])


async def test_a_factory_memory_shared_by_every_thread_is_refused(db: str, helpers: Any) -> None:
    provider = ScriptedProvider("Noted.", "Hello.", "Hello again.")
    shared = ShortTermMemory(InMemoryStorage())
    one = Agent(provider=provider, model="m", short_term_memory=shared)

    def factory(ctx: ThreadContext) -> Agent:
        return one  # ignores ctx.short_term_memory: every thread would be one conversation

    app = create_app(factory, storage_path=db)
    async with helpers.client_for(app) as client:
        first, second = await _thread(client), await _thread(client)
        r1 = await client.post(f"/api/threads/{first}/runs", json={"message": "my secret is 1234"})
        r2 = await client.post(f"/api/threads/{second}/runs", json={"message": "hi"})
    for request in provider.requests:
        users = [m.text for m in request.messages if m.role is Role.USER]
        assert not ("my secret is 1234" in users and "hi" in users)
    # Refused before any run: the memory is neither thread's conversation.
    assert provider.requests == []
    for r in (r1, r2):
        assert r.status_code == 500
        assert "ThreadContext.short_term_memory" in r.json()["error"]


async def test_a_factory_wrapping_the_threads_storage_in_its_own_window_is_fine(
    db: str, helpers: Any
) -> None:
    from goagent_py.memory import TokenWindow

    provider = ScriptedProvider("One.", "Two.")

    def factory(ctx: ThreadContext) -> Agent:
        memory = ShortTermMemory(ctx.short_term_memory.storage, TokenWindow(2000))
        return Agent(provider=provider, model="m", short_term_memory=memory)

    app = create_app(factory, storage_path=db)
    async with helpers.client_for(app) as client:
        tid = await _thread(client)
        await client.post(f"/api/threads/{tid}/runs", json={"message": "a"})
        await client.post(f"/api/threads/{tid}/runs", json={"message": "b"})
        msgs = (await client.get(f"/api/threads/{tid}/messages")).json()["messages"]
    assert [m["text"] for m in msgs] == ["a", "One.", "b", "Two."]


async def test_a_factory_scoping_long_term_memory_to_no_user_is_refused(
    db: str, helpers: Any
) -> None:
    from goagent_py.memory import LongTermMemory
    from goagent_py.memory.vector.in_memory import InMemoryVectorStore
    from goagent_py.serve import TokenAuth
    from goagent_py.testing import FakeEmbedder

    alice, bob = "a" * 20, "b" * 20
    ltm = LongTermMemory(FakeEmbedder(64), InMemoryVectorStore())
    provider = ScriptedProvider("Noted.", "Hi Bob.")

    def factory(ctx: ThreadContext) -> Agent:
        return Agent(
            provider=provider,
            model="m",
            name="assistant",  # not ctx.memory_scope: one scope for every user
            short_term_memory=ctx.short_term_memory,
            long_term_memory=ltm,
        )

    app = create_app(
        factory, storage_path=db, long_term_memory=ltm, auth=TokenAuth({alice: "alice", bob: "bob"})
    )
    async with helpers.client_for(app) as client:
        replies = []
        for token, text in ((alice, "My doctor is Dr. Secretson."), (bob, "Who is my doctor?")):
            headers = {"authorization": f"Bearer {token}"}
            tid = (await client.post("/api/threads", json={}, headers=headers)).json()["id"]
            replies.append(
                await client.post(
                    f"/api/threads/{tid}/runs", json={"message": text}, headers=headers
                )
            )
    everything = " ".join(m.text for r in provider.requests for m in r.messages) + " ".join(
        r.system_prompt or "" for r in provider.requests
    )
    assert "Secretson" not in everything.split("My doctor is Dr. Secretson.", 1)[-1]
    assert provider.requests == []
    for r in replies:
        assert r.status_code == 500
        assert "memory_scope" in r.json()["error"]
