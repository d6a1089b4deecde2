"""The scripted providers' request and response copies: ``_deepcopy`` is what copy.deepcopy
makes; the snapshots the providers record and return hold the same values and share nothing
mutable with what the loop passed or the script holds (issue 36)."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from typing import Any

import pytest

from goagent_py import Agent, ToolCall, tool
from goagent_py._deepcopy import deepcopy as _deepcopy
from goagent_py._deepcopy import (
    message_copier,
    snapshot_message,
    snapshot_request,
    snapshot_response,
)
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
from goagent_py.testing import FunctionProvider, ScriptedProvider, tool_call_response
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
    # An unchanged definition is snapshotted once and shared by the records (issue 36)...
    assert first.tools[0] is scripted.requests[1].tools[0]
    # ...and a tool's generated schema, frozen, is the tool's own: it cannot change, so no
    # record can (docs/notes/loop16.md).
    assert first.tools[0].parameters is add.definition.parameters
    with pytest.raises(TypeError, match="cannot be changed"):
        add.definition.parameters["properties"]["a"]["type"] = "string"
    assert first.tools[0].parameters["properties"]["a"] == {"type": "integer"}
    assert len(function.requests) == 1


class Text(str):
    """A str subclass: not atomic to the copies."""


class Note(Message):
    """A Message subclass: its copy is made by deepcopy, class kept."""


def test_a_message_copier_makes_what_snapshot_message_makes() -> None:
    # Issue 36: the SQLite storage picks a copier per decoded row and hands out its copies;
    # the one for plain messages must give what snapshot_message gives, sharing nothing the
    # holder can change, and any message it does not fit must go to snapshot_message.
    request = sample()
    messages = [
        Message(Role.USER, [TextBlock("plain")]),
        Message(Role.ASSISTANT, [TextBlock("a"), ThinkingBlock("t", "s"), TextBlock("b")]),
        Message(Role.USER, [ImageBlock(b"\x89PNG", "image/png")], is_error=True),
        Message(Role.TOOL, [TextBlock("r")], tool_call_id="c1"),
        Message(Role.USER, []),
        Message(Role.USER, [TextBlock(Text("sub"))]),  # a block holding a mutable-typed value
        Message(Role.USER, [TextBlock("m")], metadata={"k": [1]}),
        Message(Role.ASSISTANT, [TextBlock("c")], tool_calls=[ToolCall("c1", "f", {"a": [1]})]),
        Note(Role.USER, [TextBlock("note")]),
        *request.messages,
    ]
    for message in messages:
        expected = snapshot_message(message)
        copied = message_copier(message)(message)
        assert copied == expected == message
        assert type(copied) is type(message)
        assert shape(copied, {}) == shape(expected, {})
        assert not mutable_ids(copied, set()) & mutable_ids(message, set())
        copied.content.append(TextBlock("changed"))
        copied.metadata["changed"] = True
        assert copied != message == expected  # the copy's changes stay in the copy


def test_a_request_snapshot_has_the_values_and_shares_nothing_mutable() -> None:
    request = sample()
    ours = snapshot_request(request, {})
    assert ours == copy.deepcopy(request) == request
    assert type(ours) is CompletionRequest
    assert not mutable_ids(ours, set()) & mutable_ids(request, set())
    # A message given twice is two equal snapshots (nothing asks the copies to be one object).
    assert ours.messages[0] == ours.messages[2]


def test_a_response_snapshot_has_the_values_and_shares_nothing_mutable() -> None:
    response = CompletionResponse(
        sample().messages[1], StopReason.TOOL_USE, Usage(1, 2, 3, 4), model="m"
    )
    ours = snapshot_response(response)
    assert ours == copy.deepcopy(response) == response
    assert not mutable_ids(ours, set()) & mutable_ids(response, set())


def test_recorded_requests_never_change_when_the_caller_changes_what_it_passed() -> None:
    request = sample()
    before = copy.deepcopy(request)
    scripted, function = ScriptedProvider("ok"), FunctionProvider(lambda r: "ok")

    async def send() -> None:
        await scripted.complete(request)
        await function.complete(request)

    asyncio.run(send())
    # What a loop does to its lists and messages later, and then some.
    request.messages.append(Message(Role.USER, [TextBlock("later")]))
    request.messages[0].content.append(TextBlock("more"))
    request.messages[0].metadata["custom"].items.append(2)
    request.messages[0].metadata["goagent.pending"] = {"token": "t"}
    request.messages[1].tool_calls.append(ToolCall("c3", "h"))
    request.messages[1].tool_calls[0].arguments["a"][1]["b"][1].append(4)
    request.tools[0].parameters["properties"]["b"] = {"type": "string"}
    request.tools.append(ToolDefinition("g", "d"))
    assert scripted.requests[0] == before
    assert function.requests[0] == before


def test_a_definition_changed_between_requests_is_recorded_as_it_was_each_time() -> None:
    request = sample()
    scripted = ScriptedProvider("one", "two")
    asyncio.run(scripted.complete(request))
    old = copy.deepcopy(request.tools[0])
    request.tools[0].parameters["properties"]["b"] = {"type": "string"}
    asyncio.run(scripted.complete(request))
    first, second = scripted.requests
    assert first.tools[0] == old
    assert second.tools[0] == request.tools[0] != old


def test_changing_a_returned_response_never_changes_the_script() -> None:
    scripted_response = tool_call_response(ToolCall("c1", "add", {"a": [1, {"b": 2}]}), text="hm")
    scripted_response.message.metadata["k"] = ["v"]
    script_before = copy.deepcopy(scripted_response)
    scripted = ScriptedProvider(scripted_response)
    got = asyncio.run(scripted.complete(CompletionRequest(model="m")))
    assert got == script_before
    got.message.content.append(TextBlock("more"))
    got.message.tool_calls[0].arguments["a"][1]["b"] = 3
    got.message.tool_calls.append(ToolCall("c2", "g"))
    got.message.metadata["k"].append("w")
    got.message.metadata["goagent.pending"] = {}
    assert scripted_response == script_before


def test_a_definition_changed_to_an_equal_value_of_another_type_is_recorded_as_sent() -> None:
    schema: dict[str, Any] = {"type": "object", "properties": {"n": {"default": 1}}}
    definition = ToolDefinition("t", "d", schema)
    request = CompletionRequest(model="m", tools=[definition])
    scripted = ScriptedProvider("one", "two")
    asyncio.run(scripted.complete(request))
    schema["properties"]["n"]["default"] = True  # what the model reads: true, not 1
    asyncio.run(scripted.complete(request))
    sent = scripted.requests[1].tools[0].parameters["properties"]["n"]["default"]
    assert type(sent) is bool


def test_a_definition_marshal_cannot_write_is_recorded_anew_each_time() -> None:
    class Note(list[str]):  # a value no JSON encoder writes, and marshal refuses
        pass

    note = Note(["first"])
    definition = ToolDefinition("t", "d", {"type": "object", "x-note": note})
    request = CompletionRequest(model="m", tools=[definition])
    scripted = ScriptedProvider("one", "two")
    asyncio.run(scripted.complete(request))
    note.append("second")
    asyncio.run(scripted.complete(request))
    assert [list(r.tools[0].parameters["x-note"]) for r in scripted.requests] == [
        ["first"],
        ["first", "second"],
    ]


def test_a_new_provider_records_a_definition_as_it_is_now_not_as_another_recorded_it() -> None:
    definition = ToolDefinition("t", "d", {"type": "object", "properties": {"a": {"type": "int"}}})
    request = CompletionRequest(model="m", tools=[definition])
    first, second, third = ScriptedProvider("1"), ScriptedProvider("2"), ScriptedProvider("3")
    asyncio.run(first.complete(request))
    # The first provider's record is changed by its reader; the definition itself is not.
    first.requests[0].tools[0].parameters["properties"]["a"]["type"] = "string"
    asyncio.run(second.complete(request))
    assert second.requests[0].tools[0] == definition
    assert second.requests[0].tools[0].parameters["properties"]["a"]["type"] == "int"
    # The definition changes: the next provider records the new value.
    definition.parameters["properties"]["b"] = {"type": "number"}
    asyncio.run(third.complete(request))
    assert third.requests[0].tools[0] == definition
    assert "b" not in second.requests[0].tools[0].parameters["properties"]


def test_providers_share_an_unchanged_definitions_copy_and_none_shares_the_original() -> None:
    definition = ToolDefinition("t", "d", {"type": "object", "properties": {"a": {"type": "int"}}})
    request = CompletionRequest(model="m", tools=[definition])
    providers = [ScriptedProvider("ok") for _ in range(3)]
    for provider in providers:
        asyncio.run(provider.complete(request))
    copies = [p.requests[0].tools[0] for p in providers]
    assert all(c == definition and c.parameters is not definition.parameters for c in copies)
    assert copies[0] is copies[1] is copies[2]
