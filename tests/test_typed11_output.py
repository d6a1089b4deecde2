"""Typed output against what models really send back: broken JSON in the ``final_result`` call,
the JSON wrapped in prose or a fence, and answers so wrong that the list of errors is huge
(docs/typed-output.md, "Validation, retries and output validators")."""

from __future__ import annotations

import asyncio
import json

import pytest
from pydantic import BaseModel

from goagent_py import Agent, OutputDelta, OutputValidationError, ToolCall, tool
from goagent_py.messages import INVALID_ARGUMENTS_KEY, Message
from goagent_py.output import FINAL_RESULT_TOOL
from goagent_py.testing import ScriptedProvider, tool_call_response


class City(BaseModel):
    name: str
    population: int


def _broken(call_id: str, raw: str) -> object:
    """A ``final_result`` call whose arguments were not JSON: providers hand it on as
    ``{INVALID_ARGUMENTS_KEY: raw}`` (docs/architecture.md, rule 4)."""
    return tool_call_response(ToolCall(call_id, FINAL_RESULT_TOOL, {INVALID_ARGUMENTS_KEY: raw}))


def test_a_final_result_call_with_broken_json_is_told_so_and_kept_as_written() -> None:
    """The model reads that its JSON is malformed (not "name: Field required", which it could
    only answer by adding fields that are there), and the error keeps the text it wrote."""
    raw = '{"name": "Paris", "population": 2'
    p = ScriptedProvider(_broken("c1", raw), _broken("c2", raw))
    agent = Agent(provider=p, output_type=City, output_retries=1)
    with pytest.raises(OutputValidationError) as info:
        agent.run_sync("Largest city?")
    feedback = p.requests[1].messages[-1]
    assert feedback.tool_call_id == "c1"
    assert feedback.is_error
    assert "not valid JSON" in feedback.text
    assert "Field required" not in feedback.text
    assert info.value.raw_output == raw
    assert INVALID_ARGUMENTS_KEY not in str(info.value)


def test_a_final_result_call_with_broken_json_can_be_fixed_on_the_retry() -> None:
    p = ScriptedProvider(
        _broken("c1", "{name: Paris}"),
        tool_call_response((FINAL_RESULT_TOOL, {"response": {"name": "Paris", "population": 2}})),
    )
    result = Agent(provider=p, output_type=list[City] | City).run_sync("?")
    assert result.output == City(name="Paris", population=2)
    assert "not valid JSON" in p.requests[1].messages[-1].text


@pytest.mark.parametrize(
    "answer",
    [
        'Here is the city:\n```json\n{"name": "Paris", "population": 2}\n```\nAnything else?',
        '```JSON\n{"name": "Paris", "population": 2}\n```',
        '```\n{"name": "Paris", "population": 2}\n```',
        'Sure! {"name": "Paris", "population": 2}',
        '{"name": "Paris", "population": 2}\n\nThat is the largest city.',
    ],
)
@pytest.mark.parametrize("mode", ["prompted", "native"])
def test_the_json_object_is_read_out_of_prose_or_a_fence(mode: str, answer: str) -> None:
    """Models that are asked for JSON alone often wrap it anyway; the object is there, so it is
    taken rather than sent back as "not valid JSON (line 1 column 1)"."""
    p = ScriptedProvider(answer)
    agent = Agent(provider=p, output_type=City, output_mode=mode)  # type: ignore[arg-type]
    assert agent.run_sync("?").output == City(name="Paris", population=2)
    assert len(p.requests) == 1


def test_an_answer_with_no_json_says_what_to_send() -> None:
    p = ScriptedProvider("Paris, about two million people.", '{"name": "Paris", "population": 2}')
    agent = Agent(provider=p, output_type=City, output_mode="prompted")
    assert agent.run_sync("?").output == City(name="Paris", population=2)
    feedback = p.requests[1].messages[-1].text
    assert "not valid JSON" in feedback
    assert "one JSON object" in feedback
    assert "Paris, about two" in feedback  # what it wrote, so it sees what was wrong


def test_a_streamed_answer_in_a_fence_yields_partial_outputs() -> None:
    """Partial outputs read through a fence too (before, a fenced answer streamed none)."""
    p = ScriptedProvider('```json\n{"name": "Paris", "population": 2102650}\n```')
    agent = Agent(provider=p, output_type=City, output_mode="prompted")

    async def partials() -> list[object]:
        return [e.partial async for e in agent.stream("?") if isinstance(e, OutputDelta)]

    seen = asyncio.run(partials())
    assert seen
    assert seen[-1] == City(name="Paris", population=2102650)


def test_a_huge_invalid_answer_gets_a_bounded_list_of_errors() -> None:
    """5,000 wrong items made 384 KB of feedback (about 100,000 tokens) sent back to the model,
    and an exception message as long: the errors are listed up to a bound, the rest counted."""
    big = {"response": ["x"] * 5000}
    p = ScriptedProvider(*[tool_call_response((FINAL_RESULT_TOOL, big))] * 2)
    agent = Agent(provider=p, output_type=list[int], output_retries=1)
    with pytest.raises(OutputValidationError) as info:
        agent.run_sync("?")
    feedback = p.requests[1].messages[-1].text
    assert len(feedback) < 2_000
    assert "response.0: Input should be a valid integer" in feedback
    assert "4990 more" in feedback
    assert len(str(info.value)) < 3_000


def test_a_tool_called_with_a_huge_invalid_argument_gets_a_bounded_list_of_errors() -> None:
    """The same cause in tool arguments: every item's error went into the result."""

    @tool
    def total(values: list[int]) -> int:
        """Sum of the values.

        Args:
            values: the values.
        """
        return sum(values)

    p = ScriptedProvider(tool_call_response(("total", {"values": ["x"] * 5000})), "done")
    result = Agent(provider=p, tools=[total]).run_sync("?")
    error = result.messages[2]
    assert error.is_error
    assert "values.0: Input should be a valid integer" in error.text
    assert "4990 more" in error.text
    assert len(error.text) < 2_000


async def test_long_term_memory_keeps_a_typed_answer_not_an_empty_one() -> None:
    """A typed answer's message has no text (the answer is the call's arguments): long-term
    memory's write policy got an empty answer and stored the prompt with nothing."""
    from goagent_py.memory import LongTermMemory
    from goagent_py.memory.vector.in_memory import InMemoryVectorStore
    from goagent_py.testing import FakeEmbedder

    kept: list[tuple[str, str]] = []

    def policy(prompt: Message, answer: Message) -> list[Message]:
        kept.append((prompt.text, answer.text))
        return [prompt, answer]

    memory = LongTermMemory(FakeEmbedder(), InMemoryVectorStore(dimensions=16))
    provider = ScriptedProvider(
        tool_call_response((FINAL_RESULT_TOOL, {"name": "Paris", "population": 2}))
    )
    agent = Agent(provider=provider, output_type=City, long_term_memory=memory, write_policy=policy)
    await agent.run("Largest city?")
    assert kept == [("Largest city?", '{"name": "Paris", "population": 2}')]


async def test_a_trace_without_tools_keeps_a_typed_answer() -> None:
    """With ``short_term_trace_tools=False`` the answer is stored without its calls: a typed
    answer, being its ``final_result`` call, was dropped, so the next request held two user
    messages in a row and the model never saw what it had answered."""
    from goagent_py.memory import ShortTermMemory

    memory = ShortTermMemory()
    provider = ScriptedProvider(
        tool_call_response((FINAL_RESULT_TOOL, {"name": "Paris", "population": 2})), "ok"
    )
    agent = Agent(
        provider=provider, output_type=City, short_term_memory=memory, short_term_trace_tools=False
    )
    await agent.run("Largest city?")
    await agent.run("Thanks", output_type=str)
    sent = provider.requests[1].messages
    assert [m.role.value for m in sent] == ["user", "assistant", "user"]
    assert sent[1].text == '{"name": "Paris", "population": 2}'
    assert sent[1].tool_calls == []


def test_the_mode_kept_for_a_provider_follows_its_default_and_other_providers() -> None:
    """The mode is kept between runs (the protocol checks cost a third of a typed run); a
    provider whose default changes, or another provider, is asked again."""

    class Native(ScriptedProvider):
        default_output_mode = "native"

    answer = '{"name": "Paris", "population": 2}'
    first = Native(answer, answer)
    agent = Agent(provider=first, output_type=City)
    agent.run_sync("?")
    assert first.requests[0].output is not None  # native: the schema on the request
    first.default_output_mode = "prompted"  # type: ignore[misc]
    agent.run_sync("?")
    assert first.requests[1].output is None
    assert "JSON schema" in first.requests[1].system_prompt
    other = ScriptedProvider(tool_call_response((FINAL_RESULT_TOOL, json.loads(answer))))
    assert agent.replace(provider=other).run_sync("?").output == City(name="Paris", population=2)
    assert [t.name for t in other.requests[0].tools] == [FINAL_RESULT_TOOL]


def test_prepare_arguments_repairs_the_final_result_call_as_it_repairs_every_call() -> None:
    """``prepare_arguments`` repairs a model's raw arguments before validation, on every path
    that runs a call; the ``final_result`` call was judged as sent, so a model whose calls the
    repair fixes could never give a typed answer."""
    repaired: list[str] = []

    def rename(call: ToolCall) -> dict[str, object] | None:
        repaired.append(call.name)
        args = dict(call.arguments)
        if "city" in args:
            args["name"] = args.pop("city")
        return args

    p = ScriptedProvider(
        tool_call_response((FINAL_RESULT_TOOL, {"city": "Paris", "population": 2}))
    )
    agent = Agent(provider=p, output_type=City, prepare_arguments=rename)
    result = agent.run_sync("?")
    assert result.output == City(name="Paris", population=2)
    assert repaired == [FINAL_RESULT_TOOL]
    assert len(p.requests) == 1


def test_a_repair_that_raises_on_the_final_result_call_is_a_retry_the_model_reads() -> None:
    def broken(call: ToolCall) -> dict[str, object]:
        raise ValueError("no such field")

    p = ScriptedProvider(*[tool_call_response((FINAL_RESULT_TOOL, {"x": 1}))] * 2)
    agent = Agent(provider=p, output_type=City, prepare_arguments=broken, output_retries=1)
    with pytest.raises(OutputValidationError):
        agent.run_sync("?")
    assert "preparing the arguments failed: no such field" in p.requests[1].messages[-1].text


class _LongStream:
    """Streams ``text`` in 8-character deltas, as a fast vendor does."""

    def __init__(self, text: str) -> None:
        self.text = text

    async def complete(self, request: object) -> object:
        from goagent_py.testing import text_response

        return text_response(self.text)

    async def stream(self, request: object) -> object:
        from goagent_py.provider import StreamDone, TextDelta
        from goagent_py.testing import text_response

        for i in range(0, len(self.text), 8):
            yield TextDelta(self.text[i : i + 8])
        yield StreamDone(text_response(self.text))


def test_a_long_streamed_answer_is_parsed_for_partials_in_linear_work(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every delta parsed all the JSON so far: a 79 KB answer held the event loop 12 s (the
    work grows with the square of the answer). The characters parsed stay within a small
    multiple of the answer, and the partial outputs still grow to the end."""
    from goagent_py.output import OutputSpec

    parsed: list[int] = []
    partial = OutputSpec.partial

    def counted(self: OutputSpec[object], raw: str) -> object:
        parsed.append(len(raw))
        return partial(self, raw)

    monkeypatch.setattr(OutputSpec, "partial", counted)
    items = [f"item number {i}" for i in range(4000)]
    text = json.dumps({"response": items})
    agent = Agent(provider=_LongStream(text), output_type=list[str], output_mode="native")

    async def run() -> tuple[list[object], object]:
        seen: list[object] = []
        end = None
        async for event in agent.stream("?"):
            if isinstance(event, OutputDelta):
                seen.append(event.partial)
            end = event
        return seen, end

    seen, end = asyncio.run(run())
    assert sum(parsed) < 40 * len(text)  # was about len(text) ** 2 / 16: 5,000 times it
    assert len(seen) > 100
    lengths = [len(s) for s in seen]  # type: ignore[arg-type]
    assert lengths == sorted(lengths)
    assert seen[-1] == items[: len(seen[-1])]  # type: ignore[arg-type]
    assert end.result.output == items  # type: ignore[attr-defined]
