"""Handoffs: one per turn, a valid transcript after the switch, own tools, filtered history."""

from __future__ import annotations

from typing import Any

import pytest

from goagent_py import (
    Agent,
    ConfigurationError,
    Message,
    Role,
    ThinkingBlock,
    Usage,
    tool,
    validate_transcript,
)
from goagent_py.orchestration import (
    HandoffRefusedError,
    Handoffs,
    MaxStepsError,
    NodeStart,
    StepFailedError,
)
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.providers import anthropic, ollama, openai
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response


def assert_valid_for_every_provider(messages: list[Message]) -> None:
    """No orphan tool call, no orphan result, and every request builder takes it (the same
    check as tests/test_session.py)."""
    open_calls: set[str] = set()
    for m in messages:
        if m.role is Role.TOOL:
            assert m.tool_call_id in open_calls, f"orphan result {m.tool_call_id}"
            open_calls.discard(m.tool_call_id)
        else:
            assert not open_calls, f"calls without results: {open_calls}"
            open_calls = {c.id for c in m.tool_calls}
    assert not open_calls, f"calls without results: {open_calls}"
    anthropic.build_request(CompletionRequest(model="m", messages=messages), default_max_tokens=10)
    openai.build_request(CompletionRequest(model="m", messages=messages))
    ollama.build_chat_request(CompletionRequest(model="m", messages=messages))


@tool
def lookup_order(order: str) -> str:
    """Look up an order (triage's own tool)."""
    return f"order {order}: shipped"


@tool
def refund(order: str) -> str:
    """Refund an order (billing's own tool)."""
    return f"refunded {order}"


def desk(
    triage: list[Any], billing: list[Any], tech: list[Any] | None = None, **kw: Any
) -> tuple[Handoffs, dict[str, ScriptedProvider]]:
    providers = {
        "triage": ScriptedProvider(*triage),
        "billing": ScriptedProvider(*billing),
        "tech": ScriptedProvider(*(tech or [])),
    }
    agents = [
        Agent(
            provider=providers["triage"],
            model="m",
            name="triage",
            tools=[lookup_order],
            system_prompt="Route the customer.",
        ),
        Agent(
            provider=providers["billing"],
            model="m",
            name="billing",
            tools=[refund],
            system_prompt="Billing questions and refunds.",
        ),
        Agent(provider=providers["tech"], model="m", name="tech", system_prompt="Tech support."),
    ]
    return Handoffs(agents, **kw), providers


def transfer(*targets: str, thinking: str = "", usage: Usage | None = None) -> CompletionResponse:
    response = tool_call_response(
        *[(f"transfer_to_{t}", {"reason": "theirs"}) for t in targets], usage=usage
    )
    if thinking:
        response.message.content.insert(0, ThinkingBlock(thinking, "sig"))
    return response


async def test_triage_hands_off_and_the_specialist_answers_from_a_valid_transcript() -> None:
    group, p = desk(
        [transfer("billing", usage=Usage(10, 1))],
        [
            tool_call_response(("refund", {"order": "42"}), usage=Usage(20, 2)),
            text_response("Refunded order 42.", usage=Usage(30, 3)),
        ],
    )

    result = await group.run("I was charged twice for order 42")

    assert result.text == "Refunded order 42."
    assert result.state == {"active": "billing", "handoffs": [["triage", "billing"]]}
    assert result.trace == ("triage", "billing")
    assert result.usage == Usage(60, 6)
    transcript = list(result.messages)
    assert [m.role for m in transcript] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert_valid_for_every_provider(transcript)
    first = p["billing"].requests[0]
    assert_valid_for_every_provider(first.messages)
    assert first.system_prompt == "Billing questions and refunds."
    # Each agent sees only its own tools (and its own transfers).
    assert {t.name for t in first.tools} == {"refund", "transfer_to_triage", "transfer_to_tech"}
    triage_tools = {t.name for t in p["triage"].requests[0].tools}
    assert triage_tools == {"lookup_order", "transfer_to_billing", "transfer_to_tech"}


async def test_two_transfer_calls_in_one_response_hand_off_once() -> None:
    group, p = desk([transfer("billing", "tech")], ["Billing here."], tech=["never"])

    result = await group.run("help")

    assert result.state["handoffs"] == [["triage", "billing"]]
    assert p["tech"].requests == []
    tool_results = [m for m in result.messages if m.role is Role.TOOL]
    assert [m.is_error for m in tool_results] == [False, True]
    assert "only one handoff per turn" in tool_results[1].text
    assert_valid_for_every_provider(list(result.messages))


async def test_thinking_never_crosses_and_the_filter_picks_the_history() -> None:
    group, p = desk([transfer("billing", thinking="private")], ["ok"])
    await group.run("help")
    sent = p["billing"].requests[0].messages
    assert not any(isinstance(b, ThinkingBlock) for m in sent for b in m.content)

    users_only, q = desk(
        [transfer("billing")],
        ["ok"],
        input_filter=lambda ms: [m for m in ms if m.role is Role.USER],
    )
    await users_only.run("help")
    assert [(m.role, m.text) for m in q["billing"].requests[0].messages] == [(Role.USER, "help")]


async def test_no_handoff_when_the_first_agent_answers() -> None:
    group, _ = desk(["Hello!"], [])
    result = await group.run("hi")
    assert result.text == "Hello!"
    assert result.state == {"active": "triage", "handoffs": []}


async def test_ping_pong_past_max_handoffs_fails_with_the_agents_visited() -> None:
    group, _ = desk(
        [transfer("billing"), transfer("billing")],
        [transfer("triage"), transfer("triage")],
        max_handoffs=2,
    )
    with pytest.raises(MaxStepsError) as info:
        await group.run("x")
    assert info.value.taken == ("triage", "billing", "triage", "billing")
    assert info.value.partial is not None
    assert_valid_for_every_provider(list(info.value.partial.messages))


async def test_a_failing_agent_names_itself() -> None:
    from goagent_py import ProviderError

    group, _ = desk([transfer("billing")], [ProviderError("down")])
    with pytest.raises(StepFailedError) as info:
        await group.run("x")
    assert info.value.path == ("handoffs", "billing")


async def test_stream_shows_each_agent_as_a_node() -> None:
    group, _ = desk([transfer("tech")], [], tech=["Rebooted."])
    events = [e async for e in group.stream("x")]
    assert [e.path for e in events if isinstance(e, NodeStart)] == [
        ("handoffs",),
        ("handoffs", "triage"),
        ("handoffs", "tech"),
    ]


def test_refusal_error_pickles() -> None:
    import pickle

    error = HandoffRefusedError("transfer_to_x", "only one")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.tool_name, copy.reason, str(copy)) == ("transfer_to_x", "only one", str(error))


def test_handoffs_misuse() -> None:
    a = Agent(provider=ScriptedProvider(), model="m", name="a")
    with pytest.raises(ConfigurationError, match="at least one agent"):
        Handoffs([])
    with pytest.raises(ConfigurationError, match="with a name"):
        Handoffs([Agent(provider=ScriptedProvider(), model="m")])
    with pytest.raises(ConfigurationError, match="two agents"):
        Handoffs([a, a])
    with pytest.raises(ConfigurationError, match="start 'b'"):
        Handoffs([a], start="b")
    with pytest.raises(ConfigurationError, match="unknown agent"):
        Handoffs([a], routes={"a": ["ghost"]})


# -- issue 28: handoffs keep every request valid ------------------------------------------------


async def test_a_transfer_to_an_unknown_agent_does_not_block_the_valid_one_after_it() -> None:
    group, p = desk([transfer("ghost", "billing")], ["Billing here."])
    result = await group.run("help")
    assert result.state["active"] == "billing"
    assert result.text == "Billing here."
    request = p["billing"].requests[0]
    assert validate_transcript(request.messages, tools=request.tools) == []


async def test_an_input_filter_that_keeps_nothing_is_a_clear_error_not_an_empty_request() -> None:
    group, p = desk([transfer("billing")], ["never"], input_filter=lambda messages: [])
    with pytest.raises(ConfigurationError, match="input_filter"):
        await group.run("help")
    assert p["billing"].requests == []


async def test_a_tool_less_specialist_gets_no_tool_blocks() -> None:
    group, p = desk(
        [transfer("tech")],
        [],
        ["Restart the router."],
        routes={"triage": ["billing", "tech"], "billing": [], "tech": []},
    )
    result = await group.run("my internet is down")
    assert result.text == "Restart the router."
    request = p["tech"].requests[0]
    assert request.tools == []
    assert validate_transcript(request.messages, tools=request.tools) == []
    assert request.messages[0].text == "my internet is down"


async def test_an_agent_that_fails_after_its_tools_ran_keeps_them_in_the_partial_record() -> None:
    # review7a: the partial conversation ended at the handoff; billing's refund, which ran
    # before its model failed, was missing, so a caller retrying from it would refund twice.
    from goagent_py import ProviderError

    group, _ = desk(
        [transfer("billing")],
        [tool_call_response(("refund", {"order": "A-1"})), ProviderError("down")],
    )
    with pytest.raises(StepFailedError) as info:
        await group.run("refund A-1")
    assert info.value.partial is not None
    messages = list(info.value.partial.messages)
    assert [m.text for m in messages if m.role is Role.TOOL][-1] == "refunded A-1"
    assert [c.name for m in messages for c in m.tool_calls][-1] == "refund"
    assert_valid_for_every_provider(messages)


async def test_a_budget_spent_after_a_handoff_keeps_the_whole_conversation() -> None:
    from goagent_py.budget import Budget, BudgetExceededError

    group, _ = desk(
        [transfer("billing")], [tool_call_response(("refund", {"order": "A-1"})), "done"]
    )
    with pytest.raises(BudgetExceededError) as info:
        await group.run("refund A-1", budget=Budget(max_iterations=2))
    partial = getattr(info.value, "partial", None)
    assert partial is not None
    messages = list(partial.messages)
    assert messages[0].text == "refund A-1"
    # triage's part (the transfer, with its result) and billing's (the refund that ran)
    assert [c.name for m in messages for c in m.tool_calls] == ["transfer_to_billing", "refund"]
    assert [m.text for m in messages if m.role is Role.TOOL][-1] == "refunded A-1"
    assert_valid_for_every_provider(messages)
    assert partial.state == {"active": "billing", "handoffs": [["triage", "billing"]]}
    assert partial.iterations == 2  # triage's call and billing's, made before it ran out
