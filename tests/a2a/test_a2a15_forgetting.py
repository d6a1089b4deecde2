"""A server that meets many contexts keeps a bounded number of them (docs/a2a.md, "How long a
context is kept"): past ``max_kept_contexts`` (or idle ``forget_after``), the context idle
longest is forgotten, its stored conversation, remembered facts and message records deleted,
never one whose task is running; a restarted server counts the contexts stored before it."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from a2a_helpers import free_socket, serving
from a2a_helpers import send_message as _message
from a2a_helpers import stored_sessions as _sessions

from goagent_py import Agent, tool
from goagent_py.a2a import a2a_app
from goagent_py.memory import LongTermMemory, ShortTermMemory, SQLiteStorage
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import Role
from goagent_py.testing import FakeEmbedder, FunctionProvider, tool_call_response

pytestmark = pytest.mark.slow


def _url(sock: Any) -> str:
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


async def _say(http: httpx.AsyncClient, url: str, text: str, context_id: str) -> Any:
    body = _message(text, f"{context_id}-{text}", context_id)
    answer = (await http.post(url + "/", json=body, headers={"A2A-Version": "1.0"})).json()
    return answer["result"]["task"]


def _echo() -> FunctionProvider:
    return FunctionProvider(lambda r: " | ".join(m.text for m in r.messages if m.role is Role.USER))


async def test_past_max_kept_contexts_the_one_idle_longest_is_forgotten_everywhere(
    tmp_path: Any,
) -> None:
    path = str(tmp_path / "a2a.db")
    store = InMemoryVectorStore()
    memory = ShortTermMemory(SQLiteStorage(path, session_id="helper"))
    agent = Agent(
        provider=_echo(),
        model="m",
        name="h",
        short_term_memory=memory,
        long_term_memory=LongTermMemory(FakeEmbedder(64), store),
    )
    sock = free_socket()
    async with (
        serving(a2a_app(agent, url=_url(sock), max_kept_contexts=2), sock) as url,
        httpx.AsyncClient(timeout=60) as http,
    ):
        await _say(http, url, "I am Ana", "ctx-ana")
        await _say(http, url, "I am Bob", "ctx-bob")
        remembered = len(await store.entries())
        assert remembered >= 2
        await _say(http, url, "I am Cy", "ctx-cy")  # a third: Ana's, idle longest, goes
        assert not any("ana" in s for s in _sessions(path))
        assert {s for s in _sessions(path) if "/a2a/" in s} == {
            "helper/a2a/ctx-bob",
            "helper/a2a/ctx-cy",
        }
        # Each record is stored before its answer is sent: Bob's and Cy's are there.
        assert {s for s in _sessions(path) if "/a2a-sent/" in s} == {
            "helper/a2a-sent/ctx-bob",
            "helper/a2a-sent/ctx-cy",
        }
        assert not [s for s in await store.entries() if "Ana" in s.message.text]
        assert [s for s in await store.entries() if "Bob" in s.message.text]
        # Ana comes back: a new conversation (nothing of hers was kept), Bob's goes.
        again = await _say(http, url, "who am I?", "ctx-ana")
        assert "".join(p["text"] for a in again["artifacts"] for p in a["parts"]) == "who am I?"
        assert not any("bob" in s for s in _sessions(path))
    await memory.storage.aclose()


async def test_a_context_whose_task_runs_is_never_forgotten(tmp_path: Any) -> None:
    path = str(tmp_path / "a2a.db")
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Work until released."""
        started.set()
        await release.wait()
        return "done"

    def model(request: Any) -> Any:
        last = request.messages[-1]
        if last.role is Role.USER and last.text == "work":
            return tool_call_response(("slow", {}))
        return "answered " + last.text

    memory = ShortTermMemory(SQLiteStorage(path, session_id="helper"))
    agent = Agent(
        provider=FunctionProvider(model), model="m", tools=[slow], short_term_memory=memory
    )
    sock = free_socket()
    async with (
        serving(a2a_app(agent, url=_url(sock), max_kept_contexts=1), sock) as url,
        httpx.AsyncClient(timeout=120) as one,
        httpx.AsyncClient(timeout=120) as two,
    ):
        working = asyncio.create_task(_say(one, url, "work", "ctx-busy"))
        await started.wait()
        # Past the bound, but the only other context's task runs: it is kept.
        other = await _say(two, url, "hello", "ctx-other")
        assert other["status"]["state"] == "TASK_STATE_COMPLETED"
        release.set()
        done = await working
        assert done["status"]["state"] == "TASK_STATE_COMPLETED", done
    stored = SQLiteStorage(path, session_id="helper/a2a/ctx-busy")
    try:
        kept = await stored.load()
    finally:
        await stored.aclose()
    assert kept[0].role is Role.USER
    assert kept[0].text == "work"
    assert kept[-1].text == "answered done"
    await memory.storage.aclose()


async def test_a_restarted_server_counts_the_contexts_stored_before_it(tmp_path: Any) -> None:
    path = str(tmp_path / "a2a.db")
    for contexts in (["ctx-ana", "ctx-bob"], ["ctx-cy"]):
        memory = ShortTermMemory(SQLiteStorage(path, session_id="helper"))
        agent = Agent(provider=_echo(), model="m", short_term_memory=memory)
        sock = free_socket()
        async with (
            serving(a2a_app(agent, url=_url(sock), max_kept_contexts=2), sock) as url,
            httpx.AsyncClient(timeout=60) as http,
        ):
            for context in contexts:
                await _say(http, url, "hi", context)
        await memory.storage.aclose()
    # Ana's and Bob's were met before the restart: the oldest of them went for Cy's.
    kept = {s.split("/")[-1] for s in _sessions(path) if "ctx-" in s}
    assert len(kept) == 2
    assert "ctx-cy" in kept


async def test_a_contexts_message_records_are_bounded_the_oldest_dropped(tmp_path: Any) -> None:
    from goagent_py.a2a._sent import KEPT, Sent, SentMessages

    storage = SQLiteStorage(str(tmp_path / "a2a.db"), session_id="helper")
    sent = SentMessages(
        Agent(provider=_echo(), model="m", short_term_memory=ShortTermMemory(storage))
    )
    try:
        for i in range(3 * KEPT):
            await sent.keep("ctx-1", f"m-{i}", Sent(f"t-{i}", 3, f"answer {i}", ""))
        assert await sent.find("ctx-1", "m-0") is None
        for i in range(2 * KEPT, 3 * KEPT):  # at least the last KEPT
            found = await sent.find("ctx-1", f"m-{i}")
            assert found == Sent(f"t-{i}", 3, f"answer {i}", "")
        kept = SQLiteStorage(str(tmp_path / "a2a.db"), session_id="helper/a2a-sent/ctx-1")
        try:
            assert KEPT <= len(await kept.load()) <= 2 * KEPT
        finally:
            await kept.aclose()
        await sent.forget("ctx-1")
        assert await sent.find("ctx-1", f"m-{3 * KEPT - 1}") is None
    finally:
        await sent.aclose()
        await storage.aclose()
