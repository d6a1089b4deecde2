"""OTel spans of a cancelled run, and usage on nested invoke_agent spans (fix10)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from goagent_py import Agent
from goagent_py.messages import Usage
from goagent_py.otel import instrument
from goagent_py.testing import FunctionProvider, ScriptedProvider, text_response, tool_call_response
from goagent_py.tools import tool


@pytest.fixture
def spans() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    tp = TracerProvider()
    tp.add_span_processor(SimpleSpanProcessor(exporter))
    yield tp, exporter
    tp.shutdown()


def _named(exporter: InMemorySpanExporter, prefix: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name.startswith(prefix)]


def _error_type(span: ReadableSpan) -> Any:
    assert span.attributes is not None
    return span.attributes.get("error.type")


async def test_a_run_cancelled_in_a_tool_marks_its_agent_and_tool_spans_alike(spans: Any) -> None:
    tp, exporter = spans
    started = asyncio.Event()

    @tool
    async def wait_forever() -> str:
        """Never returns."""
        started.set()
        await asyncio.Event().wait()
        return "never"

    agent = Agent(
        provider=ScriptedProvider(tool_call_response(("wait_forever", {})), text_response("x")),
        tools=[wait_forever],
        hooks=instrument(tp, capture_content=False),
    )
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (agent_span,) = _named(exporter, "invoke_agent")
    (tool_span,) = _named(exporter, "execute_tool")
    for span in (agent_span, tool_span):
        assert span.status.status_code is StatusCode.ERROR
    assert _error_type(agent_span) == _error_type(tool_span)
    assert "CancelledError" in str(_error_type(agent_span))


async def test_a_run_cancelled_in_a_model_call_marks_its_agent_and_chat_spans_alike(
    spans: Any,
) -> None:
    tp, exporter = spans
    started = asyncio.Event()

    async def hang(request: Any) -> Any:
        started.set()
        await asyncio.Event().wait()

    agent = Agent(provider=FunctionProvider(hang), hooks=instrument(tp, capture_content=False))
    task = asyncio.create_task(agent.run("go"))
    await started.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    (agent_span,) = _named(exporter, "invoke_agent")
    (chat_span,) = _named(exporter, "chat")
    for span in (agent_span, chat_span):
        assert span.status.status_code is StatusCode.ERROR
    assert _error_type(agent_span) == _error_type(chat_span)
    assert "CancelledError" in str(_error_type(chat_span))


async def test_a_parents_invoke_agent_usage_is_its_run_usage_with_the_sub_agents(
    spans: Any,
) -> None:
    tp, exporter = spans
    hooks = instrument(tp, capture_content=False)
    child = Agent(
        name="child",
        provider=ScriptedProvider(text_response("child answer", usage=Usage(7, 3))),
        hooks=hooks,
    )
    parent = Agent(
        name="parent",
        provider=ScriptedProvider(
            tool_call_response(("ask_child", {"prompt": "q"}), usage=Usage(10, 2)),
            text_response("done", usage=Usage(20, 4)),
        ),
        tools=[child.as_tool(name="ask_child", description="Ask the child.")],
        hooks=hooks,
    )
    result = await parent.run("go")
    by_agent = {
        s.attributes["gen_ai.agent.name"]: s.attributes
        for s in _named(exporter, "invoke_agent")
        if s.attributes is not None
    }
    # The documented contract: the parent's span is its RunResult.usage (sub-agent included),
    # so the total is the root span's, or the sum over chat spans, not over invoke_agent spans.
    assert by_agent["parent"]["gen_ai.usage.input_tokens"] == result.usage.input_tokens == 37
    assert by_agent["child"]["gen_ai.usage.input_tokens"] == 7
    chats = _named(exporter, "chat")
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats if s.attributes) == 37
