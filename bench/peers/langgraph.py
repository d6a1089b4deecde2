"""peerbench: LangGraph via langchain's `create_agent` (the LangGraph-built ReAct agent that
replaces the deprecated `langgraph.prebuilt.create_react_agent`).

Fake model: langchain-core's own `GenericFakeChatModel`, fed by a generator that forever yields
a fresh AIMessage with one tool call to add(a=2, b=3), then a fresh AIMessage("5"). The subclass
adds only what a real chat model has and the test double lacks: `bind_tools` (returns self) and a
native `_agenerate` (the base class would push the fake's `_generate` through a thread pool,
which a real async client never does). LangSmith tracing is off (LANGCHAIN_TRACING_V2 and
LANGSMITH_TRACING = false); no checkpointer.
"""

import _harness as h  # before any framework: telemetry off, bench/peers/ off sys.path
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool as lc_tool


def script():
    while True:
        yield AIMessage(
            content="",
            tool_calls=[
                {"name": "add", "args": {"a": 2, "b": 3}, "id": "call_1", "type": "tool_call"}
            ],
        )
        yield AIMessage(content="5")


class FakeToolChatModel(GenericFakeChatModel):
    def bind_tools(self, tools, **kwargs):
        return self

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        return self._generate(messages, stop=stop, **kwargs)


MODEL = FakeToolChatModel(messages=script())
ADD_TOOL = lc_tool(h.add)


def make_agent():
    return create_agent(MODEL, tools=[h.add], system_prompt=h.INSTRUCTIONS)


def make_agent_prebuilt():
    return create_agent(MODEL, tools=[ADD_TOOL], system_prompt=h.INSTRUCTIONS)


AGENT = make_agent()
# separate model/script so the two variants never share a half-consumed script
AGENT_ASYNC_TOOL = create_agent(
    FakeToolChatModel(messages=script()), tools=[h.add_async], system_prompt=h.INSTRUCTIONS
)


async def _run(agent):
    state = await agent.ainvoke({"messages": [{"role": "user", "content": h.PROMPT}]})
    return state["messages"][-1].content


def make_run():
    return lambda: _run(AGENT)


def make_run_async_tool():
    return lambda: _run(AGENT_ASYNC_TOOL)


def verify():
    import asyncio

    state = asyncio.run(AGENT.ainvoke({"messages": [{"role": "user", "content": h.PROMPT}]}))
    msgs = state["messages"]
    kinds = [type(m).__name__ for m in msgs]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"], kinds
    assert isinstance(msgs[2], ToolMessage) and msgs[2].content == "5", msgs
    assert msgs[-1].content == "5"


if __name__ == "__main__":
    h.bench(
        framework="langgraph",
        dist="langgraph",
        related_dists=(
            "langchain",
            "langchain-core",
            "langgraph-prebuilt",
            "langgraph-checkpoint",
            "langsmith",
        ),
        import_stmt="from langchain.agents import create_agent",
        entry="langchain.agents.create_agent(...).ainvoke()",
        fake_model="langchain_core GenericFakeChatModel + bind_tools/_agenerate shim",
        mode="async",
        make_agent=make_agent,
        make_agent_prebuilt=make_agent_prebuilt,
        make_run=make_run,
        make_run_async_tool=make_run_async_tool,
        verify=verify,
        notes="create_agent compiles a StateGraph per agent; sync tools run in a worker thread",
    )
