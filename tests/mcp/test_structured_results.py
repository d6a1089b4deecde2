"""MCP tools with an ``outputSchema``: structured content validated, and kept for the code.

A server that declares an output schema must send ``structuredContent`` that fits it (MCP spec,
"Tools": "Servers MUST provide structured results that conform to this schema"); the SDK client
checks it. A result that does not fit is the tool's error, which the model reads; it is not a
connection failure (which would mark the server unreachable and retry).
"""

from __future__ import annotations

from typing import Any

from mcp import types
from mcp.server.lowlevel import Server

from goagent_py import Agent
from goagent_py.events import ToolExecutionEnd
from goagent_py.mcp import MCPInProcess
from goagent_py.messages import Role
from goagent_py.testing import ScriptedProvider, tool_call_response

OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {"temp": {"type": "number"}, "unit": {"type": "string"}},
    "required": ["temp", "unit"],
}
ANSWERS: dict[str, dict[str, Any] | None] = {
    "Oslo": {"temp": 3.5, "unit": "C"},
    "Paris": {"temp": "mild", "unit": "C"},  # does not fit the schema
    "Rome": None,  # no structured content at all
}


def weather_server() -> Server[Any]:
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name="weather",
                    description="Current weather in a city.",
                    input_schema={
                        "type": "object",
                        "properties": {"city": {"type": "string"}},
                        "required": ["city"],
                    },
                    output_schema=OUTPUT_SCHEMA,
                )
            ]
        )

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        city = (params.arguments or {})["city"]
        structured = ANSWERS[city]
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"{city}: {structured}")],
            structured_content=structured,
        )

    return Server("weather", on_list_tools=list_tools, on_call_tool=call_tool)


async def _run(city: str) -> tuple[ScriptedProvider, list[Any]]:
    provider = ScriptedProvider(tool_call_response(("weather", {"city": city})), "ok")
    conn = MCPInProcess(weather_server())
    agent = Agent(provider=provider, model="m", mcp_servers=[conn])
    try:
        ends = [e.result async for e in agent.stream("weather?") if isinstance(e, ToolExecutionEnd)]
    finally:
        await agent.aclose()
    return provider, ends


async def test_structured_content_that_fits_reaches_the_code_as_details() -> None:
    provider, (end,) = await _run("Oslo")
    assert not end.is_error
    assert end.details == {"temp": 3.5, "unit": "C"}
    (result,) = [m for m in provider.requests[1].messages if m.role is Role.TOOL]
    assert result.text == "Oslo: {'temp': 3.5, 'unit': 'C'}"


async def test_structured_content_that_does_not_fit_is_an_error_the_model_reads() -> None:
    provider, (end,) = await _run("Paris")
    assert end.is_error
    assert type(end.error).__name__ == "MCPToolError"
    (result,) = [m for m in provider.requests[1].messages if m.role is Role.TOOL]
    assert result.is_error
    assert "does not match its output schema" in result.text
    assert "'mild' is not of type 'number'" in result.text


async def test_missing_structured_content_is_an_error_too() -> None:
    _, (end,) = await _run("Rome")
    assert end.is_error
    assert type(end.error).__name__ == "MCPToolError"
    assert "returned no structured content" in str(end.error)
