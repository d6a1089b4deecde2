"""peerbench: agno on a minimal custom Model subclass.

Fake model: `CannedModel(agno.models.base.Model)`; (a)invoke looks at the last message: a tool
result -> ModelResponse(content=<that result>), otherwise a ModelResponse with one OpenAI-style
tool call to add(a=2, b=3). Built fresh per call. Telemetry off (AGNO_TELEMETRY=false, and
telemetry=False on the agent); no db, so nothing is persisted between runs.
"""

from dataclasses import dataclass

import _harness as h  # before any framework: telemetry off, bench/peers/ off sys.path
from agno.agent import Agent
from agno.models.base import Model
from agno.models.response import ModelResponse
from agno.tools import tool as agno_tool


@dataclass
class CannedModel(Model):
    id: str = "canned"
    name: str = "canned"
    provider: str = "peerbench"

    def _respond(self, messages):
        last = messages[-1] if messages else None
        if last is not None and last.role == "tool":
            return ModelResponse(role="assistant", content=str(last.content))
        return ModelResponse(
            role="assistant",
            tool_calls=[
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                }
            ],
        )

    def invoke(self, messages, **kwargs):
        return self._respond(messages)

    async def ainvoke(self, messages, **kwargs):
        return self._respond(messages)

    def invoke_stream(self, messages, **kwargs):
        yield self._respond(messages)

    async def ainvoke_stream(self, messages, **kwargs):
        yield self._respond(messages)

    def _parse_provider_response(self, response, **kwargs):
        return response

    def _parse_provider_response_delta(self, response):
        return response


MODEL = CannedModel()
ADD_TOOL = agno_tool(h.add)


def make_agent():
    return Agent(model=MODEL, tools=[h.add], instructions=h.INSTRUCTIONS, telemetry=False)


def make_agent_prebuilt():
    return Agent(model=MODEL, tools=[ADD_TOOL], instructions=h.INSTRUCTIONS, telemetry=False)


AGENT = make_agent()
AGENT_ASYNC_TOOL = Agent(
    model=MODEL, tools=[h.add_async], instructions=h.INSTRUCTIONS, telemetry=False
)


async def _run(agent):
    return (await agent.arun(h.PROMPT)).content


def make_run():
    return lambda: _run(AGENT)


def make_run_async_tool():
    return lambda: _run(AGENT_ASYNC_TOOL)


def verify():
    import asyncio

    out = asyncio.run(AGENT.arun(h.PROMPT))
    roles = [m.role for m in out.messages]
    assert roles == ["system", "user", "assistant", "tool", "assistant"], roles
    assert str(out.messages[3].content) == "5" and out.content == "5", out.messages
    assert len(out.tools or []) == 1 and out.tools[0].tool_name == "add", out.tools
    assert AGENT.telemetry is False


if __name__ == "__main__":
    h.bench(
        framework="agno",
        dist="agno",
        related_dists=("pydantic", "httpx"),
        import_stmt="from agno.agent import Agent",
        entry="agno.agent.Agent(...).arun()",
        fake_model="custom agno.models.base.Model subclass (canned ModelResponse)",
        mode="async",
        make_agent=make_agent,
        make_agent_prebuilt=make_agent_prebuilt,
        make_run=make_run,
        make_run_async_tool=make_run_async_tool,
        verify=verify,
        notes="tools are processed lazily at run time, not in Agent(); sync tools run in a worker thread",
    )
