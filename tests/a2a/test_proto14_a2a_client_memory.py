"""One rule for an agent with memory served to many clients (docs/a2a.md, "One conversation
per client"): each A2A context gets a conversation of its own in the served memory's storage
kind (kept across a restart when the storage is), and long-term memory scoped to the context
unless the server opts in to one memory shared by every client."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from a2a.types import TaskState
from a2a_helpers import free_socket, serving
from test_a2a_server import send

from goagent_py import Agent
from goagent_py.a2a import a2a_app
from goagent_py.errors import ConfigurationError
from goagent_py.memory import LongTermMemory, ShortTermMemory, SQLiteStorage
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.messages import Message, Role
from goagent_py.testing import FakeEmbedder, FunctionProvider


def _recalling(seen: list[str]) -> FunctionProvider:
    """Answers with every user message it was sent (recalled memories included), in order."""

    def answer(request: Any) -> str:
        text = " | ".join(m.text for m in request.messages if m.role is Role.USER)
        seen.append(text + " " + (request.system_prompt or ""))
        return text

    return FunctionProvider(answer)


def _answer(events: list[Any]) -> str:
    task = events[-1].task if events[-1].HasField("task") else None
    assert task is not None, events[-1]
    assert task.status.state == TaskState.TASK_STATE_COMPLETED, events[-1]
    return "".join(p.text for a in task.artifacts for p in a.parts)


async def _say(url: str, text: str, context_id: str) -> str:
    return _answer(await send(url, text, streaming=False, context_id=context_id))


def _stored_sessions(path: str) -> set[str]:
    with sqlite3.connect(path) as conn:
        return {row[0] for row in conn.execute("SELECT DISTINCT session_id FROM goagent_messages")}


@pytest.mark.slow
async def test_a_plain_agent_with_stored_memory_gives_each_context_its_own_kept_conversation(
    tmp_path: Any,
) -> None:
    path = str(tmp_path / "a2a.db")
    seen: list[str] = []

    def served() -> Agent:
        memory = ShortTermMemory(SQLiteStorage(path, session_id="helper"))
        return Agent(provider=_recalling(seen), model="m", name="h", short_term_memory=memory)

    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with serving(a2a_app(served(), url=url), sock) as url:  # was refused
        assert await _say(url, "I am Ana", "ctx-ana") == "I am Ana"
        assert await _say(url, "I am Bob", "ctx-bob") == "I am Bob"
        assert await _say(url, "who am I?", "ctx-ana") == "I am Ana | who am I?"
    # Each context's conversation is in the served file, under a key of its own (beside it,
    # the records of its messages: docs/a2a.md, "A message sent again").
    sessions = _stored_sessions(path)
    assert {s for s in sessions if "/a2a/" in s} == {"helper/a2a/ctx-ana", "helper/a2a/ctx-bob"}
    assert sessions - {"helper/a2a/ctx-ana", "helper/a2a/ctx-bob"} == {
        "helper/a2a-sent/ctx-ana",
        "helper/a2a-sent/ctx-bob",
    }
    # A restarted server (a new agent on the same file) continues each context.
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with serving(a2a_app(served(), url=url), sock) as url:
        assert await _say(url, "and now?", "ctx-bob") == "I am Bob | and now?"
    assert not any("Ana" in s for s in seen[1:2] + seen[3:])


def _ltm_agent(seen: list[str], ltm: LongTermMemory) -> Agent:
    return Agent(provider=_recalling(seen), model="m", name="h", long_term_memory=ltm)


@pytest.mark.slow
async def test_one_contexts_remembered_facts_are_not_recalled_in_another() -> None:
    ltm = LongTermMemory(FakeEmbedder(64), InMemoryVectorStore())
    seen: list[str] = []
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with serving(a2a_app(_ltm_agent(seen, ltm), url=url), sock) as url:
        await _say(url, "My doctor is Dr. Secretson.", "ctx-ana")
        await _say(url, "Who is my doctor?", "ctx-bob")
        await _say(url, "Who is my doctor?", "ctx-ana")
    assert "Secretson" not in seen[1]
    assert "Secretson" in seen[2].split("Who is my doctor?")[0] + seen[2]


@pytest.mark.slow
async def test_a_server_that_opts_in_shares_one_long_term_memory_across_contexts() -> None:
    ltm = LongTermMemory(FakeEmbedder(64), InMemoryVectorStore())
    seen: list[str] = []
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = a2a_app(_ltm_agent(seen, ltm), url=url, shared_memory=True)
    async with serving(app, sock) as url:
        await _say(url, "My doctor is Dr. Secretson.", "ctx-ana")
        await _say(url, "Who is my doctor?", "ctx-bob")
    assert "Secretson" in seen[1]


class _Unkeyed:
    """A storage of the user's own that keeps one conversation and cannot name another."""

    async def load(self) -> list[Message]:
        return []

    async def append(self, messages: Any) -> None:
        return None

    async def clear(self) -> None:
        return None


def test_a_memory_whose_storage_cannot_be_keyed_per_context_is_refused_with_what_to_do() -> None:
    agent = Agent(
        provider=FunctionProvider(lambda r: "x"),
        model="m",
        short_term_memory=ShortTermMemory(_Unkeyed()),
    )
    with pytest.raises(ConfigurationError, match="factory") as caught:
        a2a_app(agent, url="http://127.0.0.1:9000")
    assert "_Unkeyed" in str(caught.value)


class _SlowStorage:
    """A keyable storage whose first load waits for ``release``; it refuses use once closed
    (as a closed SQLite or PostgreSQL storage does)."""

    def __init__(self, gate: Any, loading: Any, log: list[str], session_id: str = "s") -> None:
        self.session_id = session_id
        self._gate, self._loading, self._log = gate, loading, log
        self._messages: list[Message] = []
        self.closed = False

    def for_session(self, session_id: str) -> _SlowStorage:
        return _SlowStorage(self._gate, self._loading, self._log, session_id)

    async def load(self) -> list[Message]:
        # The conversation's (not the records of its messages: docs/a2a.md).
        if self.session_id.endswith("/a2a/ctx-slow") and not self._gate.is_set():
            self._loading.set()
            await self._gate.wait()
        assert not self.closed, f"{self.session_id} used after it was closed"
        return list(self._messages)

    async def append(self, messages: Any) -> None:
        assert not self.closed, f"{self.session_id} used after it was closed"
        self._messages.extend(messages)

    async def clear(self) -> None:
        self._messages = []

    async def aclose(self) -> None:
        self._log.append(self.session_id)
        self.closed = True


@pytest.mark.slow
async def test_a_context_about_to_run_is_not_dropped_under_it_by_other_contexts() -> None:
    import asyncio

    gate, loading, closed = asyncio.Event(), asyncio.Event(), []
    storage = _SlowStorage(gate, loading, closed)
    seen: list[str] = []
    agent = Agent(provider=_recalling(seen), model="m", short_term_memory=ShortTermMemory(storage))
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with serving(a2a_app(agent, url=url, max_contexts=1), sock) as url:
        slow = asyncio.create_task(_say(url, "first", "ctx-slow"))
        await loading.wait()  # ctx-slow's task has its session and reads its conversation
        assert await _say(url, "other", "ctx-other") == "other"  # one context too many
        gate.set()
        assert await slow == "first"
        assert await _say(url, "second", "ctx-slow") == "first | second"


@pytest.mark.slow
@pytest.mark.needs_extra("postgres")
async def test_a_postgres_memory_gives_each_context_its_own_conversation_on_its_pool(
    pg_dsn: str,
) -> None:
    import uuid

    from goagent_py.memory import PostgresStorage

    table = "p14_" + uuid.uuid4().hex[:12]
    seen: list[str] = []
    for turn in range(2):  # the second: a restarted server on the same table
        storage = PostgresStorage(pg_dsn, session_id="helper", table=table, max_size=2)
        agent = Agent(
            provider=_recalling(seen), model="m", short_term_memory=ShortTermMemory(storage)
        )
        sock = free_socket()
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"
        try:
            async with serving(a2a_app(agent, url=url), sock) as url:
                if turn == 0:
                    assert await _say(url, "I am Ana", "ctx-ana") == "I am Ana"
                    assert await _say(url, "I am Bob", "ctx-bob") == "I am Bob"
                else:
                    assert await _say(url, "who?", "ctx-ana") == "I am Ana | who?"
            assert await storage.load() == []  # the served conversation itself: unused
            sessions = await storage.list_sessions()
        finally:
            await storage.aclose()
    assert sorted(sessions) == [  # beside each conversation, its messages' records
        "helper/a2a-sent/ctx-ana",
        "helper/a2a-sent/ctx-bob",
        "helper/a2a/ctx-ana",
        "helper/a2a/ctx-bob",
    ]
