"""Fields named like JSON Schema keywords (``type``, ``minimum``, ``maximum``, ``default``,
``examples``) are fields, not keywords, wherever a schema is rewritten for a vendor.

Before the fix Anthropic's native mode walked the ``properties`` map as if it were a schema:
with fields ``type``, ``minimum`` and ``maximum`` it "moved" the ``minimum`` and ``maximum``
fields into a ``description`` entry of the map (the request named a property whose schema is
a string, and lost two required fields), and a field named ``default`` was skipped as data (its
nested object was neither closed nor checked: a ``dict`` there passed the native-mode check
and met a vendor 400). The walk now knows which keywords hold schemas, maps of named schemas,
and data (``goagent_py/_json_schema.py``).
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from pydantic import BaseModel

from goagent_py import Agent, ConfigurationError
from goagent_py.providers import AnthropicProvider, OpenAIProvider


class Bound(BaseModel):
    type: str
    minimum: float
    maximum: float


class Inner(BaseModel):
    unit: str


class Setting(BaseModel):
    name: str
    default: Inner


class Loose(BaseModel):
    name: str
    default: dict[str, int]


def _anthropic(text: str, bodies: list[dict[str, Any]]) -> httpx.AsyncClient:
    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(
            200,
            json={
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-6",
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "usage": {"input_tokens": 5, "output_tokens": 7},
            },
        )

    return httpx.AsyncClient(transport=httpx.MockTransport(handle))


async def _native(output_type: type[BaseModel], answer: str) -> tuple[Any, dict[str, Any]]:
    bodies: list[dict[str, Any]] = []
    client = _anthropic(answer, bodies)
    agent = Agent(
        provider=AnthropicProvider(api_key="k", http_client=client),
        model="claude-sonnet-4-6",
        output_type=output_type,
        output_mode="native",
    )
    result = await agent.run("go")
    await client.aclose()
    return result.output, bodies[0]["output_config"]["format"]["schema"]


async def test_fields_named_like_constraints_stay_fields() -> None:
    output, schema = await _native(Bound, '{"type": "t", "minimum": 1, "maximum": 2}')
    assert output == Bound(type="t", minimum=1, maximum=2)
    assert set(schema["properties"]) == {"type", "minimum", "maximum"}
    assert schema["properties"]["minimum"]["type"] == "number"


async def test_a_field_named_default_is_a_schema_and_is_closed() -> None:
    output, schema = await _native(Setting, '{"name": "n", "default": {"unit": "cm"}}')
    assert output == Setting(name="n", default=Inner(unit="cm"))
    inner = schema["$defs"]["Inner"]
    assert inner["additionalProperties"] is False
    assert schema["properties"]["default"] == {"$ref": "#/$defs/Inner"}


def test_a_map_in_a_field_named_default_is_refused_for_native_mode() -> None:
    with pytest.raises(ConfigurationError, match=r"properties\.default"):
        Agent(
            provider=AnthropicProvider(api_key="k"),
            model="claude-sonnet-4-6",
            output_type=Loose,
            output_mode="native",
        )


async def test_openai_closes_a_field_named_default() -> None:
    bodies: list[dict[str, Any]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        message = {"role": "assistant", "content": '{"name": "n", "default": {"unit": "cm"}}'}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return httpx.Response(200, json={"id": "c", "model": "gpt-4o", "choices": [choice]})

    client = httpx.AsyncClient(transport=httpx.MockTransport(handle))
    agent = Agent(
        provider=OpenAIProvider(api_key="k", http_client=client),
        model="gpt-4o",
        output_type=Setting,
        output_mode="native",
    )
    await agent.run("go")
    spec = bodies[0]["response_format"]["json_schema"]
    assert spec["strict"] is True
    assert spec["schema"]["$defs"]["Inner"]["additionalProperties"] is False
    await client.aclose()
