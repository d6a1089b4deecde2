"""goagent_py.otel: what a tool span says about its tool, and the error type of a compaction.

``gen_ai.tool.description`` is the execute_tool span's Recommended attribute ("if available",
the GenAI spans convention); ``error.type`` is a fully qualified class name or a low-cardinality
code, the same everywhere goagent-py records one (docs/reliability.md).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from goagent_py import Agent, ToolCall, tool
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.compaction import Summarize, Tiered
from goagent_py.memory.compactor import Compactor
from goagent_py.messages import Message, assistant_message, user_message
from goagent_py.otel import instrument
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _spans(exporter: InMemorySpanExporter, name: str) -> list[ReadableSpan]:
    return [s for s in exporter.get_finished_spans() if s.name == name]


@tool
def lookup(q: str) -> str:
    """Look a word up in the company glossary.

    Args:
        q: the word.
    """
    return f"{q}: a thing"


async def test_a_tool_span_carries_the_description_the_model_was_offered(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    agent = Agent(
        provider=ScriptedProvider(
            tool_call_response(ToolCall("c1", "lookup", {"q": "widget"})), text_response("ok")
        ),
        model="m",
        tools=[lookup],
        hooks=instrument(provider),  # content capture off: the description is not content
    )
    await agent.run("what is a widget?")
    (span,) = _spans(exporter, "execute_tool lookup")
    attributes = dict(span.attributes or {})
    assert attributes["gen_ai.tool.description"] == lookup.definition.description
    assert "gen_ai.tool.call.arguments" not in attributes


async def test_a_huge_or_broken_tool_description_is_bounded_and_valid(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced

    @tool(description="Search. " + "x" * 100_000 + "\ud800")
    def search(q: str) -> str:
        return "found"

    agent = Agent(
        provider=ScriptedProvider(
            tool_call_response(ToolCall("c1", "search", {"q": "a"})), text_response("ok")
        ),
        model="m",
        tools=[search],
        hooks=instrument(provider),
    )
    await agent.run("go")
    (span,) = _spans(exporter, "execute_tool search")
    description = str(dict(span.attributes or {})["gen_ai.tool.description"])
    assert description.startswith("Search. xxx")
    assert len(description) <= 1024
    description.encode("utf-8")  # valid Unicode: an OTLP exporter would drop it otherwise


async def test_a_made_up_tool_has_no_description(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    agent = Agent(
        provider=ScriptedProvider(
            tool_call_response(ToolCall("c1", "nosuch", {})), text_response("ok")
        ),
        model="m",
        tools=[lookup],
        hooks=instrument(provider),
    )
    await agent.run("go")
    (span,) = _spans(exporter, "execute_tool")
    assert "gen_ai.tool.description" not in dict(span.attributes or {})


class _FailingSummariser:
    async def complete(self, request: Any) -> Any:
        raise RuntimeError("summariser down")


def _conversation(turns: int) -> list[Message]:
    out: list[Message] = []
    for i in range(turns):
        out += [user_message(f"question {i} " + "words " * 40), assistant_message("answer " * 40)]
    return out


async def test_a_failed_compaction_reads_a_qualified_error_type(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    compactor = Compactor(
        Tiered([Summarize(_FailingSummariser())]), context_window=1000, tracer_provider=provider
    )
    await compactor(_conversation(12))
    (span,) = _spans(exporter, "compact_context")
    error_type = dict(span.attributes or {})["error.type"]
    assert error_type == "goagent_py.memory.compaction.CompactionError"
    assert span.instrumentation_scope is not None
    assert span.instrumentation_scope.name == "goagent_py"


async def test_an_image_a_tool_returned_is_described_in_the_next_model_calls_input(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    import json

    from goagent_py.messages import ImageBlock, TextBlock
    from goagent_py.tools import tool_blocks_func

    provider, exporter = traced
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40

    async def screenshot(args: dict[str, Any]) -> list[Any]:
        return [TextBlock("the screen:"), ImageBlock(png, "image/png")]

    shot = tool_blocks_func("screenshot", "Take a screenshot.", None, screenshot)
    agent = Agent(
        provider=ScriptedProvider(
            tool_call_response(ToolCall("c1", "screenshot", {})), text_response("a window")
        ),
        model="m",
        tools=[shot],
        hooks=instrument(provider, capture_content=True),
    )
    await agent.run("what is on screen?")
    second = _spans(exporter, "chat m")[1]
    messages = json.loads(str(dict(second.attributes or {})["gen_ai.input.messages"]))
    (response,) = [p for m in messages for p in m["parts"] if p["type"] == "tool_call_response"]
    assert response["response"] == [
        {"type": "text", "content": "the screen:"},
        {"type": "image", "mime_type": "image/png", "size": len(png)},
    ]
    tool_span = _spans(exporter, "execute_tool screenshot")[0]
    recorded = json.loads(str(dict(tool_span.attributes or {})["gen_ai.tool.call.result"]))
    assert recorded == response["response"]  # one description of one result, both places


async def test_a_tool_whose_schema_changes_every_run_is_remembered_once(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    import json

    from goagent_py.messages import TextBlock
    from goagent_py.provider import CompletionRequest
    from goagent_py.testing import FunctionProvider
    from goagent_py.tools import ToolDefinition

    provider, exporter = traced
    runs = 30

    class Login:
        """A tool whose schema lists the accounts there are now (a new enum each time)."""

        def __init__(self) -> None:
            self.seen = 0

        @property
        def definition(self) -> ToolDefinition:
            self.seen += 1
            return ToolDefinition(
                "login",
                f"Log in ({self.seen} accounts).",
                {
                    "type": "object",
                    "properties": {
                        "account": {"type": "string", "enum": [f"acct-{self.seen}"]},
                        "password": {"type": "string", "format": "password", "writeOnly": True},
                    },
                },
            )

        async def execute(self, args: dict[str, Any]) -> list[Any]:
            return [TextBlock("ok")]

    def model(request: CompletionRequest) -> Any:
        if request.messages[-1].role.value == "user":
            n = len(request.messages)
            return tool_call_response(
                ToolCall(f"c{n}", "login", {"account": "a", "password": f"hunter{n}"})
            )
        return text_response("done")

    # One hook set for the life of a server: many runs, one conversation.
    hooks = instrument(provider, capture_content=True)
    memory = ShortTermMemory()
    login = Login()
    for _ in range(runs):
        agent = Agent(
            provider=FunctionProvider(model),
            model="m",
            tools=[login],
            hooks=hooks,
            short_term_memory=memory,
        )
        await agent.run("log in")
    assert login.seen >= runs  # the schema did change, run after run
    telemetry: Any = hooks.on_run_start.__self__  # type: ignore[union-attr]
    # One schema as far as secrets go: what it lists and says marks nothing secret.
    assert len(telemetry._secrets["login"]) == 1
    last = [s for s in exporter.get_finished_spans() if s.name == "chat m"][-1]
    recorded = str(dict(last.attributes or {})["gen_ai.input.messages"])
    assert "hunter" not in recorded
    assert json.loads(recorded)


def test_schemas_that_differ_in_what_is_secret_are_both_remembered() -> None:
    from goagent_py.otel._content import secrecy_key

    def schema(title: dict[str, Any], accounts: list[str]) -> dict[str, Any]:
        return {
            "type": "object",
            "properties": {
                "title": title,  # a property named like a keyword
                "account": {"type": "string", "enum": accounts, "description": "which"},
                "password": {"type": "string", "writeOnly": True},
            },
        }

    plain = {"type": "string"}
    secret = {"type": "string", "format": "password"}
    assert secrecy_key(schema(plain, ["a"])) == secrecy_key(schema(plain, ["a", "b"]))
    assert secrecy_key(schema(plain, ["a"])) != secrecy_key(schema(secret, ["a"]))
