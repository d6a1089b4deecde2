"""``Session.continue_`` takes what ``prompt`` takes for the run it starts: the run's ``deps``
and ``output_type`` (docs/sessions.md). Without them, a session whose tools read their deps
could not go on after an abort: every tool call of the continued run failed."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from pydantic import BaseModel

from goagent_py import Agent, AgentEnd, Session, tool
from goagent_py.output import FINAL_RESULT_TOOL
from goagent_py.testing import ScriptedProvider, tool_call_response
from goagent_py.tool_context import current_tool_context


@dataclass
class User:
    name: str


class City(BaseModel):
    name: str
    population: int


@tool
def whoami() -> str:
    """The signed-in user."""
    ctx = current_tool_context()
    assert ctx is not None
    return ctx.deps_as(User).name


async def _aborted_session(provider: ScriptedProvider) -> Session:
    """A session whose first run was aborted while its tool hung."""
    started = asyncio.Event()

    @tool
    async def hang() -> str:
        """Never ends."""
        started.set()
        await asyncio.Event().wait()
        return ""

    session = Session(Agent(provider=provider, tools=[hang, whoami]))

    async def abort() -> None:
        await started.wait()
        session.abort()

    stopping = asyncio.create_task(abort())
    result = await session.prompt("go", deps=User("ana"))
    await stopping
    assert result.stop_reason == "aborted"
    return session


async def test_continue_gives_the_run_its_deps() -> None:
    provider = ScriptedProvider(
        tool_call_response(("hang", {})), tool_call_response(("whoami", {})), "Hello ana."
    )
    session = await _aborted_session(provider)
    result = await session.continue_(deps=User("ana"))
    tool_result = result.messages[-2]
    assert tool_result.text == "ana"
    assert not tool_result.is_error
    assert result.text == "Hello ana."


async def test_continue_can_ask_for_a_typed_output() -> None:
    provider = ScriptedProvider(
        tool_call_response(("hang", {})),
        tool_call_response((FINAL_RESULT_TOOL, {"name": "Paris", "population": 2})),
    )
    session = await _aborted_session(provider)
    result = await session.continue_(output_type=City)
    assert result.output == City(name="Paris", population=2)
    assert any(t.name == FINAL_RESULT_TOOL for t in provider.requests[-1].tools)


async def test_stream_continue_takes_them_too() -> None:
    provider = ScriptedProvider(
        tool_call_response(("hang", {})),
        tool_call_response(("whoami", {})),
        tool_call_response((FINAL_RESULT_TOOL, {"name": "ana's city", "population": 1})),
    )
    session = await _aborted_session(provider)
    events = [e async for e in session.stream_continue(deps=User("ana"), output_type=City)]
    end = events[-1]
    assert isinstance(end, AgentEnd)
    assert end.result.output == City(name="ana's city", population=1)
    assert "ana" in [m.text for m in end.result.messages]
