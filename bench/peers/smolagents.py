"""peerbench: smolagents ToolCallingAgent on a minimal custom Model subclass (sync framework).

Fake model: `CannedModel(smolagents.Model)`; generate looks at the last message: a tool response
-> a tool call to `final_answer` with that observation (smolagents ends a run only through its
final_answer tool, so the "final text" turn is a final_answer call), otherwise a tool call to
add(a=2, b=3). Built fresh per call. Logging off (verbosity_level=LogLevel.OFF); no monitoring
exporters; HF_HUB_OFFLINE=1. smolagents has no async run, so runs are plain sequential calls.
"""

import _harness as h  # before any framework: telemetry off, bench/peers/ off sys.path
from smolagents import ChatMessage, LogLevel, MessageRole, Model, ToolCallingAgent, tool
from smolagents.models import ChatMessageToolCall, ChatMessageToolCallFunction


class CannedModel(Model):
    def generate(
        self, messages, stop_sequences=None, response_format=None, tools_to_call_from=None, **kwargs
    ):
        last = messages[-1]
        role = last.role if hasattr(last, "role") else last["role"]
        if role == MessageRole.TOOL_RESPONSE:
            content = last.content if hasattr(last, "content") else last["content"]
            text = content[-1]["text"] if isinstance(content, list) else str(content)
            observation = text.rsplit("\n", 1)[-1]  # "Observation:\n5" -> "5"
            call = ChatMessageToolCall(
                id="call_2",
                type="function",
                function=ChatMessageToolCallFunction(
                    name="final_answer", arguments={"answer": observation}
                ),
            )
        else:
            call = ChatMessageToolCall(
                id="call_1",
                type="function",
                function=ChatMessageToolCallFunction(name="add", arguments={"a": 2, "b": 3}),
            )
        return ChatMessage(role=MessageRole.ASSISTANT, content=None, tool_calls=[call])


MODEL = CannedModel(model_id="canned")
ADD_TOOL = tool(h.add)


def make_agent():
    return ToolCallingAgent(
        tools=[tool(h.add)], model=MODEL, instructions=h.INSTRUCTIONS, verbosity_level=LogLevel.OFF
    )


def make_agent_prebuilt():
    return ToolCallingAgent(
        tools=[ADD_TOOL], model=MODEL, instructions=h.INSTRUCTIONS, verbosity_level=LogLevel.OFF
    )


AGENT = make_agent_prebuilt()


def make_run():
    return lambda: AGENT.run(h.PROMPT)  # reset=True (default): fresh memory every run


def verify():
    out = AGENT.run(h.PROMPT)
    steps = AGENT.memory.steps
    actions = [s for s in steps if type(s).__name__ == "ActionStep"]
    assert len(actions) == 2, steps
    assert [c.name for c in actions[0].tool_calls] == ["add"] and str(
        actions[0].observations
    ) == "5"
    assert [c.name for c in actions[1].tool_calls] == ["final_answer"] and out == "5"


if __name__ == "__main__":
    h.bench(
        framework="smolagents",
        dist="smolagents",
        related_dists=("huggingface-hub", "jinja2", "rich"),
        import_stmt="import smolagents",
        entry="smolagents.ToolCallingAgent(...).run()",
        fake_model="custom smolagents.Model subclass (canned ChatMessage with tool_calls)",
        mode="sync",
        make_agent=make_agent,
        make_agent_prebuilt=make_agent_prebuilt,
        make_run=make_run,
        make_run_async_tool=None,  # no async run, no async tools
        verify=verify,
        notes="sync only; the final turn is a final_answer tool call; ToolCallingAgent() parses its YAML prompt templates on every construction",
    )
