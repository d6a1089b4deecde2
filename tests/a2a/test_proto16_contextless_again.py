"""A message sent without a ``contextId`` and sent again (the same ``messageId``) is known by
the storage the server is given, not by the process that saw it (docs/a2a.md, "A message sent
again"): a restarted server, or a second worker on the same SQLite file, answers it with the
task that answered it and never runs it again."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from a2a_helpers import (
    answer_of,
    answered_across_a_restart,
    free_socket,
    message_send_0_3,
    post_task,
    serving,
    url_of,
)

from goagent_py import Agent
from goagent_py.a2a import a2a_app
from goagent_py.memory import ShortTermMemory, SQLiteStorage
from goagent_py.messages import Role
from goagent_py.testing import FunctionProvider, ScriptedProvider, tool_call_response

pytestmark = pytest.mark.slow


def _contextless(text: str, message_id: str, *, task_id: str = "") -> Any:
    message: dict[str, Any] = {
        "role": "ROLE_USER",
        "messageId": message_id,
        "parts": [{"text": text}],
    }
    if task_id:
        message["taskId"] = task_id
    return {
        "jsonrpc": "2.0",
        "id": message_id,
        "method": "SendMessage",
        "params": {"message": message},
    }


async def test_a_contextless_message_sent_again_after_a_restart_is_not_run_again(
    tmp_path: Any,
) -> None:
    path = str(tmp_path / "a2a.db")
    provider = ScriptedProvider("Stored answer.", "Never.")
    # The second: a restarted server on the same file.
    tasks = await answered_across_a_restart(
        path, provider, lambda http, url: post_task(http, url, _contextless("hello", "m-1"))
    )
    assert len(provider.requests) == 1  # one turn, one stored conversation
    assert tasks[1]["id"] == tasks[0]["id"]
    assert tasks[1]["contextId"] == tasks[0]["contextId"]
    assert tasks[1]["status"]["state"] == "TASK_STATE_COMPLETED"
    assert answer_of(tasks[1]) == "Stored answer."


async def test_two_servers_on_one_file_answer_a_contextless_message_once(tmp_path: Any) -> None:
    path = str(tmp_path / "a2a.db")
    provider = ScriptedProvider("Only once.", "Never.")
    memories = [ShortTermMemory(SQLiteStorage(path, session_id="helper")) for _ in range(2)]
    agents = [Agent(provider=provider, model="m", short_term_memory=m) for m in memories]
    one, two = free_socket(), free_socket()
    async with (
        serving(a2a_app(agents[0], url=url_of(one)), one) as first,
        serving(a2a_app(agents[1], url=url_of(two)), two) as second,
        httpx.AsyncClient(timeout=60) as http,
    ):
        answered = await post_task(http, first, _contextless("hello", "m-1"))
        again = await post_task(http, second, _contextless("hello", "m-1"))  # another worker
    for memory in memories:
        await memory.storage.aclose()
    assert len(provider.requests) == 1
    assert again["id"] == answered["id"]
    assert answer_of(again) == "Only once."
    stored = SQLiteStorage(path, session_id=f"helper/a2a/{answered['contextId']}")
    try:
        turns = [m for m in await stored.load() if m.role is Role.USER]
    finally:
        await stored.aclose()
    assert [m.text for m in turns] == ["hello"]  # one stored turn


async def test_another_message_with_the_same_id_and_no_context_is_not_given_that_answer(
    tmp_path: Any,
) -> None:
    # Without a context a message is known by its id and what it says: another client that
    # reuses the id ("1") for another question gets its own answer, not the first one's.
    provider = FunctionProvider(lambda r: "re: " + r.messages[-1].text)
    memory = ShortTermMemory(SQLiteStorage(str(tmp_path / "a2a.db"), session_id="helper"))
    agent = Agent(provider=provider, model="m", short_term_memory=memory)
    sock = free_socket()
    async with (
        serving(a2a_app(agent, url=url_of(sock)), sock) as url,
        httpx.AsyncClient(timeout=60) as http,
    ):
        mine = await post_task(http, url, _contextless("my secret plan", "1"))
        theirs = await post_task(http, url, _contextless("what is 2+2?", "1"))
    await memory.storage.aclose()
    assert answer_of(mine) == "re: my secret plan"
    assert answer_of(theirs) == "re: what is 2+2?"
    assert theirs["contextId"] != mine["contextId"]


async def test_a_reply_naming_only_its_task_continues_that_tasks_context(tmp_path: Any) -> None:
    # The input-required task's id, without its context: the reply is the context's next turn
    # (the SDK made a new random context for it, a conversation with nothing before).
    from wiping import RAN, wipe  # tests/wiping.py

    RAN.clear()

    def model(request: Any) -> Any:
        last = request.messages[-1]
        if last.role is Role.USER and last.text == "wipe it":
            return tool_call_response(("wipe", {"target": "disk"}))
        return "done: " + last.text

    provider = FunctionProvider(model)
    memory = ShortTermMemory(SQLiteStorage(str(tmp_path / "a2a.db"), session_id="helper"))
    agent = Agent(provider=provider, model="m", tools=[wipe], short_term_memory=memory)
    sock = free_socket()
    async with (
        serving(a2a_app(agent, url=url_of(sock)), sock) as url,
        httpx.AsyncClient(timeout=60) as http,
    ):
        asked = await post_task(http, url, _contextless("wipe it", "m-1"))
        assert asked["status"]["state"] == "TASK_STATE_INPUT_REQUIRED", asked
        done = await post_task(http, url, _contextless("approved", "m-2", task_id=asked["id"]))
    await memory.storage.aclose()
    assert RAN == ["disk"]
    assert done["contextId"] == asked["contextId"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED", done


async def test_a_0_3_contextless_message_sent_again_is_answered_once(tmp_path: Any) -> None:
    path = str(tmp_path / "a2a.db")
    provider = ScriptedProvider("Once.", "Never.")
    body = message_send_0_3("hello", "m-1")

    async def send(http: httpx.AsyncClient, url: str) -> Any:
        return (await http.post(url + "/", json=body)).json()["result"]

    tasks = await answered_across_a_restart(path, provider, send)  # a restart between the two
    assert len(provider.requests) == 1
    assert tasks[1]["id"] == tasks[0]["id"]
    assert tasks[1]["contextId"] == tasks[0]["contextId"]
    assert tasks[1]["artifacts"][0]["parts"] == [{"kind": "text", "text": "Once."}]


async def test_a_contextless_message_streamed_again_to_another_worker_gets_its_task(
    tmp_path: Any,
) -> None:
    from a2a.client import ClientConfig, create_client
    from a2a.types import Message, Part, SendMessageRequest
    from a2a.types import Role as A2ARole

    path = str(tmp_path / "a2a.db")
    provider = ScriptedProvider("Streamed once.", "Never.")
    memories = [ShortTermMemory(SQLiteStorage(path, session_id="helper")) for _ in range(2)]
    socks = [free_socket(), free_socket()]
    apps = [
        a2a_app(Agent(provider=provider, model="m", short_term_memory=m), url=url_of(s))
        for m, s in zip(memories, socks, strict=True)
    ]
    found = []
    async with serving(apps[0], socks[0]) as first, serving(apps[1], socks[1]) as second:
        for url in (first, second):
            client = await create_client(url, client_config=ClientConfig(streaming=True))
            try:
                message = Message(role=A2ARole.ROLE_USER, message_id="m-1", parts=[Part(text="hi")])
                request = SendMessageRequest(message=message)
                found.append([e async for e in client.send_message(request)])
            finally:
                await client.close()
    for memory in memories:
        await memory.storage.aclose()
    assert len(provider.requests) == 1
    first_task = next(e.task for e in found[0] if e.HasField("task"))
    [again] = found[1]
    assert again.task.id == first_task.id
    assert again.task.context_id == first_task.context_id
    assert "".join(p.text for a in again.task.artifacts for p in a.parts) == "Streamed once."
