"""Native typed output on the wire: each vendor's documented structured-output field.

OpenAI Chat Completions: ``response_format: {"type": "json_schema", "json_schema": {"name",
"schema", "strict"}}`` (strict needs every property required and closed objects). Anthropic
Messages: ``output_config: {"format": {"type": "json_schema", "schema"}}``. Ollama ``/api/chat``:
``format`` holds the JSON schema. The answer comes back as text and is validated by the run.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import BaseModel, Field

from goagent_py import Agent, ConfigurationError, OutputValidationError
from goagent_py.providers import AnthropicProvider, OllamaProvider, OpenAIProvider


class City(BaseModel):
    name: str
    population: int


class Loose(BaseModel):
    name: str
    note: str = ""


ANSWER = '{"name": "Paris", "population": 3}'


def _recorder(reply: dict[str, Any]) -> tuple[list[dict[str, Any]], httpx.AsyncClient]:
    bodies: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json=reply)

    return bodies, httpx.AsyncClient(transport=httpx.MockTransport(handle))


def _openai_reply(text: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12},
    }


async def test_openai_sends_a_strict_json_schema_response_format() -> None:
    bodies, client = _recorder(_openai_reply(ANSWER))
    provider = OpenAIProvider(api_key="k", http_client=client)
    agent = Agent(provider=provider, model="gpt-4o", output_type=City, output_mode="native")
    result = await agent.run("Paris?")
    assert result.output == City(name="Paris", population=3)
    body = bodies[0]
    assert "tools" not in body
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    spec = fmt["json_schema"]
    assert spec["name"] == "City"
    assert spec["strict"] is True
    assert spec["schema"]["additionalProperties"] is False
    assert spec["schema"]["required"] == ["name", "population"]
    await client.aclose()


async def test_openai_sends_an_optional_field_schema_without_strict() -> None:
    bodies, client = _recorder(_openai_reply('{"name": "x"}'))
    provider = OpenAIProvider(api_key="k", http_client=client)
    agent = Agent(provider=provider, model="gpt-4o", output_type=Loose, output_mode="native")
    assert (await agent.run("go")).output == Loose(name="x")
    spec = bodies[0]["response_format"]["json_schema"]
    assert spec["strict"] is False
    assert "additionalProperties" not in spec["schema"]
    await client.aclose()


async def test_openai_default_is_the_final_result_tool() -> None:
    reply = _openai_reply("")
    reply["choices"][0]["message"] = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "final_result", "arguments": ANSWER},
            }
        ],
    }
    reply["choices"][0]["finish_reason"] = "tool_calls"
    bodies, client = _recorder(reply)
    provider = OpenAIProvider(api_key="k", http_client=client)
    agent = Agent(provider=provider, model="gpt-4o", output_type=City)
    assert (await agent.run("go")).output.population == 3
    assert "response_format" not in bodies[0]
    (tool,) = bodies[0]["tools"]
    assert tool["function"]["name"] == "final_result"
    assert tool["function"]["parameters"]["required"] == ["name", "population"]
    await client.aclose()


async def test_anthropic_sends_output_config_format() -> None:
    reply = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": ANSWER}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 7},
    }
    bodies, client = _recorder(reply)
    provider = AnthropicProvider(api_key="k", http_client=client)
    agent = Agent(
        provider=provider,
        model="claude-sonnet-4-6",
        output_type=City,
        output_mode="native",
        effort="low",
    )
    assert (await agent.run("go")).output == City(name="Paris", population=3)
    config = bodies[0]["output_config"]
    assert config["effort"] == "low"
    assert config["format"]["type"] == "json_schema"
    assert config["format"]["schema"]["additionalProperties"] is False
    assert config["format"]["schema"]["properties"]["population"] == {
        "title": "Population",
        "type": "integer",
    }
    await client.aclose()


@pytest.mark.parametrize("mode", ["native", "prompted"])
async def test_ollama_sends_the_schema_as_format_in_native_mode_only(mode: str) -> None:
    reply = {
        "model": "llama3.2",
        "created_at": "2026-01-01T00:00:00Z",
        "message": {"role": "assistant", "content": ANSWER},
        "done": True,
        "done_reason": "stop",
    }
    bodies, client = _recorder(reply)
    provider = OllamaProvider(http_client=client)
    agent = Agent(provider=provider, model="llama3.2", output_type=City, output_mode=mode)  # type: ignore[arg-type]
    assert (await agent.run("go")).output == City(name="Paris", population=3)
    body = bodies[0]
    if mode == "native":
        assert body["format"]["required"] == ["name", "population"]
    else:
        assert "format" not in body
        assert '"population"' in body["messages"][0]["content"]
        assert body["messages"][0]["role"] == "system"
    await client.aclose()


# Anthropic's structured outputs (platform docs, "Structured outputs", GA: no beta header):
# ``output_config: {"format": {"type": "json_schema", "schema": ...}}`` beside ``effort``;
# every object needs ``additionalProperties: false``; recursive schemas are not supported;
# numeric and string constraints (minimum, maximum, multipleOf, minLength, maxLength) are
# refused, and the SDK moves them into the description and validates them itself.


class Bounded(BaseModel):
    rating: int = Field(ge=1, le=5, description="Stars")
    code: str = Field(max_length=3)


class Tree(BaseModel):
    name: str
    children: list[Tree] = []


def _anthropic_reply(text: str) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-6",
        "content": [{"type": "text", "text": text}],
        "stop_reason": "end_turn",
        "stop_sequence": None,
        "usage": {"input_tokens": 5, "output_tokens": 7},
    }


async def test_anthropic_sends_the_documented_body_and_moves_refused_constraints() -> None:
    bodies, client = _recorder(_anthropic_reply('{"rating": 4, "code": "abc"}'))
    provider = AnthropicProvider(api_key="k", http_client=client)
    agent = Agent(
        provider=provider, model="claude-sonnet-4-6", output_type=Bounded, output_mode="native"
    )
    result = await agent.run("rate it")
    assert result.output == Bounded(rating=4, code="abc")
    body = bodies[0]
    assert "output_format" not in body  # the beta field; GA is output_config.format
    assert "tools" not in body or all(t["name"] != "final_result" for t in body["tools"])
    assert body["output_config"] == {
        "format": {
            "type": "json_schema",
            "schema": {
                "type": "object",
                "title": "Bounded",
                "properties": {
                    "rating": {
                        "type": "integer",
                        "title": "Rating",
                        "description": "Stars (minimum: 1, maximum: 5)",
                    },
                    "code": {"type": "string", "title": "Code", "description": "(maxLength: 3)"},
                },
                "required": ["rating", "code"],
                "additionalProperties": False,
            },
        }
    }
    await client.aclose()


async def test_anthropic_output_still_checks_the_moved_constraints() -> None:
    _, client = _recorder(_anthropic_reply('{"rating": 9, "code": "abc"}'))
    provider = AnthropicProvider(api_key="k", http_client=client)
    agent = Agent(
        provider=provider,
        model="claude-sonnet-4-6",
        output_type=Bounded,
        output_mode="native",
        output_retries=0,
    )
    with pytest.raises(OutputValidationError, match="rating"):
        await agent.run("rate it")
    await client.aclose()


@pytest.mark.parametrize(
    ("output_type", "match"),
    [
        (Tree, r"\$defs\.Tree refers to itself"),
        (dict[str, int], r"\(root\) is an object with additionalProperties"),
    ],
)
def test_anthropic_native_refuses_what_it_cannot_express(output_type: Any, match: str) -> None:
    provider = AnthropicProvider(api_key="k")
    with pytest.raises(ConfigurationError, match=match):
        Agent(provider=provider, model="m", output_type=output_type, output_mode="native")
    # The default (tool) mode takes the same types.
    Agent(provider=provider, model="m", output_type=output_type)


def test_the_embedded_models_grammar_builder_cannot_take_recursion() -> None:
    pytest.importorskip("llama_cpp", reason='needs the "local" extra')
    from goagent_py.providers.llama_cpp import grammar_problem

    assert grammar_problem(City.model_json_schema()) is None
    problem = grammar_problem(Tree.model_json_schema())
    assert problem is not None
    assert "$defs.Tree refers to itself" in problem
