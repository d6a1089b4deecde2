"""An MCP call carries the calling tool call's trace context to the server (W3C traceparent).

The connection's owner task sends every call (docs/mcp.md); the call must still go out in the
context of the run that made it: the MCP SDK makes its client span there and injects that
context into the request's ``_meta`` (SEP-414), so the server's work joins the run's trace, and
never the trace of whichever run happened to open the connection.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

pytest.importorskip("opentelemetry.sdk")

from mcp.server.mcpserver import MCPServer
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from goagent_py import Agent, ToolCall
from goagent_py.mcp import MCPInProcess
from goagent_py.otel import instrument
from goagent_py.testing import ScriptedProvider, tool_call_response


def _server(seen: list[tuple[int, int]]) -> MCPServer:
    server = MCPServer("traced", log_level="WARNING")

    @server.tool()
    async def where() -> str:
        """Say where the call came from."""
        # The SDK's server makes the caller's context (from the request's _meta) current.
        context = trace.get_current_span().get_span_context()
        seen.append((context.trace_id, context.span_id))
        return "here"

    return server


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


async def test_each_runs_mcp_call_reaches_the_server_in_that_runs_trace(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    seen: list[tuple[int, int]] = []
    conn = MCPInProcess(_server(seen))
    hooks = instrument(provider)
    try:
        for i in range(2):  # the second run reuses the connection the first one opened
            agent = Agent(
                provider=ScriptedProvider(tool_call_response(ToolCall(f"c{i}", "where", {})), "ok"),
                model="m",
                name="a",
                hooks=hooks,
                mcp_connectors=[conn.connector()],
            )
            await agent.run("go")
    finally:
        await conn.aclose()

    calls = [s for s in exporter.get_finished_spans() if s.name == "execute_tool where"]
    assert len(calls) == 2
    expected = []
    for span in calls:
        assert span.context is not None
        expected.append((span.context.trace_id, span.context.span_id))
    # With no global tracer provider the SDK's own client span records nothing and carries its
    # parent's ids: the server sees each run's own execute_tool span.
    assert seen == expected
