"""``RUN_FINISHED`` is written by hand (issue 36: the event's pydantic model, built and dumped for
every run, was the largest cost of mapping a scripted turn): it must be byte for byte what the
model gives, for every shape a run ends with (goagent_py/serve/_agui.py, ``run_finished``)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from ag_ui.core import (
    Interrupt,
    RunFinishedCancelledOutcome,
    RunFinishedEvent,
    RunFinishedInterruptOutcome,
    TokenUsage,
)
from pydantic_core import to_jsonable_python

from goagent_py.serve._agui import run_finished, wire

_INTERRUPT = Interrupt(
    id="call_1",
    reason="tool_approval",
    message="delete waits for your decision",
    tool_call_id="call_1",
    expires_at=datetime.fromtimestamp(1_800_000_000, UTC).isoformat(timespec="seconds"),
    metadata={"toolName": "delete", "arguments": {"path": "a"}, "kind": "approval"},
)
_RESULTS: list[dict[str, Any]] = [
    {"stopReason": None, "text": ""},
    {"stopReason": "end_turn", "text": 'word0 word1 \u00e9\u4e2d \U0001f600 "quoted" \\ \n'},
    {"stopReason": "aborted", "text": "partial"},
    # A typed answer: its JSON follows the model's rules (a NaN is null).
    {"stopReason": "end_turn", "text": "{}", "output": {"a": 1, "b": [1.5, None, "x"]}},
    {"stopReason": "end_turn", "text": "", "output": to_jsonable_python({"n": float("nan")})},
]
_OUTCOMES: list[Any] = [
    None,
    RunFinishedCancelledOutcome(),
    RunFinishedInterruptOutcome(interrupts=[_INTERRUPT]),
]
_USAGES: list[TokenUsage | None] = [
    None,
    TokenUsage(input_tokens=10, output_tokens=5, total_tokens=15),
    TokenUsage(
        input_tokens=10,
        output_tokens=5,
        total_tokens=15,
        cached_input_tokens=4,
        cache_write_input_tokens=2,
    ),
]


@pytest.mark.parametrize("result", _RESULTS)
@pytest.mark.parametrize("outcome", _OUTCOMES)
@pytest.mark.parametrize("usage", _USAGES)
def test_run_finished_is_the_models_event_byte_for_byte(
    result: dict[str, Any], outcome: Any, usage: TokenUsage | None
) -> None:
    model = RunFinishedEvent(
        thread_id="thread-1",
        run_id="run_0123",
        result=result,
        outcome=outcome,
        usage=None if usage is None else [usage],
    )
    expected = json.JSONEncoder().encode(wire(model))  # as the routes encode every event
    made = run_finished("thread-1", "run_0123", result, outcome, usage)
    assert json.JSONEncoder().encode(made) == expected
