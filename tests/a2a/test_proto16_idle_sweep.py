"""An idle A2A server forgets too (docs/a2a.md, "How long a context is kept"): the server's
lifespan sweeps the contexts idle past ``forget_after`` without a message arriving, and stops
sweeping at shutdown. The clock and the sweep's waits are the test's (tests/sweep_ticks.py)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a_helpers import free_socket, serving
from a2a_helpers import send_message as _message
from a2a_helpers import stored_sessions as _sessions
from sweep_ticks import Ticks  # tests/sweep_ticks.py

from goagent_py import Agent
from goagent_py.a2a import a2a_app
from goagent_py.memory import ShortTermMemory, SQLiteStorage
from goagent_py.testing import FunctionProvider

pytestmark = pytest.mark.slow


async def test_an_idle_server_forgets_a_context_idle_past_forget_after(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks = Ticks(monkeypatch)
    path = str(tmp_path / "a2a.db")
    memory = ShortTermMemory(SQLiteStorage(path, session_id="helper"))
    agent = Agent(provider=FunctionProvider(lambda r: "ok"), model="m", short_term_memory=memory)
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with (
        serving(a2a_app(agent, url=url, forget_after=100), sock),
        httpx.AsyncClient(timeout=60) as http,
    ):
        assert await ticks.next_wait() == 100  # nothing known: the next sweep within 100 s
        for context in ("ctx-old", "ctx-new"):
            answer = await http.post(
                url + "/",
                json=_message("hi", f"{context}-1", context),
                headers={"A2A-Version": "1.0"},
            )
            assert answer.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"
            ticks.now += 60
        assert {"helper/a2a/ctx-old", "helper/a2a/ctx-new"} <= _sessions(path)
        # ctx-old idle 120 s, ctx-new 60 s; no message arrives. The next sweep waits until
        # ctx-new is due (idle 100 s).
        assert await ticks.sweep_after(0) == 40
        kept = _sessions(path)
        assert "helper/a2a/ctx-old" not in kept
        assert "helper/a2a-sent/ctx-old" not in kept
        assert {"helper/a2a/ctx-new", "helper/a2a-sent/ctx-new"} <= kept
        await ticks.sweep_after(40)
        assert not [s for s in _sessions(path) if "ctx-" in s]
    await memory.storage.aclose()


async def test_a_factorys_stored_conversation_is_the_users_and_outlives_forgetting(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rule (docs/a2a.md, "How long a context is kept"): the server forgets what it made
    # (its session of the context, the records of its messages); a factory's agent keeps its
    # conversation where the factory put it, and that stays.
    ticks = Ticks(monkeypatch)
    path = str(tmp_path / "mine.db")
    provider = FunctionProvider(
        lambda r: " | ".join(m.text for m in r.messages if m.role.value == "user")
    )
    opened: list[SQLiteStorage] = []

    def make(context_id: str) -> Agent:
        opened.append(SQLiteStorage(path, session_id=f"mine/{context_id}"))
        return Agent(provider=provider, model="m", short_term_memory=ShortTermMemory(opened[-1]))

    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    async with (
        serving(a2a_app(make, name="mine", url=url, forget_after=100), sock),
        httpx.AsyncClient(timeout=60) as http,
    ):
        await ticks.next_wait()

        async def say(text: str, message_id: str) -> str:
            answer = await http.post(
                url + "/", json=_message(text, message_id, "ctx-1"), headers={"A2A-Version": "1.0"}
            )
            task = answer.json()["result"]["task"]
            return "".join(p["text"] for a in task["artifacts"] for p in a["parts"])

        assert await say("I am Ana", "m-1") == "I am Ana"
        await ticks.sweep_after(101)  # ctx-1 is forgotten: the server's session of it goes
        assert "mine/ctx-1" in _sessions(path)  # the factory's conversation stays
        assert await say("who am I?", "m-2") == "I am Ana | who am I?"
    assert len(opened) == 2  # the forgotten context's next message asked the factory again
    for storage in opened:
        await storage.aclose()
