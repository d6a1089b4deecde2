"""Every entry that starts a run refuses an empty or whitespace-only prompt by the one rule
(goagent_py/_prompt.py, ``to_messages``), before a model is called or anything is stored:
flows, agents and flows called as tools, the served chat and the OpenAI-compatible routes
(docs/architecture.md, "Running an agent"). Agent, Session and durable entries: their own
tests (tests/test_loop15_contracts.py, tests/durable/test_durotel16_empty_prompts.py); A2A
and MCP: tests/a2a/test_proto14_a2a_hostile.py, tests/mcp/test_proto14_mcp_client_memory.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from goagent_py import Agent, InvalidInputError, ToolArgumentsError
from goagent_py.orchestration import Pipeline
from goagent_py.testing import ScriptedProvider

BLANK = ["", "   ", "\n\t "]


async def _flow(how: str, prompt: str) -> tuple[ScriptedProvider, list[str]]:
    provider = ScriptedProvider("Hi.")
    ran: list[str] = []

    async def first(text: str) -> str:
        ran.append(text)
        return text

    flow = Pipeline([first, Agent(provider=provider, name="a")], name="p")
    if how == "run":
        await flow.run(prompt)
    elif how == "stream":
        async for _ in flow.stream(prompt):
            pass
    elif how == "flow tool":
        await flow.as_tool(name="p", description="Runs p.").execute({"prompt": prompt})
    else:
        assert how == "agent tool"
        await (
            Agent(provider=provider, name="a")
            .as_tool(name="a", description="Asks a.")
            .execute({"prompt": prompt})
        )
    return provider, ran


@pytest.mark.parametrize("prompt", BLANK, ids=repr)
@pytest.mark.parametrize("how", ["run", "stream"])
async def test_a_flow_refuses_an_empty_input_before_any_node_runs(how: str, prompt: str) -> None:
    """A flow ran its nodes on nothing: a function node first, and then its agent's refusal
    came back wrapped in a StepFailedError."""
    ran: list[str] = []
    with pytest.raises(InvalidInputError, match="empty prompt"):
        _, ran = await _flow(how, prompt)
    assert ran == []


@pytest.mark.parametrize("prompt", BLANK, ids=repr)
@pytest.mark.parametrize("how", ["flow tool", "agent tool"])
async def test_a_model_made_call_with_an_empty_prompt_is_an_argument_error(
    how: str, prompt: str
) -> None:
    with pytest.raises(ToolArgumentsError, match="non-empty"):
        await _flow(how, prompt)


def _served(db: str) -> tuple[Any, ScriptedProvider]:
    from goagent_py.serve import ThreadContext, create_app

    provider = ScriptedProvider("Hi.")

    def factory(ctx: ThreadContext) -> Agent:
        return Agent(provider=provider, model="m", short_term_memory=ctx.short_term_memory)

    return create_app(factory, storage_path=db), provider


@pytest.mark.needs_extra("serve")
@pytest.mark.parametrize("prompt", BLANK, ids=repr)
@pytest.mark.parametrize("route", ["chat", "/v1/chat/completions", "/v1/responses"])
async def test_a_served_route_refuses_an_empty_prompt_with_a_400_and_stores_nothing(
    tmp_path: Path, route: str, prompt: str
) -> None:
    """The OpenAI-compatible routes took a whitespace-only user message: they made the thread,
    then the run failed on the model's side of the refusal."""
    app, provider = _served(str(tmp_path / "serve.db"))
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 1234))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        before = (await client.get("/api/threads")).json()
        if route == "chat":
            thread = (await client.post("/api/threads", json={})).json()
            before = (await client.get("/api/threads")).json()
            r = await client.post(f"/api/threads/{thread['id']}/runs", json={"message": prompt})
        elif route == "/v1/chat/completions":
            body = {"model": "m", "messages": [{"role": "user", "content": prompt}]}
            r = await client.post(route, json=body, headers={"X-Thread-Id": "t"})
        else:
            r = await client.post(
                route, json={"model": "m", "input": prompt}, headers={"X-Thread-Id": "t"}
            )
        after = (await client.get("/api/threads")).json()
    assert r.status_code == 400, r.text
    assert after == before
    assert provider.requests == []
