"""OpenTelemetry content capture against hostile and sensitive data.

With capture on (docs/reliability.md "Secrets in errors", goagent_py/otel docstring): a tool
argument its schema marks secret (``writeOnly``, what a pydantic ``SecretStr`` parameter makes)
reaches no span; what is recorded is bounded in size and stays the convention's JSON; text
that is not valid UTF-8 (a lone surrogate from a tool or a model) is recorded so that an
exporter can encode it, instead of the exporter dropping the attribute.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from pydantic import BaseModel, SecretStr

from goagent_py import Agent, ConfigurationError, ToolCall, tool
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.otel import instrument
from goagent_py.testing import FunctionProvider, ScriptedProvider, text_response, tool_call_response
from goagent_py.tools import tool_func

PASSWORD = "hunter2-correct-horse"
TOKEN = "nested-token-battery-staple"


@pytest.fixture
def traced() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    yield provider, exporter
    provider.shutdown()


def _values(spans: list[ReadableSpan]) -> Iterator[tuple[str, str, str]]:
    """(span, key, value) for every string attribute, event attribute and status text."""
    for span in spans:
        yield span.name, "status", span.status.description or ""
        for key, value in (span.attributes or {}).items():
            yield span.name, key, str(value)
        for event in span.events:
            for key, value in (event.attributes or {}).items():
                yield span.name, f"{event.name}.{key}", str(value)


def _attr(spans: list[ReadableSpan], name: str, key: str) -> list[str]:
    return [str(s.attributes[key]) for s in spans if s.name == name and key in (s.attributes or {})]


class Account(BaseModel):
    user: str
    token: SecretStr


@tool
def login(user: str, password: SecretStr, account: Account) -> str:
    """Log in.

    Args:
        user: who.
        password: their password.
        account: the account to use.
    """
    return f"welcome {user}"


async def test_a_secret_tool_argument_reaches_no_span_even_when_capturing(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    arguments = {"user": "ada", "password": PASSWORD, "account": {"user": "ada", "token": TOKEN}}
    agent = Agent(
        provider=ScriptedProvider(tool_call_response(ToolCall("c1", "login", arguments)), "in"),
        model="m",
        name="a",
        tools=[login],
        hooks=instrument(provider, capture_content=True),
    )

    result = await agent.run("log me in")

    assert result.text == "in"
    spans = list(exporter.get_finished_spans())
    leaked = [(s, k) for s, k, v in _values(spans) if PASSWORD in v or TOKEN in v]
    assert leaked == []
    # The rest of the call is still recorded: only the marked values are masked.
    [recorded] = _attr(spans, "execute_tool login", "gen_ai.tool.call.arguments")
    assert json.loads(recorded) == {
        "user": "ada",
        "password": "[REDACTED]",
        "account": {"user": "ada", "token": "[REDACTED]"},
    }
    # The next model call's input holds the call too, masked the same way.
    inputs = _attr(spans, "chat m", "gen_ai.input.messages")
    assert any('"password":"[REDACTED]"' in text for text in inputs)


async def test_captured_content_is_bounded_and_stays_json(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    huge = "y" * 2_000_000

    async def echo(args: dict[str, Any]) -> str:
        return "z" * 500_000

    agent = Agent(
        provider=ScriptedProvider(tool_call_response(ToolCall("c1", "echo", {"q": huge})), "ok"),
        model="m",
        name="a",
        tools=[tool_func("echo", "Echo.", None, echo)],
        max_tool_result_chars=None,
        hooks=instrument(provider, capture_content=True, max_content_chars=4096),
    )

    await agent.run("p" * 100_000)

    spans = list(exporter.get_finished_spans())
    for name, key, value in _values(spans):
        assert len(value) <= 4096, (name, key, len(value))
    [arguments] = _attr(spans, "execute_tool echo", "gen_ai.tool.call.arguments")
    assert json.loads(arguments)["q"].startswith("yyyy")
    assert "more characters" in arguments
    for text in _attr(spans, "chat m", "gen_ai.input.messages"):
        messages = json.loads(text)  # still the convention's JSON, not a cut-off string
        assert messages
        assert messages[-1]["role"] in {"user", "tool"}
    [result] = _attr(spans, "execute_tool echo", "gen_ai.tool.call.result")
    assert result.startswith("zzzz")


async def test_a_lone_surrogate_is_recorded_as_encodable_text(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced

    async def broken(args: dict[str, Any]) -> str:
        return "half \ud800 a pair"

    agent = Agent(
        provider=ScriptedProvider(
            tool_call_response(ToolCall("id-\udc80", "broken", {"q": "a\udc80b"})), "ok \udfff"
        ),
        model="m",
        name="a",
        tools=[tool_func("broken", "Broken.", None, broken)],
        hooks=instrument(provider, capture_content=True),
    )

    await agent.run("hello \ud83d")

    spans = list(exporter.get_finished_spans())
    for _name, _key, value in _values(spans):
        value.encode("utf-8")  # what every exporter does: it must not raise
    [result] = _attr(spans, "execute_tool broken", "gen_ai.tool.call.result")
    assert result == "half \ufffd a pair"
    try:
        from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    except ImportError:  # the OTLP exporter is not installed: the check above stands
        return
    encoded = encode_spans(spans).SerializeToString()
    assert "half \ufffd a pair".encode() in encoded


@pytest.mark.parametrize("bad", [0, 100, -1, 1.5, "4096", True])
def test_a_bound_too_small_or_not_an_int_is_refused_when_the_hooks_are_made(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="max_content_chars must be None"):
        instrument(max_content_chars=bad)


async def test_with_capture_on_each_chat_span_ends_when_its_call_does_not_at_the_run_end(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    provider, exporter = traced
    ended_before_second_call: list[str] = []
    calls = 0

    def model(request: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            return tool_call_response(ToolCall("c1", "echo", {"q": "x"}))
        # The first call's span is exported by now, with its answer: a run that hangs or dies
        # here still shows it (it waited for the run's end before).
        ended_before_second_call.extend(
            s.name for s in exporter.get_finished_spans() if s.name == "chat m"
        )
        return text_response("ok")

    async def echo(args: dict[str, Any]) -> str:
        return "echoed"

    agent = Agent(
        provider=FunctionProvider(model),
        model="m",
        name="a",
        tools=[tool_func("echo", "Echo.", None, echo)],
        hooks=instrument(provider, capture_content=True),
    )

    await agent.run("go")

    assert ended_before_second_call == ["chat m"]
    chats = [s for s in exporter.get_finished_spans() if s.name == "chat m"]
    outputs = [json.loads(str(s.attributes["gen_ai.output.messages"])) for s in chats]
    assert [o[0]["finish_reason"] for o in outputs] == ["tool_call", "stop"]
    assert outputs[0][0]["parts"][0]["name"] == "echo"
    assert outputs[1][0]["parts"] == [{"type": "text", "content": "ok"}]


async def test_deeply_nested_arguments_are_recorded_cut_at_a_depth_without_a_hook_error(
    traced: tuple[TracerProvider, InMemorySpanExporter], caplog: pytest.LogCaptureFixture
) -> None:
    provider, exporter = traced
    nested: dict[str, Any] = {"leaf": "x"}
    for _ in range(100):
        nested = {"n": nested}

    async def deep(args: dict[str, Any]) -> str:
        return "ok"

    agent = Agent(
        provider=ScriptedProvider(tool_call_response(ToolCall("c1", "deep", nested)), "done"),
        model="m",
        name="a",
        tools=[tool_func("deep", "Deep.", None, deep)],
        hooks=instrument(provider, capture_content=True),
    )

    await agent.run("go")

    assert not [r for r in caplog.records if "hook" in r.getMessage()]
    spans = list(exporter.get_finished_spans())
    [arguments] = _attr(spans, "execute_tool deep", "gen_ai.tool.call.arguments")
    assert "nested deeper than" in arguments
    json.loads(arguments)


async def test_a_secret_argument_stays_masked_in_later_runs_that_no_longer_offer_the_tool(
    traced: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    """The conversation carries the call into every later model call's input, also once the
    agent's tools changed: what a schema once marked secret stays masked."""
    provider, exporter = traced
    hooks = instrument(provider, capture_content=True)
    arguments = {"user": "ada", "password": PASSWORD, "account": {"user": "ada", "token": TOKEN}}
    memory = ShortTermMemory()  # one conversation, the agent's tools changed between turns
    first = Agent(
        provider=ScriptedProvider(tool_call_response(ToolCall("c1", "login", arguments)), "in"),
        model="m",
        name="a",
        tools=[login],
        hooks=hooks,
        short_term_memory=memory,
    )
    await first.run("log me in")
    later = first.replace(provider=ScriptedProvider("bye"), tools=[])

    await later.run("bye")

    spans = list(exporter.get_finished_spans())
    leaked = [(s, k) for s, k, v in _values(spans) if PASSWORD in v or TOKEN in v]
    assert leaked == []
