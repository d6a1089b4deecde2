"""The hand-written AG-UI events (serve/_agui.py) against the ``ag-ui-protocol`` models they
stand for: the same JSON, key for key and in the same order, for every event type the mapper
writes by hand (issue 36)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("ag_ui")

from ag_ui import core
from pydantic import TypeAdapter

from goagent_py.events import (
    AgentEnd,
    MemoryRecall,
    MessageDelta,
    MessageEnd,
    MessageStart,
    ToolExecutionEnd,
    ToolExecutionStart,
)
from goagent_py.messages import (
    Message,
    Role,
    ScoredMessage,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
)
from goagent_py.results import RunResult, ToolResult
from goagent_py.serve import _agui

Pair = tuple[Callable[..., dict[str, Any]], Callable[..., Any]]

# Each hand-written event and the model it stands for, built from the same arguments.
PAIRS: dict[str, Pair] = {
    "RUN_STARTED": (_agui.run_started, lambda t, r: core.RunStartedEvent(thread_id=t, run_id=r)),
    "TEXT_MESSAGE_START": (
        _agui.text_start,
        lambda m: core.TextMessageStartEvent(message_id=m, role="assistant"),
    ),
    "TEXT_MESSAGE_CONTENT": (
        _agui.text_content,
        lambda m, d: core.TextMessageContentEvent(message_id=m, delta=d),
    ),
    "TEXT_MESSAGE_END": (_agui.text_end, lambda m: core.TextMessageEndEvent(message_id=m)),
    "REASONING_START": (_agui.reasoning_start, lambda m: core.ReasoningStartEvent(message_id=m)),
    "REASONING_MESSAGE_START": (
        _agui.reasoning_message_start,
        lambda m: core.ReasoningMessageStartEvent(message_id=m),
    ),
    "REASONING_MESSAGE_CONTENT": (
        _agui.reasoning_content,
        lambda m, d: core.ReasoningMessageContentEvent(message_id=m, delta=d),
    ),
    "REASONING_MESSAGE_END": (
        _agui.reasoning_message_end,
        lambda m: core.ReasoningMessageEndEvent(message_id=m),
    ),
    "REASONING_END": (_agui.reasoning_end, lambda m: core.ReasoningEndEvent(message_id=m)),
    "TOOL_CALL_START": (
        _agui.tool_call_start,
        lambda c, n: core.ToolCallStartEvent(tool_call_id=c, tool_call_name=n),
    ),
    "TOOL_CALL_ARGS": (
        _agui.tool_call_args,
        lambda c, d: core.ToolCallArgsEvent(tool_call_id=c, delta=d),
    ),
    "TOOL_CALL_END": (_agui.tool_call_end, lambda c: core.ToolCallEndEvent(tool_call_id=c)),
    "TOOL_CALL_RESULT": (
        _agui.tool_call_result,
        lambda c, text, err, d: core.ToolCallResultEvent(
            message_id="tool_" + c,
            tool_call_id=c,
            role="tool",
            content=text,
            metadata={"isError": err, "duration": round(d, 6)},
        ),
    ),
    "CUSTOM": (_agui.custom, lambda n, v: core.CustomEvent(name=n, value=v)),
}

_ADAPTER: TypeAdapter[Any] = TypeAdapter(core.Event)


def _same(hand: dict[str, Any], model: Any) -> None:
    dumped = _agui.wire(model)
    assert hand == dumped
    assert list(hand) == list(dumped)  # the same bytes on the wire, not only the same object


text = st.text(max_size=40)  # empty, unicode, quotes, newlines, lone surrogates excluded


@given(a=text, b=text)
def test_two_string_events_equal_their_models(a: str, b: str) -> None:
    for kind in ("RUN_STARTED", "TEXT_MESSAGE_CONTENT", "REASONING_MESSAGE_CONTENT"):
        hand, model = PAIRS[kind]
        _same(hand(a, b), model(a, b))
    for kind in ("TOOL_CALL_START", "TOOL_CALL_ARGS"):
        hand, model = PAIRS[kind]
        _same(hand(a, b), model(a, b))


@given(a=text)
def test_one_string_events_equal_their_models(a: str) -> None:
    for kind in (
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_END",
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_END",
        "REASONING_END",
        "TOOL_CALL_END",
    ):
        hand, model = PAIRS[kind]
        _same(hand(a), model(a))


@given(
    call=text,
    content=text,
    err=st.booleans(),
    duration=st.floats(min_value=0, max_value=1e6, allow_nan=False),
)
def test_tool_results_equal_their_model(
    call: str, content: str, err: bool, duration: float
) -> None:
    hand, model = PAIRS["TOOL_CALL_RESULT"]
    _same(hand(call, content, err, duration), model(call, content, err, duration))


def test_custom_events_equal_their_model() -> None:
    hand, model = PAIRS["CUSTOM"]
    for value in (
        {"toolCallId": "c1", "toolCallName": "add"},
        {"memories": [{"text": "I live in Lisbon", "score": 0.8123, "id": "user-a:x:0"}]},
        {"memories": []},
    ):
        _same(hand("goagent.x", value), model("goagent.x", value))


def _every_branch() -> list[Any]:
    """Events that take the mapper through every hand-written event: streamed reasoning, text
    and tool calls, a message that was not streamed, tool results, recall, a call left open."""
    call = ToolCall("c1", "add", {"a": 1})
    unstreamed = Message(
        Role.ASSISTANT,
        [ThinkingBlock("so"), TextBlock("plain")],
        tool_calls=[ToolCall("c2", "add", {"a": 2})],
    )
    result = ToolResult(call, [TextBlock("3")], duration=0.0123456789)
    memory = ScoredMessage(Message(Role.USER, [TextBlock("I live in Lisbon")]), 0.812345, "m1")
    return [
        MemoryRecall([memory], 0.001),
        MessageStart(Role.ASSISTANT, 1, streaming=True),
        MessageDelta("thinking", "hm "),
        MessageDelta("text", "Let me "),
        MessageDelta("text", 'add \u00e9"\n'),
        MessageDelta("tool_call", '{"a":', call_id="c1", name="add"),
        MessageDelta("tool_call", " 1}", call_id="c1", name="add"),
        MessageEnd(Message(Role.ASSISTANT, [TextBlock("Let me add")], tool_calls=[call])),
        ToolExecutionStart(call),
        ToolExecutionEnd(result),
        MessageStart(Role.ASSISTANT, 2),
        MessageEnd(unstreamed),
        AgentEnd(RunResult(text="plain", stop_reason=StopReason.END_TURN)),
    ]


def test_every_event_of_a_run_is_what_its_model_dumps() -> None:
    events = _agui.WireList()
    mapper = _agui.AguiMapper("t1", "r1", events)
    mapper.begin()
    for event in _every_branch():
        mapper.map(event)
    mapper.finished()  # c2 never got its result: an error result closes it
    for event in events:
        _same(event, _ADAPTER.validate_python(event))
    assert {e["type"] for e in events} >= set(PAIRS)
    assert events[-1]["type"] == "RUN_FINISHED"


def test_a_failed_run_ends_with_the_models_run_error() -> None:
    events = _agui.WireList()
    mapper = _agui.AguiMapper("t1", "r1", events)
    mapper.map(MessageDelta("text", "partial"))
    mapper.error("ProviderError: down", "ProviderError")
    assert [e["type"] for e in events] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_END",
        "RUN_ERROR",
    ]
    for event in events:
        _same(event, _ADAPTER.validate_python(event))
