"""A server's tool whose input schema is not JSON Schema is withheld from the model, with a
warning that names it; the server's other tools are offered (review7c).

Its schema went to the vendor as it was: ``{"type": "float"}`` (BFCL-style) or a schema nested
past what any vendor takes is a 400 for the whole request, so one bad tool of a third-party
server failed every turn of the agent, its good tools and the local ones included.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
from mcp import types
from mcp.server.lowlevel import Server

from goagent_py import Agent
from goagent_py.mcp import MCPInProcess
from goagent_py.testing import ScriptedProvider


def _deep(levels: int) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object"}
    for _ in range(levels):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


SCHEMAS: dict[str, dict[str, Any]] = {
    "good": {"type": "object", "properties": {"city": {"type": "string"}}},
    "floaty": {"type": "object", "properties": {"x": {"type": "float"}}},
    "bad_required": {"type": "object", "properties": {}, "required": "x"},
    "deep": _deep(70),  # 141 levels of JSON: past the 128 a schema may have
}


def odd_server() -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(name=name, description=f"{name} tool", input_schema=schema)
                for name, schema in SCHEMAS.items()
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])

    return Server("odd", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_tools_with_invalid_input_schemas_are_withheld_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider = ScriptedProvider("done")
    agent = Agent(provider=provider, model="m", mcp_servers=[MCPInProcess(odd_server())])
    try:
        with caplog.at_level(logging.WARNING, logger="goagent_py.mcp"):
            assert (await agent.run("hi")).text == "done"
    finally:
        await agent.aclose()
    assert [t.name for t in provider.requests[0].tools] == ["good"]
    warned = " ".join(r.getMessage() for r in caplog.records)
    for name in ("floaty", "bad_required", "deep"):
        assert repr(name) in warned
    assert "'float' is not a JSON Schema type" in warned
