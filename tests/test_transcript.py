"""The transcript validator: one test per rule the vendors enforce (goagent_py/transcript.py)."""

from __future__ import annotations

import pickle

import pytest

from goagent_py import (
    ConfigurationError,
    InvalidTranscriptError,
    Message,
    Role,
    TextBlock,
    ToolCall,
    Violation,
    check_transcript,
    validate_transcript,
)
from goagent_py._transcript import UI_ONLY_KEY
from goagent_py.tools import ToolDefinition


def user(text: str = "hi") -> Message:
    return Message(Role.USER, [TextBlock(text)])


def asst(*calls: str, text: str = "") -> Message:
    return Message(
        Role.ASSISTANT,
        [TextBlock(text)] if text else [],
        tool_calls=[ToolCall(c, "lookup", {}) for c in calls],
    )


def result(call_id: str) -> Message:
    return Message(Role.TOOL, [TextBlock("ok")], tool_call_id=call_id)


def rules(messages: list[Message], **kwargs: object) -> list[tuple[int, str]]:
    return [(v.index, v.rule) for v in validate_transcript(messages, **kwargs)]  # type: ignore[arg-type]


def test_a_well_formed_transcript_has_no_violation() -> None:
    messages = [user(), asst("a", "b"), result("a"), result("b"), asst(text="done"), user("more")]
    assert validate_transcript(messages) == []
    check_transcript(messages)  # does not raise


def test_each_call_is_answered_in_the_messages_right_after_it() -> None:
    assert rules([user(), asst("a")]) == [(1, "unanswered_call")]
    assert rules([user(), asst("a", "b"), result("a"), asst(text="x")]) == [(1, "unanswered_call")]
    # The answer must come next: a user message in between leaves the call unanswered and
    # makes the late result an orphan.
    assert rules([user(), asst("a"), user("?"), result("a")]) == [
        (1, "unanswered_call"),
        (3, "orphan_result"),
    ]


def test_a_call_is_answered_exactly_once() -> None:
    assert rules([user(), asst("a"), result("a"), result("a")]) == [(3, "duplicate_result")]


def test_no_orphan_tool_result() -> None:
    assert rules([user(), result("x")]) == [(1, "orphan_result")]
    assert rules([user(), asst("a"), result("b")]) == [
        (1, "unanswered_call"),
        (2, "orphan_result"),
    ]
    user_with_call = Message(Role.USER, [TextBlock("x")], tool_calls=[ToolCall("u", "t", {})])
    assert ("orphan_result" in {r for _, r in rules([user_with_call])}) is True


def test_call_ids_are_unique_and_not_empty() -> None:
    messages = [user(), asst("a"), result("a"), asst("a"), result("a")]
    assert rules(messages) == [(3, "duplicate_call_id")]
    assert rules([user(), asst(""), result("")]) == [(1, "empty_call_id")]


def test_the_first_message_comes_from_the_user_except_for_openai() -> None:
    messages = [asst(text="hello"), user()]
    assert rules(messages) == [(0, "first_not_user")]
    assert rules(messages, vendor="anthropic") == [(0, "first_not_user")]
    assert rules(messages, vendor="bedrock") == [(0, "first_not_user")]
    assert rules(messages, vendor="openai") == []


def test_a_request_without_tools_carries_no_tool_blocks() -> None:
    messages = [user(), asst("a"), result("a"), asst(text="done")]
    assert rules(messages, tools=[]) == [
        (1, "tool_blocks_without_tools"),
        (2, "tool_blocks_without_tools"),
    ]
    assert rules(messages, tools=[ToolDefinition("lookup", "", {"type": "object"})]) == []
    assert rules(messages) == []  # tools not given: not checked


def test_ollama_tool_messages_are_named_after_their_call() -> None:
    unnamed = Message(Role.ASSISTANT, tool_calls=[ToolCall("a", "", {})])
    assert rules([user(), unnamed, result("a")], vendor="ollama") == [(2, "unnamed_tool_message")]
    assert rules([user(), unnamed, result("a")], vendor="openai") == []


def test_an_empty_request_and_ui_only_messages() -> None:
    assert rules([]) == [(-1, "empty")]
    note = Message(Role.ASSISTANT, [TextBlock("(shown only)")], metadata={UI_ONLY_KEY: True})
    assert rules([note]) == [(-1, "empty")]
    # A UI-only message is never sent, so it neither opens the transcript nor splits a pair.
    assert rules([note, user(), asst("a"), note, result("a")]) == []


def test_check_transcript_raises_with_every_violation_and_pickles() -> None:
    with pytest.raises(InvalidTranscriptError) as caught:
        check_transcript([asst("a"), result("b")])
    error = caught.value
    assert [v.rule for v in error.violations] == [
        "first_not_user",
        "unanswered_call",
        "orphan_result",
    ]
    assert "orphan_result" in str(error)
    copy = pickle.loads(pickle.dumps(error))
    assert copy.violations == error.violations
    assert isinstance(copy.violations[0], Violation)


def test_an_unknown_vendor_is_refused_with_the_names_to_use() -> None:
    with pytest.raises(ConfigurationError, match="anthropic"):
        validate_transcript([user()], vendor="gemini")  # type: ignore[arg-type]
