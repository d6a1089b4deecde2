"""Supervisor: members in parallel, usage and events of all, cancellation, and the modes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from goagent_py import Agent, ConfigurationError, Usage, tool
from goagent_py.agent_tool import as_tool, unwrap
from goagent_py.events import AgentEnd, AgentStart, ToolExecutionUpdate
from goagent_py.orchestration import NodeEnd, Supervisor
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response


def member(name: str, *responses: Any, tools: list[Any] | None = None) -> Agent:
    return Agent(
        provider=ScriptedProvider(*responses),
        model="m",
        name=name,
        system_prompt=f"The {name} specialist.\nMore detail.",
        tools=tools or [],
    )


def lead(*responses: Any) -> Agent:
    return Agent(provider=ScriptedProvider(*responses), model="m", name="lead")


def both_members_called(usage: Usage | None = None) -> Any:
    return tool_call_response(("a", {"prompt": "part A"}), ("b", {"prompt": "part B"}), usage=usage)


def meeting() -> tuple[Any, asyncio.Barrier]:
    """A tool each member calls; it returns only once both members are inside it."""
    barrier = asyncio.Barrier(2)

    @tool
    async def meet() -> str:
        """Wait for the other member."""
        await barrier.wait()
        return "met"

    return meet, barrier


async def test_two_members_run_in_parallel_and_all_usage_reaches_the_result() -> None:
    meet, _ = meeting()  # if the members ran one after the other, this would never return
    a = member("a", tool_call_response(("meet", {}), usage=Usage(1, 1)), "A done", tools=[meet])
    b = member("b", tool_call_response(("meet", {}), usage=Usage(2, 2)), "B done", tools=[meet])
    boss = lead(both_members_called(Usage(100, 10)), text_response("all done", usage=Usage(5, 5)))
    supervisor = Supervisor(boss, [a, b])

    async with asyncio.timeout(30):  # a safety net against a hang, not an assertion
        events = [e async for e in supervisor.stream("do it")]

    final = events[-1]
    assert isinstance(final, NodeEnd)
    assert final.result is not None
    assert final.result.text == "all done"
    assert final.result.usage == Usage(108, 18)
    nested = [unwrap(e) for e in events if isinstance(e, ToolExecutionUpdate)]
    starts = {e.path for e in nested if isinstance(e, AgentStart)}
    assert starts == {("supervisor", "lead", "a"), ("supervisor", "lead", "b")}
    ends = {e.path: e.result.text for e in nested if isinstance(e, AgentEnd)}
    assert ends == {("supervisor", "lead", "a"): "A done", ("supervisor", "lead", "b"): "B done"}
    lead_end = [e for e in events if isinstance(e, AgentEnd) and e.path == ("supervisor", "lead")]
    assert len(lead_end) == 1


async def test_cancelling_the_supervisor_cancels_both_members() -> None:
    inside = asyncio.Barrier(3)
    cancelled: list[str] = []

    @tool
    async def hang(who: str) -> str:
        """Hang until cancelled."""
        await inside.wait()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(who)
            raise
        return "never"

    a = member("a", tool_call_response(("hang", {"who": "a"})), tools=[hang])
    b = member("b", tool_call_response(("hang", {"who": "b"})), tools=[hang])
    supervisor = Supervisor(lead(both_members_called()), [a, b])
    task = asyncio.create_task(supervisor.run("do it"))

    async with asyncio.timeout(30):
        await inside.wait()  # both members are inside their tools
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    assert sorted(cancelled) == ["a", "b"]
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_a_failing_member_is_an_error_result_for_the_lead() -> None:
    from goagent_py import ProviderError

    boss_p = ScriptedProvider(both_members_called(), "partial answer")
    boss = Agent(provider=boss_p, model="m", name="lead")
    supervisor = Supervisor(boss, [member("a", "A done"), member("b", ProviderError("down"))])

    result = await supervisor.run("do it")

    assert result.text == "partial answer"
    results = boss_p.requests[1].messages[-2:]
    assert [m.is_error for m in results] == [False, True]


async def test_route_mode_runs_the_member_the_lead_names() -> None:
    supervisor = Supervisor(lead("b"), [member("a"), member("b", "B answers")], mode="route")
    result = await supervisor.run("question")
    assert result.text == "B answers"
    assert result.trace == ("lead", "b")


async def test_broadcast_mode_asks_everyone_then_the_lead_writes() -> None:
    boss_p = ScriptedProvider("synthesis")
    boss = Agent(provider=boss_p, model="m", name="lead")
    supervisor = Supervisor(boss, [member("a", "from A"), member("b", "from B")], mode="broadcast")

    result = await supervisor.run("question")

    assert result.text == "synthesis"
    prompt = boss_p.requests[0].messages[0].text
    assert '<answer member="a">\nfrom A\n</answer>' in prompt  # data, enclosed (review16)
    assert '<answer member="b">\nfrom B\n</answer>' in prompt
    assert "question" in prompt


async def test_member_descriptions_come_from_their_system_prompt_or_as_tool() -> None:
    custom = as_tool(member("c"), name="critic", description="Finds flaws.")
    supervisor = Supervisor(lead(), [member("a"), custom])
    assert [(t.name, t.definition.description) for t in supervisor.members] == [
        ("a", "The a specialist."),
        ("critic", "Finds flaws."),
    ]


def test_supervisor_misuse() -> None:
    with pytest.raises(ConfigurationError, match="at least one member"):
        Supervisor(lead(), [])
    with pytest.raises(ConfigurationError, match="needs a name"):
        Supervisor(lead(), [Agent(provider=ScriptedProvider(), model="m")])
    with pytest.raises(ConfigurationError, match="repeat"):
        Supervisor(lead(), [member("a"), member("a")])
    with pytest.raises(ConfigurationError, match="mode"):
        Supervisor(lead(), [member("a")], mode="vote")  # type: ignore[arg-type]


async def test_aborting_a_session_cancels_both_sub_agents_and_keeps_a_valid_transcript() -> None:
    from goagent_py import Role, Session, StopReason

    inside = asyncio.Barrier(3)
    cancelled: list[str] = []

    @tool
    async def hang(who: str) -> str:
        """Hang until cancelled."""
        await inside.wait()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(who)
            raise
        return "never"

    a = member("a", tool_call_response(("hang", {"who": "a"})), tools=[hang])
    b = member("b", tool_call_response(("hang", {"who": "b"})), tools=[hang])
    boss = Agent(
        provider=ScriptedProvider(both_members_called()),
        model="m",
        name="lead",
        tools=[as_tool(a, name="a", description="A."), as_tool(b, name="b", description="B.")],
    )
    session = Session(boss)
    task = asyncio.create_task(session.prompt("do it"))
    async with asyncio.timeout(30):
        await inside.wait()
    session.abort("now", reason="user pressed stop")
    result = await task

    assert result.stop_reason is StopReason.ABORTED
    assert sorted(cancelled) == ["a", "b"]
    tool_results = [m for m in session.transcript if m.role is Role.TOOL]
    assert [m.is_error for m in tool_results] == [True, True]
    assert asyncio.all_tasks() == {asyncio.current_task()}
