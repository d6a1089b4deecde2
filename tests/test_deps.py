"""A run's ``deps`` reach everything that runs on its behalf (issue 32): dynamic system prompts
(``instructions``), every hook (``current_hook_context()``), output validators, and sub-agents
(the parent's deps, or what ``as_tool(deps=...)`` makes of them). Concurrent runs with
different deps never see each other's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from goagent_py import (
    Agent,
    ConfigurationError,
    HookContext,
    Hooks,
    RunContext,
    current_hook_context,
)
from goagent_py.output import OutputContext
from goagent_py.testing import FunctionProvider, ScriptedProvider, tool_call_response
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import tool


@dataclass
class Deps:
    user: str


class Answer(BaseModel):
    text: str


@tool
def whoami() -> str:
    """The signed-in user."""
    ctx = current_tool_context()
    assert ctx is not None
    return ctx.deps_as(Deps).user


# -- dynamic system prompts ------------------------------------------------------------------


def test_instructions_see_the_deps_and_join_the_system_prompt_on_every_call() -> None:
    seen: list[tuple[str, int, int]] = []

    def greeting(run: RunContext) -> str:
        seen.append((run.deps.user, run.iteration, len(run.messages)))
        return f"The user is {run.deps.user}."

    async def clock(run: RunContext) -> str | None:
        return None if run.iteration == 0 else "Tool results are in."

    p = ScriptedProvider(tool_call_response(("whoami", {})), "Hello ann")
    agent = Agent(
        provider=p, tools=[whoami], system_prompt="Be brief.", instructions=[greeting, clock]
    )
    assert agent.run_sync("hi", deps=Deps("ann")).text == "Hello ann"
    assert [r.system_prompt for r in p.requests] == [
        "Be brief.\n\nThe user is ann.",
        "Be brief.\n\nThe user is ann.\n\nTool results are in.",
    ]
    assert seen == [("ann", 0, 1), ("ann", 1, 3)]


def test_one_instructions_function_alone_and_without_a_system_prompt() -> None:
    p = ScriptedProvider("ok")
    agent = Agent(provider=p, instructions=lambda run: f"User: {run.deps.user}")
    agent.run_sync("hi", deps=Deps("bob"))
    assert p.requests[0].system_prompt == "User: bob"


def test_replace_keeps_or_replaces_the_instructions() -> None:
    p = ScriptedProvider("a", "b", "c")
    agent = Agent(provider=p, instructions=lambda run: "first")
    agent.replace(max_iterations=3).run_sync("x")
    agent.replace(instructions=[lambda run: "second"]).run_sync("x")
    agent.run_sync("x")
    assert [r.system_prompt for r in p.requests] == ["first", "second", "first"]


def test_instructions_that_are_not_functions_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="system_prompt="):
        Agent(provider=ScriptedProvider("x"), instructions=["Be brief."])  # type: ignore[list-item]


# -- hooks -----------------------------------------------------------------------------------


def _recording_hooks(seen: list[tuple[str, str]]) -> Hooks:
    def note(name: str) -> Any:
        def hook(*args: Any) -> None:
            ctx = current_hook_context()
            assert ctx is not None
            seen.append((name, ctx.deps_as(Deps).user))

        return hook

    async def on_tool_call(call: Any) -> None:  # an async hook sees it too
        ctx = current_hook_context()
        assert ctx is not None
        seen.append(("on_tool_call", ctx.deps_as(Deps).user))

    return Hooks(
        on_run_start=note("on_run_start"),
        on_provider_request=note("on_provider_request"),
        on_provider_response=note("on_provider_response"),
        on_tool_call=on_tool_call,
        on_tool_result=note("on_tool_result"),
        on_response=note("on_response"),
        on_run_end=note("on_run_end"),
    )


def test_every_hook_sees_the_runs_deps() -> None:
    seen: list[tuple[str, str]] = []
    p = ScriptedProvider(tool_call_response(("whoami", {})), "done")
    agent = Agent(provider=p, tools=[whoami], hooks=_recording_hooks(seen))
    agent.run_sync("hi", deps=Deps("ann"))
    assert seen == [
        ("on_run_start", "ann"),
        ("on_provider_request", "ann"),
        ("on_provider_response", "ann"),
        ("on_tool_call", "ann"),
        ("on_tool_result", "ann"),
        ("on_provider_request", "ann"),
        ("on_provider_response", "ann"),
        ("on_response", "ann"),
        ("on_run_end", "ann"),
    ]
    assert current_hook_context() is None  # only while a hook runs


def test_concurrent_runs_hooks_see_their_own_deps() -> None:
    seen: list[tuple[str, str]] = []
    gate = asyncio.Event()
    inside: list[object] = []

    async def answer(request: Any) -> str:
        inside.append(request)
        if len(inside) == 2:
            gate.set()
        await gate.wait()  # both runs are inside their model call before either answers
        return "done"

    agent = Agent(provider=FunctionProvider(answer), hooks=_recording_hooks(seen))

    async def both() -> None:
        await asyncio.gather(*(agent.run("x", deps=Deps(user)) for user in ("ann", "bob")))

    asyncio.run(both())
    ends = sorted(user for name, user in seen if name == "on_run_end")
    assert ends == ["ann", "bob"]
    starts = [user for name, user in seen if name == "on_run_start"]
    assert sorted(starts) == ["ann", "bob"]


def test_a_stream_feeds_the_hooks_the_deps_too() -> None:
    seen: list[tuple[str, str]] = []
    agent = Agent(provider=ScriptedProvider("hello"), hooks=_recording_hooks(seen))

    async def consume() -> None:
        async for _ in agent.stream("x", deps=Deps("cy")):
            pass

    asyncio.run(consume())
    assert {user for _, user in seen} == {"cy"}
    assert ("on_run_end", "cy") in seen


def test_hook_context_deps_as_names_both_types() -> None:
    with pytest.raises(TypeError, match="str, not Deps"):
        HookContext("r", "plain").deps_as(Deps)


# -- output validators -----------------------------------------------------------------------


def test_an_output_validator_reads_the_deps() -> None:
    def mine(ctx: OutputContext, answer: Answer) -> Answer:
        return Answer(text=f"{answer.text} for {ctx.deps_as(Deps).user}")

    p = ScriptedProvider(tool_call_response(("final_result", {"text": "hi"})))
    agent = Agent(provider=p, output_type=Answer, output_validators=[mine])
    assert agent.run_sync("x", deps=Deps("dee")).output.text == "hi for dee"


# -- sub-agents ------------------------------------------------------------------------------


def _parent_and_child(**as_tool: Any) -> tuple[Agent[Any, Any], ScriptedProvider]:
    child_p = ScriptedProvider(tool_call_response(("whoami", {})), "child done")
    child = Agent(provider=child_p, tools=[whoami])
    parent_p = ScriptedProvider(tool_call_response(("helper", {"prompt": "who?"})), "parent done")
    parent = Agent(
        provider=parent_p,
        tools=[child.as_tool(name="helper", description="Asks who.", **as_tool)],
    )
    return parent, child_p


def test_a_sub_agent_gets_the_parents_deps() -> None:
    parent, child_p = _parent_and_child()
    assert parent.run_sync("go", deps=Deps("eve")).text == "parent done"
    assert child_p.requests[1].messages[-1].text == "eve"  # the child's tool read them


def test_a_sub_agent_gets_its_own_deps_made_from_the_parents() -> None:
    parent, child_p = _parent_and_child(deps=lambda d: Deps(d.user.upper()))
    parent.run_sync("go", deps=Deps("eve"))
    assert child_p.requests[1].messages[-1].text == "EVE"


def test_as_tool_deps_must_be_a_function() -> None:
    child = Agent(provider=ScriptedProvider("x"))
    with pytest.raises(ConfigurationError, match="lambda parent"):
        child.as_tool(name="helper", description="d", deps=Deps("x"))
