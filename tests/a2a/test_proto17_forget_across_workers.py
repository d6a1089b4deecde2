"""A worker forgets only what no run holds, wherever it runs (docs/a2a.md, "How long a context
is kept"): each server's ledger knows its own messages only, so a context idle in one worker's
view may be running on another worker on the same storage. Before, the first worker deleted the
conversation under the other's run (the run's turn then stood alone, the turn before it gone);
now a conversation whose run hold is taken is kept, and seen again as in use."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a_helpers import free_socket, send_message, serving
from sweep_ticks import Ticks

from goagent_py import Agent
from goagent_py.a2a import a2a_app
from goagent_py.memory import ShortTermMemory, SQLiteStorage
from goagent_py.memory._clients import client_session_id
from goagent_py.testing import FunctionProvider

pytestmark = pytest.mark.slow


async def _send(http: httpx.AsyncClient, url: str, body: Any) -> Any:
    answer = (await http.post(url + "/", json=body, headers={"A2A-Version": "1.0"})).json()
    assert "result" in answer, answer
    return answer["result"]["task"]


async def test_a_worker_does_not_forget_a_context_running_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ticks = Ticks(monkeypatch)
    path = tmp_path / "a2a.db"
    asked, go = asyncio.Event(), asyncio.Event()

    async def slow(request: Any) -> str:
        asked.set()
        await go.wait()
        return "second answer"

    storages = [SQLiteStorage(path, session_id="served") for _ in range(2)]
    agents = [
        Agent(provider=FunctionProvider(lambda r: "first answer"), model="m"),
        Agent(provider=FunctionProvider(slow), model="m"),
    ]
    socks = [free_socket(), free_socket()]
    apps = [
        a2a_app(
            agent.replace(short_term_memory=ShortTermMemory(storage)),
            url=f"http://127.0.0.1:{sock.getsockname()[1]}",
            forget_after=100.0,
        )
        for agent, storage, sock in zip(agents, storages, socks, strict=True)
    ]
    async with (
        asyncio.timeout(300),
        serving(apps[0], socks[0]) as first,
        serving(apps[1], socks[1]) as second,
        httpx.AsyncClient(timeout=300) as http,
    ):
        done = await _send(http, first, send_message("one", "m-1", "ctx"))
        assert done["status"]["state"] == "TASK_STATE_COMPLETED"
        running = asyncio.create_task(_send(http, second, send_message("two", "m-2", "ctx")))
        await asked.wait()  # the second worker runs the context's next message
        ticks.now += 1000.0  # idle past forget_after, in the first worker's view
        other = await _send(http, first, send_message("hi", "m-3", "other"))  # it forgets
        assert other["status"]["state"] == "TASK_STATE_COMPLETED"
        go.set()
        task = await running
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    async with SQLiteStorage(path, session_id=client_session_id("served", "a2a", "ctx")) as kept:
        stored = [m.text for m in await kept.load()]
    assert stored == ["one", "first answer", "two", "second answer"]
    for storage in storages:
        await storage.aclose()
