"""Several ``final_result`` calls in one response: the first valid one is the answer, and every
call of the response gets a result (docs/typed-output.md, "Rules of the tool mode")."""

from __future__ import annotations

from pydantic import BaseModel

from goagent_py import Agent
from goagent_py.messages import Role, ToolCall
from goagent_py.testing import ScriptedProvider, tool_call_response


class City(BaseModel):
    name: str
    population: int


async def test_an_invalid_final_result_before_a_valid_one_in_the_same_response_is_passed_over() -> (
    None
):
    provider = ScriptedProvider(
        tool_call_response(
            ToolCall("c1", "final_result", {"name": "Paris"}),  # population missing
            ToolCall("c2", "final_result", {"name": "Paris", "population": 2_100_000}),
        )
    )
    result = await Agent(provider=provider, model="m", output_type=City).run("Paris?")
    assert result.output == City(name="Paris", population=2_100_000)
    assert provider.calls == 1  # not asked again: it had answered
    results = {m.tool_call_id: m for m in result.messages if m.role is Role.TOOL}
    assert set(results) == {"c1", "c2"}
    assert not results["c2"].is_error
    assert results["c1"].is_error


async def test_no_valid_final_result_asks_again_with_the_first_ones_feedback() -> None:
    provider = ScriptedProvider(
        tool_call_response(
            ToolCall("c1", "final_result", {"name": "Paris"}),
            ToolCall("c2", "final_result", {"population": 2}),
        ),
        tool_call_response(ToolCall("c3", "final_result", {"name": "Paris", "population": 2})),
    )
    result = await Agent(provider=provider, model="m", output_type=City).run("Paris?")
    assert result.output == City(name="Paris", population=2)
    assert provider.calls == 2
    second = provider.requests[1].messages
    feedback = [m.text for m in second if m.role is Role.TOOL and m.tool_call_id == "c1"]
    assert "population" in feedback[0]
