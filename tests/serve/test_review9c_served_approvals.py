"""Review 9c of served approvals (issue 35): what "always for this thread" may do without a
person, and for how long."""

from __future__ import annotations

import json
from typing import Any

from goagent_py import Agent, Role, ToolCall, tool
from goagent_py.serve import ThreadContext, create_app
from goagent_py.testing import FunctionProvider, text_response, tool_call_response

RAN: list[str] = []


@tool(requires_approval=True)
def ping(target: str) -> str:
    """Ping a host.

    Args:
        target: which host.
    """
    RAN.append(target)
    return f"pinged {target}"


async def test_always_approved_calls_keep_the_iteration_budget_of_the_turn(
    db: str, helpers: Any
) -> None:
    # Each auto-approved call ended the run DEFERRED and the server resumed it: every resume
    # started a fresh iteration budget, so a model that kept calling an "always" tool was
    # called without end, with no person left in the loop to stop it.
    calls: list[int] = []

    def answer(request: Any) -> Any:
        calls.append(1)
        if len(calls) > 40:  # the test's own brake: the defect never stops by itself
            return text_response("gave up")
        return tool_call_response(("ping", {"target": "db"}))

    def factory(ctx: ThreadContext) -> Agent:
        return Agent(
            provider=FunctionProvider(answer),
            model="scripted",
            tools=[ping],
            short_term_memory=ctx.short_term_memory,
            max_iterations=3,
        )

    RAN.clear()
    app = create_app(factory, storage_path=db)
    async with helpers.client_for(app) as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        r = await client.post(f"/api/threads/{tid}/runs", json={"message": "go"})
        first = helpers.sse_events(r.text)[-1]["outcome"]["interrupts"][0]["id"]
        r = await client.post(
            f"/api/threads/{tid}/decisions",
            json={"decisions": {first: {"decision": "approve", "always": True}}},
        )
        events = helpers.sse_events(r.text)
        shown = (await client.get(f"/api/threads/{tid}/messages")).json()
    await app.aclose()
    # The first run called the model once; the person's decision gets the agent's budget of
    # 3 model calls for all the calls "always" approves; then the person is asked again.
    assert len(calls) == 1 + 3
    assert RAN == ["db"] * 3
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"]["type"] == "interrupt"
    assert [p["name"] for p in shown["pending"]] == ["ping"]


_LOOKUP = {
    "type": "function",
    "function": {
        "name": "lookup",
        "description": "Look a word up (run by the client).",
        "parameters": {
            "type": "object",
            "properties": {"word": {"type": "string"}},
            "required": ["word"],
        },
    },
}


async def test_a_client_tool_call_that_reuses_an_id_waits_for_its_own_result(
    db: str, helpers: Any
) -> None:
    # The client's result was kept by call id for the whole run: a later call of the client's
    # tool with the same id (local models' servers number calls per turn) got the earlier
    # call's result at once, and the client was never asked to run it.
    def answer(request: Any) -> Any:
        results = [m for m in request.messages if m.role is Role.TOOL]
        if len(results) < 2:
            word = "ubuntu" if not results else "zulu"
            return tool_call_response(ToolCall("lookup-0", "lookup", {"word": word}))
        return text_response("; ".join(m.text for m in results))

    app = create_app(helpers.factory_for(FunctionProvider(answer)), storage_path=db)
    chat: list[dict[str, Any]] = [{"role": "user", "content": "what do they mean?"}]
    async with helpers.client_for(app) as client:

        async def complete() -> dict[str, Any]:
            r = await client.post(
                "/v1/chat/completions",
                json={"model": "goagent", "messages": chat, "tools": [_LOOKUP]},
            )
            assert r.status_code == 200, r.text
            return dict(r.json()["choices"][0])

        first = await complete()
        (call,) = first["message"]["tool_calls"]
        chat += [
            first["message"],
            {"role": "tool", "tool_call_id": call["id"], "content": "humanity"},
        ]
        second = await complete()
        assert second["finish_reason"] == "tool_calls", second
        (again,) = second["message"]["tool_calls"]
        assert json.loads(again["function"]["arguments"]) == {"word": "zulu"}
        chat += [
            second["message"],
            {"role": "tool", "tool_call_id": again["id"], "content": "people"},
        ]
        third = await complete()
    await app.aclose()
    # The model read each call's own result from the client.
    assert third["message"]["content"] == "humanity; people"


def _eraser(label: str) -> Any:
    @tool(requires_approval=True)
    def erase(name: str) -> str:
        """Erase something.

        Args:
            name: what.
        """
        return f"{label} erased {name}"

    return erase


async def test_always_for_a_sub_agents_tool_does_not_approve_the_parents_tool_of_that_name(
    tmp_path: Any,
) -> None:
    # "Always" on a sub-agent's call was remembered as its tool's name alone: the parent's
    # own tool of the same name (another tool, another scope), and the sub-agent's calls on
    # any other arguments, were then approved without asking.
    from goagent_py import Approve, Deny
    from goagent_py.memory import ShortTermMemory
    from goagent_py.memory.storage import SQLiteStorage
    from goagent_py.serve._approvals import auto_decisions
    from goagent_py.testing import ScriptedProvider

    db = tmp_path / "chat.db"
    scratch = Agent(
        provider=ScriptedProvider(*[tool_call_response(("erase", {"name": "tmp"})), "Gone."] * 2),
        tools=[_eraser("scratch")],
    )
    lead = Agent(
        provider=ScriptedProvider(
            tool_call_response(("scratch", {"prompt": "erase tmp"})),
            "Cleaned.",
            tool_call_response(("erase", {"name": "tmp"})),
            "Not then.",
            tool_call_response(("scratch", {"prompt": "erase tmp again"})),
        ),
        tools=[_eraser("lead"), scratch.as_tool(name="scratch", description="Scratch space.")],
        short_term_memory=ShortTermMemory(storage=SQLiteStorage(db, session_id="t")),
    )
    asked = await lead.run("tidy")
    (inner,) = asked.pending
    assert inner.via
    assert inner.name == "erase"
    done = await lead.resume({inner.id: Approve(always=True)})
    assert done.text == "Cleaned."
    own = await lead.run("and erase tmp yourself")
    assert [p.name for p in own.pending] == ["erase"]
    assert not own.pending[0].via
    memory = lead.options.short_term_memory
    assert memory is not None
    assert auto_decisions(await memory.transcript()) is None
    # Within its scope, "always" still holds: the sub-agent's same call is approved at once.
    await lead.resume({own.pending[0].id: Deny("not you")})
    again = await lead.run("once more")
    (sub,) = again.pending
    assert sub.via
    assert auto_decisions(await memory.transcript()) == {sub.id: Approve(token=sub.token)}
