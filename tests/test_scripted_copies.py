"""The scripted providers' request and response copies are what copy.deepcopy makes."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from goagent_py import Agent, ToolCall, tool
from goagent_py.messages import (
    DocumentBlock,
    ImageBlock,
    Message,
    Role,
    StopReason,
    TextBlock,
    ThinkingBlock,
    Usage,
)
from goagent_py.provider import CompletionRequest, CompletionResponse, ThinkingConfig
from goagent_py.testing import FunctionProvider, ScriptedProvider, _deepcopy, tool_call_response
from goagent_py.tools import ToolDefinition


class Custom:
    def __init__(self, items: list[int]) -> None:
        self.items = items

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Custom) and other.items == self.items


def sample() -> CompletionRequest:
    shared_args: dict[str, Any] = {"a": [1, {"b": (2, [3])}], "c": None}
    call = ToolCall("c1", "f", shared_args)
    user = Message(
        Role.USER,
        [
            TextBlock("hi"),
            ImageBlock(b"\x89PNG", "image/png"),
            DocumentBlock(b"%PDF", "application/pdf", "doc"),
        ],
        metadata={"custom": Custom([1]), "tuple": (1, [2]), 3: "int key"},
    )
    assistant = Message(
        Role.ASSISTANT, [ThinkingBlock("hm", "sig")], tool_calls=[call, ToolCall("c2", "g")]
    )
    return CompletionRequest(
        model="m",
        system_prompt="s",
        messages=[user, assistant, user],  # the same message twice
        tools=[ToolDefinition("f", "d", {"type": "object", "properties": {"a": {}}})],
        thinking=ThinkingConfig(1024),
        effort="low",
        max_tokens=10,
    )


def shape(value: Any, seen: dict[int, int]) -> Any:
    """The object graph: types, values and which nodes are shared (by first-seen order)."""
    if id(value) in seen and not isinstance(value, str | int | float | bool | bytes | type(None)):
        return ("ref", seen[id(value)])
    seen[id(value)] = len(seen)
    if isinstance(value, list | tuple):
        return (type(value).__name__, [shape(v, seen) for v in value])
    if isinstance(value, dict):
        return ("dict", [(shape(k, seen), shape(v, seen)) for k, v in value.items()])
    if dataclasses.is_dataclass(value):
        fields = dataclasses.fields(value)
        return (type(value).__name__, [shape(getattr(value, f.name), seen) for f in fields])
    if isinstance(value, Custom):
        return ("Custom", shape(value.items, seen))
    return (type(value).__name__, value)


def mutable_ids(value: Any, out: set[int]) -> set[int]:
    if isinstance(value, list | dict | Custom) or (
        dataclasses.is_dataclass(value) and not type(value).__dataclass_params__.frozen  # type: ignore[attr-defined]
    ):
        if id(value) in out:
            return out
        out.add(id(value))
    if isinstance(value, list | tuple):
        for v in value:
            mutable_ids(v, out)
    elif isinstance(value, dict):
        for v in value.values():
            mutable_ids(v, out)
    elif isinstance(value, Custom):
        mutable_ids(value.items, out)
    elif dataclasses.is_dataclass(value):
        for f in dataclasses.fields(value):
            mutable_ids(getattr(value, f.name), out)
    return out


def test_copies_match_deepcopy_in_values_types_and_sharing() -> None:
    request = sample()
    ours, theirs = _deepcopy(request), copy.deepcopy(request)
    assert ours == theirs == request
    assert shape(ours, {}) == shape(theirs, {})
    # Independent: no mutable node of the copy is a node of the original.
    assert not mutable_ids(ours, set()) & mutable_ids(request, set())
    request.messages[0].metadata["custom"].items.append(2)
    request.messages[1].tool_calls[0].arguments["a"][1]["b"][1].append(4)
    assert ours == theirs != request


def test_a_response_copy_matches_deepcopy() -> None:
    response = CompletionResponse(
        sample().messages[1], StopReason.TOOL_USE, Usage(1, 2, 3, 4), model="m"
    )
    assert _deepcopy(response) == copy.deepcopy(response) == response
    assert _deepcopy(response).message is not response.message


def test_recorded_requests_do_not_change_with_the_run() -> None:
    @tool
    def add(a: int, b: int) -> int:
        """Add."""
        return a + b

    scripted = ScriptedProvider(tool_call_response(ToolCall("c1", "add", {"a": 2, "b": 3})), "5")
    function = FunctionProvider(lambda r: "5")
    for provider in (scripted, function):
        Agent(provider=provider, tools=[add]).run_sync("2+3?")
    first = scripted.requests[0]
    assert [m.role for m in first.messages] == [Role.USER]  # not the later turns
    assert [m.role for m in scripted.requests[1].messages] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
    ]
    assert first.tools[0].parameters is not scripted.requests[1].tools[0].parameters
    assert len(function.requests) == 1
