"""peerbench: openai-agents (the OpenAI Agents SDK) on a minimal custom Model subclass.

Fake model: `CannedModel(agents.models.interface.Model)`; get_response looks at the last input
item: a function_call_output -> an assistant message carrying that output as text, otherwise a
function_call to add(a=2, b=3). Built fresh per call, as a provider adapter would. (The SDK also
ships `agents.testing.ScriptedModel`; it deep-copies every call for inspection, so the minimal
subclass is the cheaper, fairer double.) Tracing is off: OPENAI_AGENTS_DISABLE_TRACING=1 plus
set_tracing_disabled(True).
"""

import _harness as h  # before any framework: telemetry off, bench/peers/ off sys.path
from agents import Agent, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from agents.models.interface import Model
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

set_tracing_disabled(True)


class CannedModel(Model):
    async def get_response(
        self,
        system_instructions,
        input,
        model_settings,
        tools,
        output_schema,
        handoffs,
        tracing,
        *,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
        **kwargs,
    ):
        last = input[-1] if isinstance(input, list) and input else None
        if isinstance(last, dict) and last.get("type") == "function_call_output":
            item = ResponseOutputMessage(
                id="msg_1",
                type="message",
                role="assistant",
                status="completed",
                content=[
                    ResponseOutputText(
                        text=str(last["output"]),
                        type="output_text",
                        annotations=[],
                        logprobs=[],
                    )
                ],
            )
        else:
            item = ResponseFunctionToolCall(
                id="fc_1",
                call_id="call_1",
                type="function_call",
                name="add",
                arguments='{"a":2,"b":3}',
            )
        return ModelResponse(output=[item], usage=Usage(), response_id=None)

    def stream_response(self, *args, **kwargs):
        raise NotImplementedError("not used by this benchmark")


MODEL = CannedModel()
ADD_TOOL = function_tool(h.add)


def make_agent():
    return Agent(
        name="bench", instructions=h.INSTRUCTIONS, model=MODEL, tools=[function_tool(h.add)]
    )


def make_agent_prebuilt():
    return Agent(name="bench", instructions=h.INSTRUCTIONS, model=MODEL, tools=[ADD_TOOL])


AGENT = make_agent_prebuilt()
AGENT_ASYNC_TOOL = Agent(
    name="bench", instructions=h.INSTRUCTIONS, model=MODEL, tools=[function_tool(h.add_async)]
)


async def _run(agent):
    return (await Runner.run(agent, h.PROMPT)).final_output


def make_run():
    return lambda: _run(AGENT)


def make_run_async_tool():
    return lambda: _run(AGENT_ASYNC_TOOL)


def verify():
    import asyncio

    from agents.items import MessageOutputItem, ToolCallItem, ToolCallOutputItem

    result = asyncio.run(Runner.run(AGENT, h.PROMPT))
    kinds = [type(i) for i in result.new_items]
    assert kinds == [ToolCallItem, ToolCallOutputItem, MessageOutputItem], kinds
    assert str(result.new_items[1].output) == "5" and result.final_output == "5"
    assert len(result.raw_responses) == 2
    assert AGENT_ASYNC_TOOL.tools[0].name == "add"


if __name__ == "__main__":
    h.bench(
        framework="openai-agents",
        dist="openai-agents",
        related_dists=("openai", "pydantic"),
        import_stmt="import agents",
        entry="agents.Runner.run(Agent(...))",
        fake_model="custom agents.models.interface.Model subclass (canned ModelResponse)",
        mode="async",
        make_agent=make_agent,
        make_agent_prebuilt=make_agent_prebuilt,
        make_run=make_run,
        make_run_async_tool=make_run_async_tool,
        verify=verify,
        notes="sync tools run in a worker thread (asyncio.to_thread); tracing disabled",
    )
