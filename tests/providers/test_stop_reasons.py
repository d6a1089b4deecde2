"""Stop reasons the adapters do not list, and the ones that mean a cut-off answer.

A new or server-specific stop reason must not turn a tool turn into an ended one, and
Anthropic's ``model_context_window_exceeded`` (the answer was cut off by the context window,
https://docs.anthropic.com/en/api/messages#response-stop-reason) is a truncation: a cut-off tool
call is answered with an error, never run on partial arguments.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from goagent_py import Agent, tool
from goagent_py.messages import StopReason, user_message
from goagent_py.provider import CompletionRequest, CompletionResponse, StreamDone
from goagent_py.providers.anthropic import AnthropicProvider
from goagent_py.providers.openai import OpenAIProvider
from goagent_py.tools import ToolDefinition

FIXTURES = Path(__file__).parent.parent / "fixtures"
TOOLS = [ToolDefinition("get_weather", "Weather.", {"type": "object", "properties": {}})]

Handler = Callable[[httpx.Request], httpx.Response]


@pytest.fixture
async def client() -> AsyncIterator[Callable[[Handler], httpx.AsyncClient]]:
    clients: list[httpx.AsyncClient] = []

    def make(handler: Handler) -> httpx.AsyncClient:
        c = httpx.AsyncClient(transport=httpx.MockTransport(handler))
        clients.append(c)
        return c

    yield make
    for c in clients:
        await c.aclose()


def answers(*responses: httpx.Response) -> tuple[Handler, list[dict[str, Any]]]:
    queue, bodies = list(responses), []

    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return queue.pop(0)

    return handle, bodies


def anthropic_message(stop_reason: str, *, calls: bool) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (FIXTURES / "anthropic" / "messages_response_parallel_tool_use.json").read_text()
    )
    if not calls:
        data["content"] = data["content"][:1]
    data["stop_reason"] = stop_reason
    return data


def anthropic_stream(stop_reason: str, *, calls: bool) -> httpx.Response:
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": {"model": "m", "content": [], "usage": {}}},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
    ]
    if calls:
        block = {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}
        events += [
            {"type": "content_block_start", "index": 1, "content_block": block},
            {
                "type": "content_block_delta",
                "index": 1,
                "delta": {"type": "input_json_delta", "partial_json": "{}"},
            },
        ]
    events += [
        {"type": "message_delta", "delta": {"stop_reason": stop_reason}, "usage": {}},
        {"type": "message_stop"},
    ]
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})


def openai_completion(finish: str, *, calls: bool) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(
        (FIXTURES / "openai" / "chat_response_tool_calls.json").read_text()
    )
    message = data["choices"][0]["message"]
    if not calls:
        message.pop("tool_calls", None)
        message["content"] = "Hi"
    data["choices"][0]["finish_reason"] = finish
    return data


def openai_stream(finish: str, *, calls: bool) -> httpx.Response:
    delta: dict[str, Any] = {"content": "Hi"}
    if calls:
        call = {"index": 0, "id": "call_1", "function": {"name": "get_weather", "arguments": "{}"}}
        delta = {"tool_calls": [call]}
    chunks = [
        {"choices": [{"index": 0, "delta": delta, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": finish}]},
    ]
    text = "".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})


def request() -> CompletionRequest:
    return CompletionRequest(model="m", messages=[user_message("Weather?")], tools=TOOLS)


async def streamed(provider: AnthropicProvider | OpenAIProvider) -> CompletionResponse:
    events = [e async for e in provider.stream(request())]
    assert isinstance(events[-1], StreamDone)
    return events[-1].response


@pytest.mark.parametrize(
    ("calls", "expected"), [(True, StopReason.TOOL_USE), (False, StopReason.END_TURN)]
)
@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
async def test_an_unknown_anthropic_stop_reason_with_tool_calls_is_a_tool_turn(
    client: Callable[[Handler], httpx.AsyncClient],
    calls: bool,
    expected: StopReason,
    streaming: bool,
) -> None:
    answer = (
        anthropic_stream("something_new", calls=calls)
        if streaming
        else httpx.Response(200, json=anthropic_message("something_new", calls=calls))
    )
    handler, _ = answers(answer)
    provider = AnthropicProvider(api_key="sk-ant-test", http_client=client(handler))
    response = await (streamed(provider) if streaming else provider.complete(request()))
    assert bool(response.message.tool_calls) is calls
    assert response.stop_reason is expected


@pytest.mark.parametrize(
    ("calls", "expected"), [(True, StopReason.TOOL_USE), (False, StopReason.END_TURN)]
)
@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
async def test_an_unknown_openai_finish_reason_with_tool_calls_is_a_tool_turn(
    client: Callable[[Handler], httpx.AsyncClient],
    calls: bool,
    expected: StopReason,
    streaming: bool,
) -> None:
    answer = (
        openai_stream("eos_token", calls=calls)
        if streaming
        else httpx.Response(200, json=openai_completion("eos_token", calls=calls))
    )
    handler, _ = answers(answer)
    provider = OpenAIProvider(api_key="sk-test", http_client=client(handler))
    response = await (streamed(provider) if streaming else provider.complete(request()))
    assert bool(response.message.tool_calls) is calls
    assert response.stop_reason is expected


@pytest.mark.parametrize("streaming", [False, True], ids=["complete", "stream"])
async def test_context_window_exceeded_is_a_cut_off_answer(
    client: Callable[[Handler], httpx.AsyncClient], streaming: bool
) -> None:
    stop = "model_context_window_exceeded"
    answer = (
        anthropic_stream(stop, calls=False)
        if streaming
        else httpx.Response(200, json=anthropic_message(stop, calls=False))
    )
    handler, _ = answers(answer)
    provider = AnthropicProvider(api_key="sk-ant-test", http_client=client(handler))
    response = await (streamed(provider) if streaming else provider.complete(request()))
    assert response.stop_reason is StopReason.MAX_TOKENS


async def test_a_tool_call_cut_off_by_the_context_window_is_not_run(
    client: Callable[[Handler], httpx.AsyncClient],
) -> None:
    ran: list[str] = []

    @tool
    def get_weather(location: str) -> str:
        """The weather at a place."""
        ran.append(location)
        return "sunny"

    handler, bodies = answers(
        httpx.Response(200, json=anthropic_message("model_context_window_exceeded", calls=True)),
        httpx.Response(200, json=anthropic_message("end_turn", calls=False)),
    )
    provider = AnthropicProvider(api_key="sk-ant-test", http_client=client(handler))
    agent = Agent(provider=provider, model="claude-sonnet-4-5", tools=[get_weather])
    await agent.run("Weather in SF and NYC?")
    assert ran == []
    results = bodies[1]["messages"][-1]["content"]
    assert [r["type"] for r in results] == ["tool_result", "tool_result"]
    assert all(r["is_error"] for r in results)
    assert all("cut off" in r["content"] and "not run" in r["content"] for r in results)
