"""AG-UI spoken exactly (issue 33): every event of runs with text, tools, thinking, an abort and
a failure parses with the ``ag-ui-protocol`` package's models, in an order the protocol accepts
(``check_agui``)."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import pytest

from goagent_py.errors import ProviderError
from goagent_py.messages import Message, Role, StopReason, TextBlock, ThinkingBlock, Usage
from goagent_py.provider import CompletionResponse
from goagent_py.serve import create_app
from goagent_py.testing import FunctionProvider, ScriptedProvider, tool_call_response
from goagent_py.tools import tool
from tests.serve.conftest import check_agui

pytest.importorskip("ag_ui")


def _thought(thinking: str, text: str) -> CompletionResponse:
    blocks = [ThinkingBlock(thinking, signature="sig"), TextBlock(text)]
    return CompletionResponse(Message(Role.ASSISTANT, blocks), StopReason.END_TURN, Usage())


@tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


@tool
def broken() -> str:
    """Always fails."""
    raise RuntimeError("no luck")


async def _run(app: Any, helpers: Any, *messages: str) -> list[list[dict[str, Any]]]:
    out = []
    async with helpers.client_for(app) as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        for text in messages:
            r = await client.post(f"/api/threads/{tid}/runs", json={"message": text})
            out.append(helpers.sse_events(r.text))
    await app.aclose()
    return out


def _types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


async def test_a_text_run(db: str, helpers: Any) -> None:
    app = create_app(helpers.factory_for(ScriptedProvider("hello there")), storage_path=db)
    (events,) = await _run(app, helpers, "hi")
    check_agui(events)
    # The two deltas were ready at once: one TEXT_MESSAGE_CONTENT with both (issue 36).
    assert _types(events) == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_FINISHED",
    ]
    assert events[2]["delta"] == "hello there"
    assert events[-1]["result"] == {"stopReason": "end_turn", "text": "hello there"}
    assert "outcome" not in events[-1]  # absent: success


async def test_tool_calls_pair_start_args_end_result(db: str, helpers: Any) -> None:
    provider = ScriptedProvider(
        tool_call_response(("add", {"a": 2, "b": 3}), ("broken", {}), text="Let me see."),
        "it is 5",
    )
    app = create_app(helpers.factory_for(provider, [add, broken]), storage_path=db)
    (events,) = await _run(app, helpers, "2+3?")
    parsed = check_agui(events)
    results = {e["toolCallId"]: e for e in events if e["type"] == "TOOL_CALL_RESULT"}
    names = {e["toolCallId"]: e["toolCallName"] for e in events if e["type"] == "TOOL_CALL_START"}
    assert sorted(names.values()) == ["add", "broken"]
    by_name = {names[k]: v for k, v in results.items()}
    assert by_name["add"]["content"] == "5"
    assert by_name["add"]["metadata"]["isError"] is False
    assert by_name["broken"]["metadata"]["isError"] is True
    # The text before the calls is its own message, ended before the first call starts.
    types = _types(events)
    assert types.index("TEXT_MESSAGE_END") < types.index("TOOL_CALL_START")
    assert type(parsed[-1]).__name__ == "RunFinishedEvent"


async def test_thinking_uses_reasoning_events_that_end_before_the_text(
    db: str, helpers: Any
) -> None:
    provider = ScriptedProvider(_thought("Let me think", "The answer"))
    app = create_app(helpers.factory_for(provider), storage_path=db)
    (events,) = await _run(app, helpers, "why?")
    check_agui(events)
    types = _types(events)
    assert not [t for t in types if t.startswith("THINKING")]  # the pre-1.0 names are gone
    assert types[1:7] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TEXT_MESSAGE_START",
    ]
    thought = "".join(e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT")
    assert thought == "Let me think"


async def test_a_provider_without_streaming_sends_whole_messages(db: str, helpers: Any) -> None:
    provider = FunctionProvider(lambda request: _thought("hmm", "done"))
    app = create_app(helpers.factory_for(provider), storage_path=db)
    (events,) = await _run(app, helpers, "x")
    check_agui(events)
    assert "REASONING_MESSAGE_CONTENT" in _types(events)
    assert events[-1]["result"]["text"] == "done"


async def test_a_failed_run_closes_what_it_opened_then_one_run_error(db: str, helpers: Any) -> None:
    provider = ScriptedProvider(
        tool_call_response(("add", {"a": 1, "b": 1})), ProviderError("vendor down")
    )
    app = create_app(helpers.factory_for(provider, [add]), storage_path=db)
    (events,) = await _run(app, helpers, "x")
    check_agui(events)
    assert events[-1]["type"] == "RUN_ERROR"
    assert "vendor down" in events[-1]["message"]
    assert events[-1]["code"] == "ProviderError"


async def test_an_aborted_run_answers_its_calls_and_says_cancelled(db: str, helpers: Any) -> None:
    entered, release = asyncio.Event(), asyncio.Event()

    @tool
    async def wait_here() -> str:
        """Wait."""
        entered.set()
        await release.wait()
        return "released"

    provider = ScriptedProvider(tool_call_response(("wait_here", {})), "next one")
    app = create_app(helpers.factory_for(provider, [wait_here]), storage_path=db)
    async with helpers.client_for(app) as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        stream = asyncio.create_task(
            client.post(f"/api/threads/{tid}/runs", json={"message": "go"})
        )
        await entered.wait()
        assert (await client.post(f"/api/threads/{tid}/stop", json={})).json()["stopped"]
        events = helpers.sse_events((await stream).text)
        after = await client.post(f"/api/threads/{tid}/runs", json={"message": "again"})
        check_agui(helpers.sse_events(after.text))
    await app.aclose()
    check_agui(events)
    final = events[-1]
    assert final["type"] == "RUN_FINISHED"
    assert final["result"]["stopReason"] == "aborted"
    assert final["outcome"] == {"type": "cancelled"}
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["metadata"]["isError"] is True


async def test_the_messages_snapshot_parses(db: str, helpers: Any) -> None:
    from ag_ui.core import MessagesSnapshotEvent

    provider = ScriptedProvider(
        tool_call_response(("add", {"a": 2, "b": 3})), _thought("so", "it is 5")
    )
    app = create_app(helpers.factory_for(provider, [add]), storage_path=db)
    async with helpers.client_for(app) as client:
        tid = (await client.post("/api/threads", json={})).json()["id"]
        await client.post(f"/api/threads/{tid}/runs", json={"message": "2+3?"})
        snap = (await client.get(f"/api/threads/{tid}/messages?format=agui")).json()
    await app.aclose()
    model = MessagesSnapshotEvent.model_validate(snap)
    roles = [m.role for m in model.messages]
    assert roles == ["user", "assistant", "tool", "assistant"]  # thinking is not stored
    assert model.model_dump(mode="json", by_alias=True) == snap


def test_without_the_package_create_app_names_the_extra(
    db: str, helpers: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from goagent_py.errors import MissingExtraError

    monkeypatch.setitem(sys.modules, "ag_ui", None)  # as if not installed
    with pytest.raises(MissingExtraError) as err:
        create_app(helpers.factory_for(ScriptedProvider()), storage_path=db)
    assert "ag-ui-protocol" in str(err.value)
    assert "goagent-py[serve]" in str(err.value)
