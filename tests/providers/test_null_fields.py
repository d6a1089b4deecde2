"""A field sent as ``null`` reads as a field left out, in every adapter.

Compatible servers and proxies send ``"usage": null`` (or a null count, a null content) where
the vendor leaves the field out; the answer must still be read, with zero usage, instead of
failing as a malformed message.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from goagent_py.messages import StopReason, TextBlock, Usage, user_message
from goagent_py.provider import CompletionRequest, StreamDone
from goagent_py.providers.anthropic import AnthropicProvider, parse_response
from goagent_py.providers.ollama import parse_chat_response
from goagent_py.providers.openai import parse_response as parse_openai

FIXTURES = Path(__file__).parent.parent / "fixtures"


def fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


def test_an_anthropic_message_with_null_usage_is_read() -> None:
    data = fixture("anthropic/messages_response_text.json") | {"usage": None}
    response = parse_response(data)
    assert response.usage == Usage()
    assert response.stop_reason is StopReason.END_TURN
    assert [type(b) for b in response.message.content] == [TextBlock]


async def test_an_anthropic_stream_whose_message_start_has_null_usage_is_read() -> None:
    start = {"model": "m", "content": [], "stop_reason": None, "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "message_start", "message": start},
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn"},
            "usage": {"output_tokens": 3},
        },
        {"type": "message_stop"},
    ]
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, text=text, headers={"content-type": "text/event-stream"})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handle)) as client:
        provider = AnthropicProvider(api_key="sk-ant-test", http_client=client)
        request = CompletionRequest(model="m", messages=[user_message("hi")])
        last = [e async for e in provider.stream(request)][-1]
    assert isinstance(last, StreamDone)
    assert last.response.usage == Usage(output_tokens=3)
    assert last.response.message.content == [TextBlock("Hi")]


def test_an_ollama_answer_with_null_counts_and_reason_is_read() -> None:
    data = {
        "model": "qwen3",
        "message": {"role": "assistant", "content": "Hi", "tool_calls": None, "thinking": None},
        "done": True,
        "done_reason": None,
        "prompt_eval_count": None,
        "eval_count": None,
    }
    response = parse_chat_response(data)
    assert response.usage == Usage()
    assert response.message.content == [TextBlock("Hi")]


@pytest.mark.parametrize("usage", [None, {}, {"prompt_tokens": None, "completion_tokens": None}])
def test_an_openai_completion_with_empty_usage_is_read(usage: Any) -> None:
    data = {"choices": [{"message": {"content": "Hi"}, "finish_reason": "stop"}], "usage": usage}
    assert parse_openai(data).usage == Usage()
