"""peerbench: pydantic-ai (pydantic-ai-slim) on its own FunctionModel test double.

Fake model: `pydantic_ai.models.function.FunctionModel(fn)`; fn looks at the last request: if it
carries a ToolReturnPart it answers with that result as text, else it asks for add(a=2, b=3).
"""

import _harness as h  # before any framework: telemetry off, bench/peers/ off sys.path
from pydantic_ai import Agent, Tool
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def canned(messages, info: AgentInfo) -> ModelResponse:
    for part in messages[-1].parts:
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(str(part.content))])
    return ModelResponse(parts=[ToolCallPart("add", {"a": 2, "b": 3}, tool_call_id="call_1")])


MODEL = FunctionModel(canned)
ADD_TOOL = Tool(h.add)


def make_agent():
    return Agent(MODEL, tools=[h.add], instructions=h.INSTRUCTIONS)


def make_agent_prebuilt():
    return Agent(MODEL, tools=[ADD_TOOL], instructions=h.INSTRUCTIONS)


AGENT = make_agent()
AGENT_ASYNC_TOOL = Agent(MODEL, tools=[h.add_async], instructions=h.INSTRUCTIONS)


async def _run(agent):
    return (await agent.run(h.PROMPT)).output


def make_run():
    return lambda: _run(AGENT)


def make_run_async_tool():
    return lambda: _run(AGENT_ASYNC_TOOL)


# -- the typed-output scenario (typed_output.py): one model call, text or a small model ---------

from pydantic import BaseModel  # noqa: E402


class City(BaseModel):
    name: str
    population: int


CITY = {"name": "Paris", "population": 2102650}


async def city_fn(messages, info: AgentInfo) -> ModelResponse:
    """The output tool's call with the city when the run asks for typed output, else text.
    Async: FunctionModel runs a sync function in a worker thread, which goagent_py's
    FunctionProvider does not, and a thread hop is not what this scenario measures."""
    if info.output_tools:  # pydantic-ai's default output mode for a model: a final_result tool
        return ModelResponse(
            parts=[ToolCallPart(info.output_tools[0].name, dict(CITY), tool_call_id="call_1")]
        )
    return ModelResponse(parts=[TextPart("Paris")])


CITY_MODEL = FunctionModel(city_fn)
PLAIN_AGENT = Agent(CITY_MODEL, instructions=h.INSTRUCTIONS)
TYPED_AGENT = Agent(CITY_MODEL, instructions=h.INSTRUCTIONS, output_type=City)


async def _output(agent):
    return (await agent.run(h.CITY_PROMPT)).output


async def _checked(agent, expected):
    # The harness checks each run's result against "5" (untimed); this comparison is timed,
    # and the same for every framework.
    output = await _output(agent)
    return h.EXPECTED if output == expected else output


def make_run_plain():
    return lambda: _checked(PLAIN_AGENT, "Paris")


def make_run_typed():
    return lambda: _checked(TYPED_AGENT, City(**CITY))


def verify():
    import asyncio

    result = asyncio.run(AGENT.run(h.PROMPT))
    msgs = result.all_messages()
    calls = [p for m in msgs for p in m.parts if isinstance(p, ToolCallPart)]
    returns = [p for m in msgs for p in m.parts if isinstance(p, ToolReturnPart)]
    responses = [m for m in msgs if isinstance(m, ModelResponse)]
    assert len(responses) == 2 and len(calls) == 1 and len(returns) == 1, msgs
    assert returns[0].content == 5 and result.output == "5", msgs
    assert asyncio.run(_output(PLAIN_AGENT)) == "Paris"
    city = asyncio.run(_output(TYPED_AGENT))
    assert isinstance(city, City) and city.model_dump() == CITY, city


if __name__ == "__main__":
    h.bench(
        framework="pydantic-ai",
        dist="pydantic-ai-slim",
        related_dists=("pydantic", "pydantic-core", "pydantic-graph"),
        import_stmt="from pydantic_ai import Agent",
        entry="pydantic_ai.Agent(...).run()",
        fake_model="pydantic_ai.models.function.FunctionModel (own test double)",
        mode="async",
        make_agent=make_agent,
        make_agent_prebuilt=make_agent_prebuilt,
        make_run=make_run,
        make_run_async_tool=make_run_async_tool,
        make_run_plain=make_run_plain,
        make_run_typed=make_run_typed,
        verify=verify,
        notes="sync tools run in a worker thread (anyio.to_thread)",
    )
