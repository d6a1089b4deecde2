"""A flow's deps reach every agent run inside it, as ``as_tool`` gives a child its parent's."""

from __future__ import annotations

from typing import Any

from goagent_py import Agent, tool
from goagent_py.orchestration import Handoffs, Parallel, Pipeline, Supervisor
from goagent_py.testing import ScriptedProvider, tool_call_response
from goagent_py.tool_context import current_tool_context


@tool
def whose() -> str:
    """Whose request this is."""
    ctx = current_tool_context()
    assert ctx is not None
    return f"deps={ctx.deps!r}"


def reader(name: str) -> tuple[Agent, ScriptedProvider]:
    """An agent that calls ``whose`` once; its second request carries the answer."""
    script = ScriptedProvider(tool_call_response(("whose", {})), f"{name} done")
    return Agent(provider=script, model="m", name=name, tools=[whose]), script


def seen(script: ScriptedProvider) -> str:
    return script.requests[1].messages[-1].text


async def test_a_flow_run_gives_its_deps_to_every_agent_node() -> None:
    a, a_script = reader("a")
    b, b_script = reader("b")
    await Pipeline(a, Parallel(b)).run("go", deps="tenant-7")
    assert seen(a_script) == seen(b_script) == "deps='tenant-7'"


async def test_a_flow_stream_gives_its_deps_to_its_agents() -> None:
    a, a_script = reader("a")
    async for _ in Pipeline(a).stream("go", deps={"user": "u1"}):
        pass
    assert seen(a_script) == "deps={'user': 'u1'}"


async def test_a_flow_called_as_a_tool_gives_its_agents_the_callers_deps() -> None:
    a, a_script = reader("a")
    lead = Agent(
        provider=ScriptedProvider(tool_call_response(("team", {"prompt": "go"})), "fin"),
        model="m",
        tools=[Pipeline(a).as_tool(name="team", description="The team.")],
    )
    await lead.run("go", deps="tenant-7")
    assert seen(a_script) == "deps='tenant-7'"


async def test_handoffs_give_every_agent_the_flows_deps() -> None:
    triage = Agent(
        provider=ScriptedProvider(tool_call_response(("transfer_to_billing", {}))),
        model="m",
        name="triage",
    )
    billing, billing_script = reader("billing")
    await Handoffs([triage, billing]).run("refund", deps="tenant-7")
    assert seen(billing_script) == "deps='tenant-7'"


async def test_a_supervisors_members_get_the_flows_deps() -> None:
    member, member_script = reader("member")
    lead_script: Any = ScriptedProvider(tool_call_response(("member", {"prompt": "go"})), "fin")
    lead = Agent(provider=lead_script, model="m", name="lead")
    await Supervisor(lead, [member]).run("go", deps="tenant-7")
    assert seen(member_script) == "deps='tenant-7'"


async def test_a_routed_or_broadcast_member_gets_the_deps_its_as_tool_maps() -> None:
    for mode in ("route", "broadcast"):
        member, member_script = reader("member")
        narrowed = member.as_tool(
            name="member", description="M.", deps=lambda parent: f"narrow({parent})"
        )
        lead = Agent(provider=ScriptedProvider("member", "fin"), model="m", name="lead")
        await Supervisor(lead, [narrowed], mode=mode).run("go", deps="wide")  # type: ignore[arg-type]
        assert seen(member_script) == "deps='narrow(wide)'", mode


async def test_a_flow_tool_gives_its_agents_the_callers_deps_even_when_they_are_none() -> None:
    inner, inner_script = reader("inner")
    lead = Agent(
        provider=ScriptedProvider(tool_call_response(("team", {"prompt": "go"})), "fin"),
        model="m",
        tools=[Pipeline(inner).as_tool(name="team", description="The team.")],
    )

    async def runs_the_lead_without_deps(text: str) -> str:
        return (await lead.run(text)).text  # this run's deps are None, not the flow's

    await Pipeline(runs_the_lead_without_deps).run("go", deps="outer")
    assert seen(inner_script) == "deps=None"
