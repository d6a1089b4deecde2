"""Compositions refuse what can only loop (an agent handing off to itself) and keep records
that hold (review9b)."""

from __future__ import annotations

import pytest

from goagent_py import Agent, ConfigurationError, Role, tool
from goagent_py.memory import ShortTermMemory
from goagent_py.orchestration import Handoffs
from goagent_py.testing import ScriptedProvider, tool_call_response


def test_an_agent_may_not_hand_off_to_itself() -> None:
    a = Agent(provider=ScriptedProvider(), model="m", name="a")
    b = Agent(provider=ScriptedProvider(), model="m", name="b")
    with pytest.raises(ConfigurationError, match=r"'a' -> 'a'.*itself"):
        Handoffs([a, b], routes={"a": ["b", "a"], "b": ["a"]})


async def test_an_agent_handed_the_conversation_keeps_a_record_that_opens_on_a_user_message() -> (
    None
):
    @tool
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    kept = ShortTermMemory()
    triage = Agent(
        provider=ScriptedProvider(tool_call_response(("transfer_to_billing", {}))),
        model="m",
        name="triage",
    )
    billing = Agent(
        provider=ScriptedProvider(tool_call_response(("refund", {"order": "A"})), "done"),
        model="m",
        name="billing",
        tools=[refund],
        short_term_memory=kept,
    )
    await Handoffs([triage, billing]).run("refund A")
    record = await kept.transcript()
    assert record[0].role is Role.USER
    assert [c.name for m in record for c in m.tool_calls] == ["transfer_to_billing", "refund"]
    assert record[-1].text == "done"


async def test_agents_that_share_one_memory_store_the_handed_over_conversation_once() -> None:
    shared = ShortTermMemory()
    triage = Agent(
        provider=ScriptedProvider(tool_call_response(("transfer_to_billing", {}))),
        model="m",
        name="triage",
        short_term_memory=shared,
    )
    billing = Agent(
        provider=ScriptedProvider("done"), model="m", name="billing", short_term_memory=shared
    )
    result = await Handoffs([triage, billing]).run("refund A")
    record = await shared.transcript()
    assert [m.role for m in record] == [m.role for m in result.messages]
    assert [m.text for m in record if m.role is Role.USER] == ["refund A"]


async def test_an_agent_that_takes_over_again_keeps_the_turns_it_missed() -> None:
    kept = ShortTermMemory()
    triage = Agent(
        provider=ScriptedProvider(tool_call_response(("transfer_to_billing", {})), "back: done"),
        model="m",
        name="triage",
        short_term_memory=kept,
    )
    billing = Agent(
        provider=ScriptedProvider(tool_call_response(("transfer_to_triage", {}))),
        model="m",
        name="billing",
    )
    result = await Handoffs([triage, billing]).run("refund A")
    record = await kept.transcript()
    calls = [c.name for m in record for c in m.tool_calls]
    assert calls == ["transfer_to_billing", "transfer_to_triage"]
    assert [m.role for m in record] == [m.role for m in result.messages]
    assert record[-1].text == "back: done"
