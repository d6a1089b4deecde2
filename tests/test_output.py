"""Typed output: output_type in each mode, retries with feedback, validators, bad settings."""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any, Literal

import pytest
from pydantic import BaseModel
from typing_extensions import TypedDict  # pydantic needs it on Python < 3.12

from goagent_py import (
    Agent,
    AgentEnd,
    ConfigurationError,
    ModelRetry,
    OutputDelta,
    OutputValidationError,
)
from goagent_py.memory import ShortTermMemory
from goagent_py.messages import Role, StopReason, TextBlock
from goagent_py.output import FINAL_RESULT_TOOL, OutputContext
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import tool


class City(BaseModel):
    name: str
    population: int


@dataclass
class Point:
    x: int
    y: int


class Person(TypedDict):
    name: str
    age: int


def final(args: object) -> object:
    return tool_call_response((FINAL_RESULT_TOOL, args))  # type: ignore[arg-type]


def test_tool_mode_is_the_default_and_returns_the_model() -> None:
    p = ScriptedProvider(final({"name": "Paris", "population": 2_100_000}))
    result = Agent(provider=p, output_type=City).run_sync("Paris?")
    assert result.output == City(name="Paris", population=2_100_000)
    assert json.loads(result.text) == {"name": "Paris", "population": 2_100_000}
    (definition,) = p.requests[0].tools
    assert definition.name == FINAL_RESULT_TOOL
    assert definition.parameters["required"] == ["name", "population"]
    assert p.requests[0].output is None
    # The transcript stays well formed: the final_result call has its result.
    assert [m.role for m in result.messages] == [Role.USER, Role.ASSISTANT, Role.TOOL]


def test_an_invalid_output_goes_back_with_the_errors_then_validates() -> None:
    p = ScriptedProvider(
        final({"name": "Paris", "population": "many"}),
        final({"name": "Paris", "population": 3}),
    )
    result = Agent(provider=p, output_type=City).run_sync("Paris?")
    assert result.output == City(name="Paris", population=3)
    feedback = p.requests[1].messages[-1]
    assert feedback.role is Role.TOOL
    assert feedback.is_error
    assert "population" in feedback.text
    assert "integer" in feedback.text


def test_retries_are_bounded_and_the_error_carries_the_last_output() -> None:
    bad = {"name": "Paris"}
    p = ScriptedProvider(final(bad), final(bad), final(bad), final(bad))
    agent = Agent(provider=p, output_type=City, output_retries=2)
    with pytest.raises(OutputValidationError) as info:
        agent.run_sync("Paris?")
    assert json.loads(info.value.raw_output) == bad
    assert "population" in info.value.errors
    assert info.value.retries == 2
    assert info.value.run_result is not None
    assert info.value.run_result.iterations == 3
    assert p.remaining == 1  # three tries, no more


def test_str_stays_plain_text() -> None:
    p = ScriptedProvider("hello")
    result = Agent(provider=p).run_sync("hi")
    assert result.output == "hello" == result.text
    assert p.requests[0].tools == []
    assert p.requests[0].output is None


@pytest.mark.parametrize(
    ("output_type", "args", "expected"),
    [
        (Point, {"x": 1, "y": 2}, Point(1, 2)),
        (Person, {"name": "Ada", "age": 36}, {"name": "Ada", "age": 36}),
        (list[int], {"response": [1, 2, 3]}, [1, 2, 3]),
        (Literal["spam", "ham"], {"response": "ham"}, "ham"),
        (City | Point, {"response": {"x": 5, "y": 6}}, Point(5, 6)),
    ],
)
def test_each_kind_of_output_type(output_type: object, args: object, expected: object) -> None:
    p = ScriptedProvider(final(args))
    result = Agent(provider=p, output_type=output_type).run_sync("go")
    assert result.output == expected
    schema = p.requests[0].tools[0].parameters
    assert schema["type"] == "object"


def test_a_run_overrides_the_agent_output_type() -> None:
    p = ScriptedProvider(final({"response": [3, 4]}), "plain")
    agent = Agent(provider=p)
    assert agent.run_sync("go", output_type=list[int]).output == [3, 4]
    assert agent.run_sync("again").output == "plain"


def test_native_mode_sends_the_schema_and_retries_with_a_user_message() -> None:
    p = ScriptedProvider('{"name": "Rome"}', '{"name": "Rome", "population": 5}')
    agent = Agent(provider=p, output_type=City, output_mode="native")
    result = agent.run_sync("Rome?")
    assert result.output == City(name="Rome", population=5)
    request = p.requests[0]
    assert request.tools == []
    assert request.output is not None
    assert request.output.name == "City"
    assert request.output.schema["properties"]["population"]["type"] == "integer"
    retry = p.requests[1].messages[-1]
    assert retry.role is Role.USER
    assert "population" in retry.text


def test_prompted_mode_puts_the_schema_in_the_system_prompt_and_reads_a_fence() -> None:
    p = ScriptedProvider('```json\n{"x": 1, "y": 2}\n```')
    agent = Agent(provider=p, output_type=Point, output_mode="prompted", system_prompt="Be brief.")
    assert agent.run_sync("go").output == Point(1, 2)
    prompt = p.requests[0].system_prompt
    assert prompt.startswith("Be brief.")
    assert '"required": ["x", "y"]' in prompt


def test_tool_mode_sends_a_text_answer_back() -> None:
    p = ScriptedProvider("It is Paris", final({"name": "Paris", "population": 1}))
    result = Agent(provider=p, output_type=City).run_sync("go")
    assert result.output.name == "Paris"
    assert FINAL_RESULT_TOOL in p.requests[1].messages[-1].text


def test_output_validators_may_ask_for_a_retry_sync_or_async() -> None:
    seen: list[City] = []

    def positive(city: City) -> City:
        if city.population <= 0:
            raise ModelRetry("population must be positive")
        return city

    async def upper(city: City) -> City:
        await asyncio.sleep(0)
        seen.append(city)
        return city.model_copy(update={"name": city.name.upper()})

    p = ScriptedProvider(
        final({"name": "Nowhere", "population": 0}), final({"name": "Oslo", "population": 7})
    )
    agent = Agent(provider=p, output_type=City, output_validators=[positive, upper])
    result = agent.run_sync("go")
    assert result.output == City(name="OSLO", population=7)
    assert "population must be positive" in p.requests[1].messages[-1].text
    assert len(seen) == 1


def test_a_final_result_beside_another_call_ends_the_turn_without_running_it() -> None:
    ran: list[str] = []

    @tool
    def lookup(q: str) -> str:
        """Look something up.

        Args:
            q: the query.
        """
        ran.append(q)
        return "found"

    p = ScriptedProvider(
        tool_call_response(
            ("lookup", {"q": "x"}), (FINAL_RESULT_TOOL, {"name": "A", "population": 1})
        )
    )
    result = Agent(provider=p, tools=[lookup], output_type=City).run_sync("go")
    assert result.output == City(name="A", population=1)
    assert ran == []
    results = [m for m in result.messages if m.role is Role.TOOL]
    assert results[0].is_error
    assert "not run" in results[0].text
    assert not results[1].is_error


def test_ordinary_tools_still_run_before_the_final_result() -> None:
    @tool
    def population(city: str) -> int:
        """Population of a city.

        Args:
            city: the city.
        """
        return 42

    p = ScriptedProvider(
        tool_call_response(("population", {"city": "Oslo"})),
        final({"name": "Oslo", "population": 42}),
    )
    result = Agent(provider=p, tools=[population], output_type=City).run_sync("go")
    assert result.output.population == 42
    assert result.tool_calls == 2


def test_short_term_memory_keeps_the_final_turn_once() -> None:
    memory = ShortTermMemory()
    p = ScriptedProvider(final({"name": "A", "population": 1}))
    Agent(provider=p, output_type=City, short_term_memory=memory).run_sync("go")
    stored = asyncio.run(memory.messages())
    assert [m.role for m in stored] == [Role.USER, Role.ASSISTANT, Role.TOOL]


def test_the_stream_ends_with_the_typed_output() -> None:
    p = ScriptedProvider(final({"name": "A", "population": 1}))
    agent = Agent(provider=p, output_type=City)

    async def last() -> object:
        events = [e async for e in agent.stream("go")]
        end = events[-1]
        assert isinstance(end, AgentEnd)
        return end.result.output

    assert asyncio.run(last()) == City(name="A", population=1)


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        ({"output_type": 42}, "output_type=42"),
        ({"output_type": City, "output_mode": "json"}, "output_mode='json'"),
        ({"output_type": City, "output_retries": -1}, "output_retries"),
        ({"output_type": City, "output_validators": ["x"]}, "not a function"),
    ],
)
def test_bad_output_settings_fail_at_construction(settings: dict[str, object], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        Agent(provider=ScriptedProvider(), **settings)  # type: ignore[call-overload]


@dataclass
class Deps:
    user_id: str
    db: dict[str, int]


def test_deps_reach_tools_typed() -> None:
    @tool
    def balance() -> int:
        """The user's balance."""
        ctx = current_tool_context()
        assert ctx is not None
        deps = ctx.deps_as(Deps)
        return deps.db[deps.user_id]

    p = ScriptedProvider(tool_call_response(("balance", {})), "done")
    agent = Agent(provider=p, tools=[balance])
    agent.run_sync("go", deps=Deps("u1", {"u1": 17}))
    assert p.requests[1].messages[-1].text == "17"
    # Each run has its own deps; a run without any gives the tool a clear error.
    p2 = ScriptedProvider(tool_call_response(("balance", {})), "done")
    result = Agent(provider=p2, tools=[balance]).run_sync("go")
    assert "deps=Deps(...)" in result.messages[2].text


def _partials(agent: Agent[Any, object], **run: object) -> tuple[list[object], object]:
    async def go() -> tuple[list[object], object]:
        events = [e async for e in agent.stream("go", **run)]  # type: ignore[arg-type]
        end = events[-1]
        assert isinstance(end, AgentEnd)
        return [e.partial for e in events if isinstance(e, OutputDelta)], end.result.output

    return asyncio.run(go())


def test_a_streamed_native_answer_yields_growing_partial_outputs() -> None:
    # The scripted stream splits text at spaces: four deltas.
    p = ScriptedProvider('{"response": ["a", "b", "c"]}')
    agent = Agent(provider=p, output_type=list[str], output_mode="native")
    partials, output = _partials(agent)
    assert partials == [["a"], ["a", "b"], ["a", "b", "c"]]
    assert output == ["a", "b", "c"]


def test_a_streamed_final_result_call_yields_partials_from_its_arguments() -> None:
    p = ScriptedProvider(final({"name": "Oslo", "population": 7}))
    partials, output = _partials(Agent(provider=p, output_type=City))
    assert partials == [City(name="Oslo", population=7)]  # the scripted call streams whole
    assert output == partials[-1]


def test_a_plain_text_stream_has_no_partial_outputs() -> None:
    partials, output = _partials(Agent(provider=ScriptedProvider("just text")))
    assert partials == []
    assert output == "just text"


def test_an_output_validator_taking_two_arguments_gets_the_deps() -> None:
    def allowed(ctx: OutputContext, city: City) -> City:
        if city.name not in ctx.deps_as(Deps).db:
            raise ModelRetry(f"{city.name} is not one of {sorted(ctx.deps_as(Deps).db)}")
        return city

    p = ScriptedProvider(
        final({"name": "Rome", "population": 1}), final({"name": "Oslo", "population": 2})
    )
    agent = Agent(provider=p, output_type=City, output_validators=[allowed])
    result = agent.run_sync("go", deps=Deps("u", {"Oslo": 1}))
    assert result.output.name == "Oslo"
    assert "Rome is not one of ['Oslo']" in p.requests[1].messages[-1].text


def test_replace_keeps_the_output_settings_and_leaves_the_original_alone() -> None:
    def first(city: City) -> City:
        return city

    def second(city: City) -> City:
        raise ModelRetry("never")

    agent = Agent(provider=ScriptedProvider(), output_type=City, output_validators=[first])
    clone = agent.replace(output_validators=[second], output_retries=0)
    assert clone.options.output_type is City
    assert agent.options.output_validators == [first]
    assert clone.options.output_validators == [second]
    assert agent.replace(name="b").options.output_validators == [first]


# -- schemas a provider cannot express, bounded retries, tool calls beside an answer ----------


class Tree(BaseModel):
    name: str
    children: list[Tree] = []


class GrammarProvider(ScriptedProvider):
    """A scripted provider whose native mode is the default and cannot take recursion (as
    the embedded model's grammar builder cannot)."""

    default_output_mode = "native"

    def native_output_problem(self, schema: dict[str, Any]) -> str | None:
        return "$defs.Tree refers to itself" if "Tree" in schema.get("$defs", {}) else None


def test_a_default_native_mode_falls_back_to_the_tool_for_a_schema_it_cannot_take() -> None:
    p = GrammarProvider(final({"name": "root", "children": [{"name": "leaf"}]}))
    result = Agent(provider=p, output_type=Tree).run_sync("tree?")
    assert result.output == Tree(name="root", children=[Tree(name="leaf")])
    assert p.requests[0].output is None
    assert [t.name for t in p.requests[0].tools] == [FINAL_RESULT_TOOL]
    # A schema it can take keeps the provider's native default.
    q = GrammarProvider('{"name": "Oslo", "population": 1}')
    assert Agent(provider=q, output_type=City).run_sync("?").output.name == "Oslo"
    assert q.requests[0].output is not None


def test_asking_native_for_a_schema_the_provider_cannot_take_fails_at_construction() -> None:
    with pytest.raises(ConfigurationError, match=r"cannot express .*\$defs\.Tree refers to itself"):
        Agent(provider=GrammarProvider(), output_type=Tree, output_mode="native")
    # A run that asks for the type itself fails before any model call.
    p = GrammarProvider()
    agent = Agent(provider=p, output_mode="native", output_type=City)
    with pytest.raises(ConfigurationError, match="output_mode='tool' or 'prompted'"):
        agent.run_sync("?", output_type=Tree)
    assert p.requests == []


@pytest.mark.parametrize(
    ("mode", "answer"),
    [
        ("native", "not json at all"),
        ("prompted", '{"name": "Oslo"}'),
        ("tool", "a plain text answer, no final_result call"),
    ],
)
def test_an_output_that_never_validates_ends_after_the_retries(mode: str, answer: str) -> None:
    p = ScriptedProvider(*[answer] * 10)
    agent = Agent(provider=p, output_type=City, output_mode=mode, output_retries=2)  # type: ignore[arg-type]
    with pytest.raises(OutputValidationError) as info:
        agent.run_sync("?")
    assert len(p.requests) == 3  # the first answer and two retries, never more
    assert info.value.raw_output == answer
    assert info.value.run_result is not None


def test_a_validator_that_always_asks_again_ends_after_the_retries() -> None:
    def never(city: City) -> City:
        raise ModelRetry("try again")

    p = ScriptedProvider(*[final({"name": "A", "population": 1})] * 10)
    agent = Agent(provider=p, output_type=City, output_validators=[never], output_retries=3)
    with pytest.raises(OutputValidationError, match="try again"):
        agent.run_sync("?")
    assert len(p.requests) == 4


def test_native_mode_runs_tools_called_beside_an_answer_and_reads_the_next_answer() -> None:
    """The rule in native and prompted mode: a response with tool calls is not an answer, even
    with JSON text beside them; the calls run and the model answers again."""
    ran: list[str] = []

    @tool
    def population(city: str) -> int:
        """Population of a city.

        Args:
            city: the city.
        """
        ran.append(city)
        return 7

    both = tool_call_response(("population", {"city": "Oslo"}))
    both.message.content.insert(0, TextBlock('{"name": "Oslo", "population": 1}'))
    p = ScriptedProvider(both, '{"name": "Oslo", "population": 7}')
    agent = Agent(provider=p, tools=[population], output_type=City, output_mode="native")
    result = agent.run_sync("?")
    assert ran == ["Oslo"]
    assert result.output == City(name="Oslo", population=7)
    assert result.iterations == 2


def test_an_answer_cut_off_at_the_token_limit_says_so() -> None:
    """A grammar keeps every token valid JSON but cannot make the JSON end before max_tokens: a
    cut-off answer is not called "not valid JSON" but what it is, to the model and in the
    error (which says to raise max_tokens)."""
    cut = text_response('{"name": "Rome is the capital of', stop_reason=StopReason.MAX_TOKENS)
    p = ScriptedProvider(cut, cut)
    agent = Agent(provider=p, output_type=City, output_mode="native", max_tokens=16)
    with pytest.raises(OutputValidationError) as info:
        agent.run_sync("Rome?")
    retry = p.requests[1].messages[-1].text
    assert "cut off at the token limit" in retry
    assert "shorter" in retry
    assert info.value.cut_off
    assert "max_tokens=16" in str(info.value)
    assert info.value.raw_output == '{"name": "Rome is the capital of'


def test_a_complete_answer_at_the_token_limit_is_accepted() -> None:
    whole = text_response('{"name": "Rome", "population": 5}', stop_reason=StopReason.MAX_TOKENS)
    agent = Agent(provider=ScriptedProvider(whole), output_type=City, output_mode="native")
    assert agent.run_sync("Rome?").output == City(name="Rome", population=5)


@pytest.mark.parametrize("mode", ["native", "prompted", "tool"])
def test_a_refusal_ends_the_run_at_once_and_says_so(mode: str) -> None:
    """A refusal (OpenAI's ``refusal``, a ``content_filter`` or Anthropic ``refusal`` stop) is
    not an invalid answer to send back: asking again only repeats it at a cost (review6b)."""
    no = text_response("I can't help with that.", stop_reason=StopReason.REFUSAL)
    p = ScriptedProvider(*[no] * 4)
    agent = Agent(provider=p, output_type=City, output_mode=mode, output_retries=3)  # type: ignore[arg-type]
    with pytest.raises(OutputValidationError) as info:
        agent.run_sync("?")
    assert len(p.requests) == 1
    assert info.value.refused
    assert info.value.raw_output == "I can't help with that."
    assert "refused" in str(info.value)
    assert "retries" not in str(info.value)
    assert info.value.run_result is not None
