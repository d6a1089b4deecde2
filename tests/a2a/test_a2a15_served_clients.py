"""One server, many A2A clients (docs/a2a.md, "One conversation per client"): each context has
its own conversation, but the served agent's tools and their dispatch (circuit breakers, rate
limits) are the server's, whichever context calls them."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from a2a.types import TaskState
from a2a_helpers import (
    answer_of,
    answered_across_a_restart,
    free_socket,
    post_task,
    serving,
    url_of,
)
from down_host import DownHost  # tests/down_host.py
from test_a2a_server import send
from wiping import RAN, wipe  # tests/wiping.py

from goagent_py import Agent, tool
from goagent_py.a2a import a2a_app
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage.in_memory import InMemoryStorage
from goagent_py.testing import ScriptedProvider, tool_call_response

pytestmark = pytest.mark.slow


def _task(events: list[Any]) -> Any:
    last = events[-1]
    assert last.HasField("task"), last
    return last.task


def _text(task: Any) -> str:
    return "".join(p.text for a in task.artifacts for p in a.parts)


async def test_a_tools_circuit_breaker_is_the_servers_whichever_context_calls_it() -> None:
    host = DownHost()
    agent = host.agent(name="h", short_term_memory=ShortTermMemory(InMemoryStorage()))
    sock = free_socket()
    async with serving(a2a_app(agent, url=url_of(sock)), sock) as url:
        for context in ("ctx-a", "ctx-b", "ctx-c"):
            task = _task(await send(url, "get it", streaming=False, context_id=context))
            assert task.status.state == TaskState.TASK_STATE_COMPLETED
        # Two failures, from two clients, open the tool's one circuit: the third client's
        # call is refused without reaching the host (each client had a breaker of its own).
        assert host.calls == ["fetch", "fetch"]
        assert "circuit" in _text(task).lower(), _text(task)


# -- a message sent again (docs/a2a.md, "A message sent again") ----------------------------------


def _sent(text: str, message_id: str, context_id: str, method: str = "SendMessage") -> Any:
    return {
        "jsonrpc": "2.0",
        "id": message_id,
        "method": method,
        "params": {
            "message": {
                "role": "ROLE_USER",
                "messageId": message_id,
                "contextId": context_id,
                "parts": [{"text": text}],
            }
        },
    }


async def test_a_message_sent_again_is_answered_with_its_task_not_run_again() -> None:
    provider = ScriptedProvider("First answer.", "Second answer.")
    agent = Agent(
        provider=provider, model="m", short_term_memory=ShortTermMemory(InMemoryStorage())
    )
    sock = free_socket()
    async with (
        serving(a2a_app(agent, url=url_of(sock)), sock) as url,
        httpx.AsyncClient(timeout=60) as http,
    ):
        first = await post_task(http, url, _sent("hello", "m-1", "ctx-1"))
        again = await post_task(http, url, _sent("hello", "m-1", "ctx-1"))
    assert len(provider.requests) == 1  # one turn
    assert again["id"] == first["id"]
    assert again["status"]["state"] == first["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answer_of(again) == answer_of(first) == "First answer."


async def test_an_approval_sent_again_after_it_went_through_is_not_a_new_message() -> None:
    RAN.clear()
    provider = ScriptedProvider(
        tool_call_response(("wipe", {"target": "disk"})), "Wiped the disk.", "Never."
    )
    agent = Agent(
        provider=provider,
        model="m",
        tools=[wipe],
        short_term_memory=ShortTermMemory(InMemoryStorage()),
    )
    sock = free_socket()
    async with (
        serving(a2a_app(agent, url=url_of(sock)), sock) as url,
        httpx.AsyncClient(timeout=60) as http,
    ):
        asked = await post_task(http, url, _sent("wipe the disk", "m-1", "ctx-ops"))
        assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        done = await post_task(http, url, _sent("approved", "m-2", "ctx-ops"))
        again = await post_task(http, url, _sent("approved", "m-2", "ctx-ops"))  # a retry
    assert RAN == ["disk"]
    assert len(provider.requests) == 2  # "approved" was never a new turn
    assert again["id"] == done["id"]
    assert answer_of(again) == answer_of(done) == "Wiped the disk."
    assert again["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_a_copy_sent_while_the_message_runs_waits_and_gets_the_same_task() -> None:
    started, release = asyncio.Event(), asyncio.Event()
    calls: list[str] = []

    @tool
    async def slow() -> str:
        """Work until released."""
        calls.append("slow")
        started.set()
        await release.wait()
        return "done"

    provider = ScriptedProvider(tool_call_response(("slow", {})), "Finished.", "Never.")
    agent = Agent(provider=provider, model="m", tools=[slow])
    sock = free_socket()
    async with (
        serving(a2a_app(agent, url=url_of(sock)), sock) as url,
        httpx.AsyncClient(timeout=120) as one,
        httpx.AsyncClient(timeout=120) as two,
    ):
        first = asyncio.create_task(post_task(one, url, _sent("work", "m-1", "ctx-1")))
        await started.wait()
        copy = asyncio.create_task(post_task(two, url, _sent("work", "m-1", "ctx-1")))
        release.set()
        answers = await asyncio.gather(first, copy)
    assert calls == ["slow"]
    assert answers[0]["id"] == answers[1]["id"]
    assert [answer_of(a) for a in answers] == ["Finished.", "Finished."]


async def test_a_message_sent_again_after_a_restart_is_answered_from_the_stored_record(
    tmp_path: Any,
) -> None:
    path = str(tmp_path / "a2a.db")
    provider = ScriptedProvider("Stored answer.", "Never.")
    # The second: a restarted server on the same file.
    tasks = await answered_across_a_restart(
        path, provider, lambda http, url: post_task(http, url, _sent("hello", "m-1", "ctx-1"))
    )
    assert len(provider.requests) == 1
    assert tasks[1]["id"] == tasks[0]["id"]
    assert tasks[1]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answer_of(tasks[1]) == "Stored answer."


async def test_a_message_sent_again_over_the_stream_gets_its_task() -> None:
    from a2a.client import ClientConfig, create_client
    from a2a.types import Message, Part, SendMessageRequest
    from a2a.types import Role as A2ARole

    provider = ScriptedProvider("Only once.", "Never.")
    agent = Agent(provider=provider, model="m")
    sock = free_socket()
    async with serving(a2a_app(agent, url=url_of(sock)), sock) as url:
        found = []
        for _ in range(2):
            client = await create_client(url, client_config=ClientConfig(streaming=True))
            try:
                message = Message(
                    role=A2ARole.ROLE_USER,
                    message_id="m-1",
                    context_id="ctx-1",
                    parts=[Part(text="hi")],
                )
                events = [e async for e in client.send_message(SendMessageRequest(message=message))]
            finally:
                await client.close()
            found.append(events)
    assert len(provider.requests) == 1
    [again] = found[1]
    first_id = next(e.task.id for e in found[0] if e.HasField("task"))
    assert again.task.id == first_id
    assert again.task.status.state == TaskState.TASK_STATE_COMPLETED
    assert _text(again.task) == "Only once."
