"""goagent-py's A2A server, driven by the official a2a-sdk client over real localhost HTTP."""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.types import CancelTaskRequest, Message, Part, Role, SendMessageRequest, TaskState
from a2a_helpers import free_socket, message_send_0_3, serving

from goagent_py import Agent, Hooks, tool
from goagent_py.a2a import a2a_app
from goagent_py.errors import ConfigurationError
from goagent_py.messages import ImageBlock, StopReason, TextBlock
from goagent_py.messages import Role as OurRole
from goagent_py.results import RunResult
from goagent_py.testing import ScriptedProvider, tool_call_response


@tool
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first.
        b: the second.
    """
    return a + b


def calculator(*replies: Any) -> tuple[Agent, ScriptedProvider]:
    provider = ScriptedProvider(*replies)
    return Agent(provider=provider, model="scripted", name="calc", tools=[add]), provider


def user_message(text: str, *, context_id: str = "") -> Message:
    return Message(
        role=Role.ROLE_USER,
        message_id=str(uuid.uuid4()),
        context_id=context_id,
        parts=[Part(text=text)],
    )


async def send(url: str, text: str, *, streaming: bool, context_id: str = "") -> list[Any]:
    """Every StreamResponse the SDK client yields for one message."""
    client = await create_client(url, client_config=ClientConfig(streaming=streaming))
    try:
        request = SendMessageRequest(message=user_message(text, context_id=context_id))
        return [event async for event in client.send_message(request)]
    finally:
        await client.close()


def user_texts(provider: ScriptedProvider, request: int) -> list[str]:
    """The user messages' text in one request the model received."""
    messages = provider.requests[request].messages
    return [m.text for m in messages if m.role == OurRole.USER]


@pytest.mark.slow
async def test_the_agent_card_is_at_the_well_known_path() -> None:
    agent, _ = calculator()
    sock = free_socket()
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = a2a_app(agent, url=url, description="Adds numbers.")
    async with serving(app, sock), httpx.AsyncClient() as http:
        card = await A2ACardResolver(http, url).get_agent_card()
        raw = (await http.get(f"{url}/.well-known/agent-card.json")).json()
    assert (card.name, card.description) == ("calc", "Adds numbers.")
    assert card.capabilities.streaming
    [interface] = card.supported_interfaces
    assert (interface.url, interface.protocol_binding, interface.protocol_version) == (
        url + "/",
        "JSONRPC",
        "1.0",
    )
    assert [s.id for s in card.skills] == ["ask"]
    assert "add" in card.skills[0].tags
    assert raw["defaultInputModes"] == ["text/plain"]


@pytest.mark.slow
async def test_send_runs_the_agent_and_answers_with_a_completed_task() -> None:
    agent, provider = calculator(tool_call_response(("add", {"a": 2, "b": 3})), "2 + 3 = 5.")
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    async with serving(app, sock) as url:
        [event] = await send(url, "What is 2 + 3?", streaming=False)
    task = event.task
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    [artifact] = task.artifacts
    assert [p.text for p in artifact.parts] == ["2 + 3 = 5."]
    assert user_texts(provider, 0) == ["What is 2 + 3?"]


@pytest.mark.slow
async def test_stream_reports_the_tool_and_the_answer_then_completes() -> None:
    agent, _ = calculator(tool_call_response(("add", {"a": 2, "b": 3})), "2 + 3 = 5.")
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    async with serving(app, sock) as url:
        events = await send(url, "What is 2 + 3?", streaming=True)
    kinds = [e.WhichOneof("payload") for e in events]
    assert kinds[0] == "task"
    states = [e.status_update.status.state for e in events if e.HasField("status_update")]
    assert states[0] == TaskState.TASK_STATE_WORKING
    assert states[-1] == TaskState.TASK_STATE_COMPLETED
    notes = [
        p.text
        for e in events
        if e.HasField("status_update")
        for p in e.status_update.status.message.parts
    ]
    assert "calling tool add" in notes
    artifacts = [e.artifact_update for e in events if e.HasField("artifact_update")]
    final = artifacts[-1]
    assert (final.last_chunk, final.append) == (True, False)
    assert [p.text for p in final.artifact.parts] == ["2 + 3 = 5."]


@pytest.mark.slow
async def test_a_context_is_one_conversation() -> None:
    agent, provider = calculator("Hello Ada.", "Your name is Ada.")
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    async with serving(app, sock) as url:
        [first] = await send(url, "I am Ada.", streaming=False)
        context = first.task.context_id
        await send(url, "Who am I?", streaming=False, context_id=context)
        await send(url, "Who am I?", streaming=False)
    assert user_texts(provider, 1) == ["I am Ada.", "Who am I?"]


@pytest.mark.slow
async def test_cancel_aborts_the_run() -> None:
    started = asyncio.Event()
    ended: list[RunResult] = []

    @tool
    async def wait() -> str:
        """Wait for a long time."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    provider = ScriptedProvider(tool_call_response(("wait", {})))
    agent = Agent(
        provider=provider,
        model="scripted",
        name="waiter",
        tools=[wait],
        hooks=Hooks(on_run_end=ended.append),
    )
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    async with serving(app, sock) as url:
        client = await create_client(url, client_config=ClientConfig(streaming=True))
        try:
            request = SendMessageRequest(message=user_message("wait"))
            stream = client.send_message(request)
            first = await anext(stream)
            task_id = first.task.id
            await started.wait()
            canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
            await stream.aclose()
        finally:
            await client.close()
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    [result] = ended
    assert result.stop_reason == StopReason.ABORTED


@pytest.mark.slow
async def test_a_failed_run_is_a_failed_task_that_says_why() -> None:
    agent = Agent(provider=ScriptedProvider(RuntimeError("model down")), model="m", name="x")
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    async with serving(app, sock) as url:
        [event] = await send(url, "hi", streaming=False)
    status = event.task.status
    assert status.state == TaskState.TASK_STATE_FAILED
    assert "model down" in status.message.parts[0].text


@pytest.mark.slow
async def test_a_0_3_client_calls_message_send_on_the_same_endpoint() -> None:
    agent, _ = calculator("Hi there.")
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    body = message_send_0_3("hello", "m-1")
    async with serving(app, sock) as url, httpx.AsyncClient() as http:
        reply = (await http.post(url + "/", json=body)).json()
    task = reply["result"]
    assert task["kind"] == "task"
    assert task["status"]["state"] == "completed"
    assert task["artifacts"][0]["parts"] == [{"kind": "text", "text": "Hi there."}]


PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@pytest.mark.slow
async def test_an_image_part_reaches_the_model_as_an_image() -> None:
    agent, provider = calculator("A tiny picture.")
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    message = user_message("What is this?")
    message.parts.append(Part(raw=PNG, media_type="image/png", filename="dot.png"))
    async with serving(app, sock) as url:
        client = await create_client(url, client_config=ClientConfig(streaming=False))
        try:
            [event] = [e async for e in client.send_message(SendMessageRequest(message=message))]
        finally:
            await client.close()
    assert event.task.status.state == TaskState.TASK_STATE_COMPLETED
    [user] = [m for m in provider.requests[0].messages if m.role == OurRole.USER]
    assert user.content == [TextBlock("What is this?"), ImageBlock(PNG, "image/png")]


@pytest.mark.slow
async def test_a_factory_builds_one_agent_per_context() -> None:
    built: list[str] = []

    def make(context_id: str) -> Agent:
        built.append(context_id)
        return Agent(provider=ScriptedProvider("One.", "Two."), model="m", name="per-context")

    sock = free_socket()
    app = a2a_app(make, name="helper", url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    async with serving(app, sock) as url:
        [first] = await send(url, "a", streaming=False)
        context = first.task.context_id
        [second] = await send(url, "b", streaming=False, context_id=context)
        [other] = await send(url, "c", streaming=False)
    assert built == [context, other.task.context_id]
    assert [a.parts[0].text for a in second.task.artifacts] == ["Two."]


def test_bad_settings_are_configuration_errors() -> None:
    agent, _ = calculator()
    with pytest.raises(ConfigurationError, match="http"):
        a2a_app(agent, url="localhost:9000")
    with pytest.raises(ConfigurationError, match="path"):
        a2a_app(agent, url="http://h", path="rpc")
    with pytest.raises(ConfigurationError, match="name="):
        a2a_app(lambda context_id: agent, url="http://h")
    with pytest.raises(ConfigurationError, match="max_contexts"):
        a2a_app(agent, url="http://h", max_contexts=0)


@pytest.mark.slow
async def test_a_second_message_while_its_context_works_is_rejected() -> None:
    started, release = asyncio.Event(), asyncio.Event()

    @tool
    async def slow() -> str:
        """Work until released."""
        started.set()
        await release.wait()
        return "done"

    provider = ScriptedProvider(tool_call_response(("slow", {})), "Finished.")
    agent = Agent(provider=provider, model="m", name="busy", tools=[slow])
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    async with serving(app, sock) as url:
        client = await create_client(url, client_config=ClientConfig(streaming=True))
        try:
            stream = client.send_message(SendMessageRequest(message=user_message("work")))
            first = await anext(stream)
            await started.wait()
            [second] = await send(url, "more", streaming=False, context_id=first.task.context_id)
            release.set()
            rest = [e async for e in stream]
        finally:
            await client.close()
    status = second.task.status
    assert status.state == TaskState.TASK_STATE_REJECTED
    assert "busy with another task" in status.message.parts[0].text
    assert rest[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED


@pytest.mark.slow
async def test_a_0_3_client_streams_with_message_stream() -> None:
    import json

    agent, _ = calculator("Hi there.")
    sock = free_socket()
    app = a2a_app(agent, url=f"http://127.0.0.1:{sock.getsockname()[1]}")
    body = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "message/stream",
        "params": {
            "message": {
                "kind": "message",
                "role": "user",
                "messageId": "m-2",
                "parts": [{"kind": "text", "text": "hello"}],
            }
        },
    }
    async with (
        serving(app, sock) as url,
        httpx.AsyncClient() as http,
        http.stream("POST", url + "/", json=body) as response,
    ):
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [
            json.loads(line.removeprefix("data:"))["result"]
            async for line in response.aiter_lines()
            if line.startswith("data:")
        ]
    assert events[0]["kind"] == "task"
    final = events[-1]
    assert (final["kind"], final["status"]["state"], final["final"]) == (
        "status-update",
        "completed",
        True,
    )
    answers = [e["artifact"]["parts"] for e in events if e["kind"] == "artifact-update"]
    assert answers[-1] == [{"kind": "text", "text": "Hi there."}]


# -- what a page in the user's browser can do to an A2A server on localhost (review6a) ----------


def _send_body(text: str) -> dict[str, Any]:
    message = {
        "role": "user",
        "messageId": str(uuid.uuid4()),
        "parts": [{"kind": "text", "text": text}],
    }
    return {"jsonrpc": "2.0", "id": 1, "method": "message/send", "params": {"message": message}}


def _asgi_client(app: Any) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50123))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:9000")


async def test_a_cross_site_page_cannot_make_the_a2a_agent_run() -> None:
    # A "simple" cross-site POST (text/plain, no preflight) and a DNS-rebinding page (its own
    # host name) ran the agent and its tools; the serve app refused both since issue 29.
    agent, provider = calculator("ran", "ran", "ran")
    app = a2a_app(agent, url="http://127.0.0.1:9000")
    body = json.dumps(_send_body("do it"))
    async with _asgi_client(app) as client:
        csrf = await client.post(
            "/",
            content=body,
            headers={"content-type": "text/plain", "origin": "http://evil.example"},
        )
        form = await client.post("/", content=body, headers={"content-type": "text/plain"})
        foreign = await client.post(
            "/",
            content=body,
            headers={"content-type": "application/json", "origin": "http://evil.example"},
        )
        rebound = await client.post(
            "/",
            content=body,
            headers={"content-type": "application/json", "host": "evil.example:9000"},
        )
        card = await client.get(
            "/.well-known/agent-card.json", headers={"host": "evil.example:9000"}
        )
        assert [r.status_code for r in (csrf, form, foreign, rebound, card)] == [
            403,
            415,
            403,
            421,
            421,
        ]
        assert provider.requests == []
        # A client of the protocol (JSON, no Origin, or the server's own) is served.
        ok = await client.post(
            "/", json=_send_body("do it"), headers={"origin": "http://127.0.0.1:9000"}
        )
        assert ok.status_code == 200
        assert ok.json()["result"]["status"]["state"] in ("completed", "TASK_STATE_COMPLETED")
    assert len(provider.requests) == 1


async def test_a2a_app_accepts_the_host_of_its_url_and_the_names_it_is_given() -> None:
    agent, _ = calculator()
    app = a2a_app(agent, url="https://agents.example.com/a2a", allowed_hosts=["Other.example"])
    statuses = []
    async with _asgi_client(app) as client:
        for host in ["agents.example.com", "other.example:8443", "localhost:9000", "evil.example"]:
            r = await client.get("/.well-known/agent-card.json", headers={"host": host})
            statuses.append(r.status_code)
    assert statuses == [200, 200, 200, 421]


async def test_a_body_over_the_cap_is_a_413_and_never_reaches_the_agent() -> None:
    # The A2A app read any body whole (a 50 MB message ran the agent, and its task kept the
    # text in memory): a client could hold as much of the server's memory as it could send.
    agent, provider = calculator("ran")
    app = a2a_app(agent, url="http://127.0.0.1:9000", max_body=2000)
    big = json.dumps(_send_body("x" * 3000)).encode()

    async def chunked() -> Any:  # no Content-Length: the cap must hold on what is read
        for start in range(0, len(big), 500):
            yield big[start : start + 500]

    async with _asgi_client(app) as client:
        declared = await client.post("/", content=big, headers={"content-type": "application/json"})
        streamed = await client.post(
            "/", content=chunked(), headers={"content-type": "application/json"}
        )
        assert [declared.status_code, streamed.status_code] == [413, 413]
        assert provider.requests == []
        ok = await client.post("/", json=_send_body("small"))
        assert ok.status_code == 200
    assert len(provider.requests) == 1
    with pytest.raises(ConfigurationError, match="max_body"):
        a2a_app(agent, url="http://127.0.0.1:9000", max_body=0)
