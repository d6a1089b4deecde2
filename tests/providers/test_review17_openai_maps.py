"""OpenAI's strict structured outputs need every object closed (``additionalProperties:
false``). A ``dict[str, X]`` field is an object whose properties are not named: closing it
leaves an object that can hold nothing. Before the fix the request carried ``"prices":
{"type": "object", "additionalProperties": false}`` with ``strict: true``, so the model could
only answer ``"prices": {}``, which validated: the map was lost without an error. Such a schema
is sent as it is, without ``strict`` (docs/typed-output.md, "Modes").
"""

from __future__ import annotations

import json
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict

from goagent_py import Agent
from goagent_py.providers import OpenAIProvider


class Prices(BaseModel):
    shop: str
    prices: dict[str, float]


class Open(BaseModel):
    model_config = ConfigDict(extra="allow")
    name: str


def _client(text: str, bodies: list[dict[str, Any]]) -> httpx.AsyncClient:
    def handle(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        message = {"role": "assistant", "content": text}
        choice = {"index": 0, "message": message, "finish_reason": "stop"}
        return httpx.Response(200, json={"id": "c", "model": "gpt-4o", "choices": [choice]})

    return httpx.AsyncClient(transport=httpx.MockTransport(handle))


async def test_a_map_field_keeps_its_values_schema_and_is_not_strict() -> None:
    bodies: list[dict[str, Any]] = []
    client = _client('{"shop": "Lidl", "prices": {"milk": 1.1}}', bodies)
    agent = Agent(
        provider=OpenAIProvider(api_key="k", http_client=client),
        model="gpt-4o",
        output_type=Prices,
        output_mode="native",
    )
    assert (await agent.run("Prices?")).output == Prices(shop="Lidl", prices={"milk": 1.1})
    spec = bodies[0]["response_format"]["json_schema"]
    assert spec["schema"]["properties"]["prices"]["additionalProperties"] == {"type": "number"}
    assert spec["strict"] is False
    await client.aclose()


async def test_a_model_that_takes_extra_fields_is_not_closed() -> None:
    bodies: list[dict[str, Any]] = []
    client = _client('{"name": "x", "colour": "red"}', bodies)
    agent = Agent(
        provider=OpenAIProvider(api_key="k", http_client=client),
        model="gpt-4o",
        output_type=Open,
        output_mode="native",
    )
    result = await agent.run("Go")
    assert result.output.model_extra == {"colour": "red"}
    spec = bodies[0]["response_format"]["json_schema"]
    assert spec["strict"] is False
    assert spec["schema"]["additionalProperties"] is True
    await client.aclose()
