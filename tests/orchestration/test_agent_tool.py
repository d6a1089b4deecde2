"""Agents as tools: usage roll-up, forwarded events, history, failures and cancellation."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from pydantic import BaseModel

from goagent_py import (
    Agent,
    ConfigurationError,
    Hooks,
    Message,
    ProviderError,
    Role,
    TextBlock,
    ThinkingBlock,
    ToolExecutionError,
    Usage,
    tool,
)
from goagent_py.agent_tool import as_tool, unwrap
from goagent_py.events import AgentEnd, AgentStart, ToolExecutionEnd, ToolExecutionUpdate
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response
from goagent_py.tool_context import current_tool_context


def agent(provider: ScriptedProvider, **settings: Any) -> Agent:
    return Agent(provider=provider, model="m", **settings)


def delegate(name: str, prompt: str, usage: Usage | None = None) -> Any:
    return tool_call_response((name, {"prompt": prompt}), usage=usage)


async def test_the_childs_answer_is_the_result_and_its_usage_rolls_up() -> None:
    child_p = ScriptedProvider(text_response("found it", usage=Usage(100, 50)))
    child = agent(child_p, name="researcher")
    parent_p = ScriptedProvider(
        delegate("research", "look up X", Usage(10, 5)), text_response("done", usage=Usage(1, 1))
    )
    parent = agent(parent_p, tools=[as_tool(child, name="research", description="Research.")])

    result = await parent.run("go")

    assert result.text == "done"
    assert result.usage == Usage(111, 56)
    tool_msg = result.messages[2]
    assert tool_msg.role is Role.TOOL
    assert tool_msg.text == "found it"
    assert not tool_msg.is_error
    # history="none": the child sees only what its parent wrote.
    assert [m.text for m in child_p.requests[0].messages] == ["look up X"]


async def test_child_events_stream_through_the_parent_with_a_path() -> None:
    grandchild = agent(ScriptedProvider("deep answer"), name="deep")
    child = agent(
        ScriptedProvider(delegate("dig", "deeper"), "child answer"),
        tools=[as_tool(grandchild, name="dig", description="Dig.")],
    )
    parent = agent(
        ScriptedProvider(delegate("research", "q"), "top answer"),
        tools=[as_tool(child, name="research", description="Research.")],
    )

    events = [e async for e in parent.stream("go")]

    updates = [e for e in events if isinstance(e, ToolExecutionUpdate)]
    assert updates
    assert all(e.path == () for e in updates)
    nested = [unwrap(e) for e in updates]
    paths = {e.path for e in nested}
    assert paths == {("research",), ("research", "dig")}
    starts = [e.path for e in nested if isinstance(e, AgentStart)]
    assert starts == [("research",), ("research", "dig")]
    ends = [e for e in nested if isinstance(e, AgentEnd)]
    assert [e.result.text for e in ends] == ["deep answer", "child answer"]
    assert unwrap(events[0]) is events[0]


async def test_a_failing_child_is_an_error_result_not_a_crashed_parent() -> None:
    child = agent(ScriptedProvider(ProviderError("vendor down")))
    parent_p = ScriptedProvider(delegate("research", "q"), "I could not research it.")
    parent = agent(parent_p, tools=[as_tool(child, name="research", description="R.")])

    events = [e async for e in parent.stream("go")]

    end = next(e for e in events if isinstance(e, ToolExecutionEnd))
    assert isinstance(end.result.error, ToolExecutionError)
    assert isinstance(end.result.error.__cause__, ProviderError)
    final = next(e for e in events if isinstance(e, AgentEnd))
    assert final.result.error is None
    assert final.result.text == "I could not research it."
    tool_msg = parent_p.requests[1].messages[-1]
    assert tool_msg.is_error
    assert "vendor down" in tool_msg.text


async def test_the_childs_own_budget_and_its_usage_when_it_runs_out() -> None:
    @tool
    def noop() -> str:
        """Do nothing."""
        return "ok"

    child = agent(
        ScriptedProvider(tool_call_response(("noop", {}), usage=Usage(7, 7))), tools=[noop]
    )
    parent = agent(
        ScriptedProvider(delegate("research", "q"), "gave up"),
        tools=[as_tool(child, name="research", description="R.", max_iterations=1)],
    )

    result = await parent.run("go")

    assert result.text == "gave up"
    assert result.usage == Usage(7, 7)  # spent by the child before it ran out
    tool_msg = result.messages[2]
    assert tool_msg.is_error
    assert "max iterations (1)" in tool_msg.text
    assert child.options.max_iterations == 10  # the child agent itself is unchanged


async def test_history_last_user_and_function() -> None:
    seen: list[list[Message]] = []

    def pick(transcript: list[Message]) -> list[Message]:
        seen.append(transcript)
        return transcript

    last_p = ScriptedProvider("a")
    fn_p = ScriptedProvider("b")
    parent = agent(
        ScriptedProvider(
            tool_call_response(("last", {"prompt": "p1"}), ("fn", {"prompt": "p2"})), "done"
        ),
        tools=[
            as_tool(agent(last_p), name="last", description="L.", history="last_user"),
            as_tool(agent(fn_p), name="fn", description="F.", history=pick),
        ],
    )
    await parent.run(
        [Message(Role.USER, [TextBlock("earlier")]), Message(Role.USER, [TextBlock("the task")])]
    )

    assert [m.text for m in last_p.requests[0].messages] == ["the task", "p1"]
    # The function sees the conversation before the delegating message and the child gets it
    # without thinking blocks, then its prompt.
    assert [m.text for m in seen[0]] == ["earlier", "the task"]
    assert [m.text for m in fn_p.requests[0].messages] == ["earlier", "the task", "p2"]


async def test_thinking_never_crosses_to_the_child() -> None:
    fn_p = ScriptedProvider("b")
    thought = Message(Role.ASSISTANT, [ThinkingBlock("secret", "sig"), TextBlock("visible")])
    parent = agent(
        ScriptedProvider(delegate("fn", "p"), "done"),
        tools=[
            as_tool(agent(fn_p), name="fn", description="F.", history=lambda t: [t[0], thought])
        ],
    )

    await parent.run("task")

    sent = fn_p.requests[0].messages
    assert [m.text for m in sent] == ["task", "visible", "p"]
    assert not any(isinstance(b, ThinkingBlock) for m in sent for b in m.content)


async def test_cancelling_the_parent_cancels_the_child() -> None:
    entered = asyncio.Event()
    cancelled = asyncio.Event()

    @tool
    async def wait() -> str:
        """Wait forever."""
        entered.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "never"

    child = agent(ScriptedProvider(tool_call_response(("wait", {}))), tools=[wait])
    parent = agent(
        ScriptedProvider(delegate("research", "q")),
        tools=[as_tool(child, name="research", description="R.")],
    )
    task = asyncio.create_task(parent.run("go"))
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert cancelled.is_set()
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()


async def test_bad_arguments_and_custom_schemas() -> None:
    child_p = ScriptedProvider("ok", "ok")
    schema = {"type": "object", "properties": {"topic": {"type": "string"}}}
    t = as_tool(agent(child_p), name="r", description="R.", parameters=schema)
    assert t.definition.parameters == schema
    assert await t.execute({"topic": "bees"}) == [TextBlock("ok")]
    assert child_p.requests[0].messages[0].text == '{"topic":"bees"}'
    made = as_tool(
        agent(child_p), name="r2", description="R.", prompt=lambda a: f"About {a['topic']}"
    )
    await made.execute({"topic": "ants"})
    assert child_p.requests[1].messages[0].text == "About ants"
    plain = as_tool(agent(ScriptedProvider()), name="p", description="P.")
    from goagent_py.errors import ToolArgumentsError

    with pytest.raises(ToolArgumentsError):
        await plain.execute({"prompt": "  "})


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"name": "bad name", "description": "d"}, "invalid tool name"),
        ({"name": "ok", "description": " "}, "description"),
        ({"name": "ok", "description": "d", "history": "all"}, "history"),
        ({"name": "ok", "description": "d", "parameters": []}, "parameters"),
    ],
)
def test_misuse_is_a_configuration_error(kwargs: dict[str, Any], match: str) -> None:
    with pytest.raises(ConfigurationError, match=match):
        as_tool(agent(ScriptedProvider()), **kwargs)


async def test_returns_shapes_the_result() -> None:
    t = as_tool(
        agent(ScriptedProvider(text_response("x", usage=Usage(2, 3)))),
        name="r",
        description="R.",
        returns=lambda r: [TextBlock(f"{r.text} ({r.usage.total_tokens} tokens)")],
    )
    assert await t.execute({"prompt": "go"}) == [TextBlock("x (5 tokens)")]
    bad = as_tool(agent(ScriptedProvider("x")), name="b", description="B.", returns=lambda r: 3)  # type: ignore[arg-type,return-value]
    with pytest.raises(ConfigurationError, match="returns must give"):
        await bad.execute({"prompt": "go"})


async def test_closing_the_parents_stream_stops_the_child_at_once() -> None:
    """Issue 28: breaking out of a parent's stream() (and closing it, as ``async with
    aclosing`` or ``aclose()`` does) stops the as_tool child before aclose() returns, not when
    a garbage-collection finaliser gets round to it."""
    entered = asyncio.Event()
    child_ended: list[str] = []

    @tool
    async def wait() -> str:
        """Wait forever."""
        entered.set()
        try:
            await asyncio.Event().wait()
        finally:
            child_ended.append("tool")
        return "never"

    child = agent(
        ScriptedProvider(tool_call_response(("wait", {}))),
        tools=[wait],
        hooks=Hooks(on_run_end=lambda result: child_ended.append("run")),
    )
    parent = agent(
        ScriptedProvider(delegate("research", "q")),
        tools=[as_tool(child, name="research", description="R.")],
    )
    stream = parent.stream("go")
    async for event in stream:
        if isinstance(unwrap(event), ToolExecutionUpdate) or entered.is_set():
            break
    await entered.wait()
    # `stream` still references the generator, so no finaliser can be what closes it.
    assert child_ended == []
    await stream.aclose()  # type: ignore[attr-defined]
    assert child_ended == ["tool", "run"]
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()


class Brief(BaseModel):
    topic: str
    points: list[str]


async def test_a_typed_child_returns_json_to_the_model_and_the_object_to_the_code() -> None:
    child = agent(
        ScriptedProvider(
            tool_call_response(("final_result", {"topic": "batteries", "points": ["a", "b"]}))
        ),
        output_type=Brief,
    )
    parent_p = ScriptedProvider(delegate("research", "batteries"), "Done.")
    parent = agent(parent_p, tools=[as_tool(child, name="research", description="R.")])
    ends = [
        e.result
        async for e in parent.stream("brief me", deps={"user": "u1"})
        if isinstance(e, ToolExecutionEnd)
    ]
    # The parent's model reads the child's output as JSON...
    tool_message = parent_p.requests[1].messages[-1]
    assert tool_message.role is Role.TOOL
    assert json.loads(tool_message.text) == {"topic": "batteries", "points": ["a", "b"]}
    # ...and the parent's code gets the object.
    (end,) = ends
    assert end.details == Brief(topic="batteries", points=["a", "b"])


async def test_the_parents_deps_reach_the_child() -> None:
    seen: list[Any] = []

    @tool
    def whoami() -> str:
        """Who is asking."""
        ctx = current_tool_context()
        assert ctx is not None
        seen.append(ctx.deps)
        return "u1"

    child = agent(ScriptedProvider(tool_call_response(("whoami", {})), "u1"), tools=[whoami])
    parent = agent(
        ScriptedProvider(delegate("ask", "who?"), "ok"),
        tools=[as_tool(child, name="ask", description="A.")],
    )
    await parent.run("go", deps={"user": "u1"})
    assert seen == [{"user": "u1"}]
