"""The loop's contracts with user code: what a callback is given it may read, never change the
record through; a stream consumer can tell a rejected typed answer from the next attempt
(docs/approvals.md, "Guardrails"; docs/typed-output.md, "Streaming: partial output")."""

from __future__ import annotations

import asyncio

import pytest
from pydantic import BaseModel

from goagent_py import (
    Agent,
    ConfigurationError,
    GuardrailContext,
    Hooks,
    Message,
    ModelResponse,
    ModelRetry,
    OutputDelta,
    OutputRetry,
    TextBlock,
    validate_transcript,
)
from goagent_py.output import OutputContext
from goagent_py.provider import CompletionRequest
from goagent_py.testing import ScriptedProvider, tool_call_response


def _meddler(value: object, ctx: GuardrailContext) -> None:
    """A guardrail that changes what it was given: the prompt's messages (input) and the
    conversation in its context."""
    if isinstance(value, list):
        for m in value:
            m.content.append(TextBlock("INJECTED"))
            m.metadata["touched"] = True
        value.append(Message("user", [TextBlock("APPENDED")]))
    for m in ctx.messages:
        m.content.append(TextBlock("INJECTED"))
    ctx.messages.clear()


def test_a_guardrail_that_changes_its_messages_leaves_the_record_as_it_was() -> None:
    """Guardrails were given the live messages of the run: one that changed them (a
    redacting guardrail "cleaning" the prompt) changed what the model read and what was kept."""
    provider = ScriptedProvider("Hello.")
    agent = Agent(provider=provider, input_guardrails=[_meddler], output_guardrails=[_meddler])
    result = agent.run_sync("Hi")
    sent = [m.text for m in provider.requests[0].messages]
    assert sent == ["Hi"]
    assert [m.text for m in result.messages] == ["Hi", "Hello."]
    assert all(not m.metadata.get("touched") for m in result.messages)
    assert result.output == "Hello."


class City(BaseModel):
    name: str
    population: int


def test_a_stream_marks_where_a_rejected_typed_answer_ends_and_the_retry_begins() -> None:
    """A typed answer that failed validation streamed its partial outputs, then the retry
    streamed its own with nothing between: a consumer showing the partial output could not
    tell the rejected attempt's from the next one's."""
    provider = ScriptedProvider(
        '{"name": "Paris", "population": 2102650}', '{"name": "Lyon", "population": 2}'
    )

    def not_paris(ctx: OutputContext, city: City) -> City:
        if city.name == "Paris":
            raise ModelRetry("not Paris: the population must be under a million")
        return city

    agent = Agent(
        provider=provider, output_type=City, output_mode="native", output_validators=[not_paris]
    )

    async def consume() -> list[object]:
        seen: list[object] = []
        async for event in agent.stream("Biggest city?"):
            if isinstance(event, OutputDelta | OutputRetry):
                seen.append(event)
        return seen

    seen = asyncio.run(consume())
    retries = [e for e in seen if isinstance(e, OutputRetry)]
    assert len(retries) == 1
    retry = retries[0]
    assert retry.attempt == 1
    assert "population" in retry.feedback
    at = seen.index(retry)
    before = [e.partial for e in seen[:at] if isinstance(e, OutputDelta)]
    after = [e.partial for e in seen[at + 1 :] if isinstance(e, OutputDelta)]
    assert before
    assert all(p.name == "Paris" for p in before)
    assert after
    assert after[-1] == City(name="Lyon", population=2)


def test_an_as_tool_deps_factory_that_raises_fails_the_run_for_the_developer() -> None:
    """A ``deps=`` factory that raised became a tool error the parent model read, with the
    developer's exception text, and the run went on as if the model had made a mistake."""
    child = Agent(provider=ScriptedProvider("child answer"), name="helper")

    def broken(parent: object) -> object:
        raise KeyError("secret-internal-key")

    provider = ScriptedProvider(tool_call_response(("helper", {"prompt": "go"})), "Done.")
    parent = Agent(
        provider=provider, tools=[child.as_tool(name="helper", description="Helps.", deps=broken)]
    )
    with pytest.raises(ConfigurationError, match="deps") as caught:
        parent.run_sync("Use the helper", deps=object())
    assert isinstance(caught.value.__cause__, KeyError)
    assert len(provider.requests) == 1  # the model was not asked again
    result = caught.value.run_result
    assert result is not None
    validate_transcript(result.messages)  # the call is answered: a valid record
    seen = [m.text for m in result.messages]
    assert not any("secret-internal-key" in text for text in seen)


def test_a_provider_hook_that_changes_what_it_was_given_leaves_the_record_as_it_was() -> None:
    """``on_provider_request`` got the request that was then sent, holding the record's
    messages, and ``on_provider_response`` the record's answer: a hook that changed them changed
    what the model read and what was kept."""

    def on_request(iteration: int, request: CompletionRequest) -> None:
        request.messages[0].content.append(TextBlock("HOOKED"))
        request.messages.append(Message("user", [TextBlock("APPENDED")]))

    def on_response(iteration: int, response: ModelResponse) -> None:
        if response.message is not None:
            response.message.content.append(TextBlock("HOOKED"))

    provider = ScriptedProvider("Hello.")
    agent = Agent(
        provider=provider,
        hooks=Hooks(on_provider_request=on_request, on_provider_response=on_response),
    )
    result = agent.run_sync("Hi")
    assert [m.text for m in provider.requests[0].messages] == ["Hi"]
    assert [m.text for m in result.messages] == ["Hi", "Hello."]


def test_an_as_tool_returns_function_that_raises_fails_the_run_for_the_developer() -> None:
    """As ``deps=``: a ``returns=`` function that raised was shown to the model."""
    child = Agent(provider=ScriptedProvider("child answer"), name="helper")

    def broken(result: object) -> str:
        raise AttributeError("secret-internal-field")

    provider = ScriptedProvider(tool_call_response(("helper", {"prompt": "go"})), "Done.")
    tool = child.as_tool(name="helper", description="Helps.", returns=broken)
    with pytest.raises(ConfigurationError, match="returns") as caught:
        Agent(provider=provider, tools=[tool]).run_sync("Use the helper")
    assert len(provider.requests) == 1
    result = caught.value.run_result
    assert result is not None
    validate_transcript(result.messages)
    assert not any("secret-internal-field" in m.text for m in result.messages)
