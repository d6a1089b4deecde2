"""The scripted providers' promise, under random mutation (issue 36, docs/notes/loop16.md):
whatever is later done to anything the loop passed (its requests, their messages, calls, blocks,
tool definitions and schemas) never changes a recorded request, and whatever is done to the
script's responses or to the responses returned never changes the other. Each record is
compared with ``copy.deepcopy`` of what was passed, taken at the call, type for type.

A tool's generated schema is frozen (``goagent_py._frozen``): the records share it, so these
tests also prove nothing reaches through it."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import json
import pickle
import random
from typing import Any

import pytest

from goagent_py import Agent, tool
from goagent_py._frozen import FrozenDict, FrozenList, freeze, thaw
from goagent_py.messages import (
    DocumentBlock,
    ImageBlock,
    Message,
    Role,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
)
from goagent_py.provider import CompletionRequest, CompletionResponse, ThinkingConfig
from goagent_py.testing import FunctionProvider, ScriptedProvider, tool_call_response
from goagent_py.tools import ToolDefinition, tool_func


@tool
def lookup(city: str, days: int = 1, tags: list[str] | None = None) -> str:
    """Look a city up.

    Args:
        city: The city.
        days: How many days.
        tags: Labels.
    """
    return city


def canon(value: Any) -> Any:
    """A comparable form that tells types apart (1, 1.0 and True; a list and a tuple) and keeps
    key order; a frozen dict or list reads as a dict or list (the same JSON)."""
    kind = type(value)
    if kind is dict or kind is FrozenDict:
        return ("dict", tuple((canon(k), canon(v)) for k, v in value.items()))
    if kind is list or kind is FrozenList:
        return ("list", tuple(canon(v) for v in value))
    if kind is tuple:
        return ("tuple", tuple(canon(v) for v in value))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = dataclasses.fields(value)
        return (kind.__name__, tuple(canon(getattr(value, f.name)) for f in fields))
    return (kind.__name__, value)


def reachable(root: Any) -> list[Any]:
    """Every container and record reachable from ``root``, once each."""
    seen: dict[int, Any] = {}
    stack = [root]
    while stack:
        item = stack.pop()
        if id(item) in seen or type(item) in (str, int, float, bool, bytes, type(None)):
            continue
        if isinstance(item, Role | StopReason):
            continue
        seen[id(item)] = item
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        elif dataclasses.is_dataclass(item):
            stack.extend(getattr(item, f.name) for f in dataclasses.fields(item))
    return list(seen.values())


def _junk(rng: random.Random) -> Any:
    return rng.choice(
        [
            "changed",
            7,
            7.0,
            True,
            None,
            [1, {"x": 2}],
            {"k": [3]},
            TextBlock("junk"),
            ToolCall("cx", "x", {"y": 1}),
        ]
    )


def mutate(root: Any, rng: random.Random, times: int) -> int:
    """``times`` random changes to whatever is reachable from ``root``; a change the value
    refuses (frozen records, frozen schemas) is skipped. Returns how many took."""
    took = 0
    for _ in range(times):
        target = rng.choice(reachable(root))
        try:
            if isinstance(target, dict):
                keys = list(target)
                op = rng.randrange(4)
                if op == 0 or not keys:
                    target[f"new{rng.randrange(9)}"] = _junk(rng)
                elif op == 1:
                    target[rng.choice(keys)] = _junk(rng)
                elif op == 2:
                    del target[rng.choice(keys)]
                else:
                    target.clear()
            elif isinstance(target, list):
                op = rng.randrange(5)
                if op == 0 or not target:
                    target.append(_junk(rng))
                elif op == 1:
                    target[rng.randrange(len(target))] = _junk(rng)
                elif op == 2:
                    target.pop()
                elif op == 3:
                    target.insert(0, _junk(rng))
                else:
                    target.reverse()
            elif dataclasses.is_dataclass(target) and not isinstance(target, type):
                field = rng.choice(dataclasses.fields(target))
                setattr(target, field.name, _junk(rng))
            else:
                continue
        except (TypeError, AttributeError, dataclasses.FrozenInstanceError):
            continue  # refused: it cannot change
        took += 1
    return took


def _request(rng: random.Random, conversation: list[Message]) -> CompletionRequest:
    plain = ToolDefinition(
        "plain", "A hand-written schema.", {"type": "object", "properties": {"n": {"default": 1}}}
    )
    return CompletionRequest(
        model="m",
        system_prompt="s",
        messages=conversation,
        tools=[lookup.definition, plain, rng.choice([lookup.definition, plain])],
        thinking=ThinkingConfig(1024),
        effort="low",
        max_tokens=10,
    )


def _message(rng: random.Random, n: int) -> Message:
    kind = rng.randrange(4)
    if kind == 0:
        return Message(
            Role.USER,
            [TextBlock(f"hi {n}"), ImageBlock(b"\x89PNG", "image/png")],
            metadata={"nested": {"list": [1, [2]]}},
        )
    if kind == 1:
        call = ToolCall(f"c{n}", "lookup", {"city": "Oslo", "tags": ["a", {"b": [n]}]})
        return Message(Role.ASSISTANT, [ThinkingBlock("hm", "sig")], tool_calls=[call])
    if kind == 2:
        return Message(Role.TOOL, [TextBlock("Sunny")], tool_call_id=f"c{n}", is_error=False)
    return Message(Role.ASSISTANT, [DocumentBlock(b"%PDF", "application/pdf", "doc")])


@pytest.mark.parametrize("seed", range(12))
def test_records_never_change_whatever_is_done_to_what_was_passed(seed: int) -> None:
    """Requests sent to several providers, interleaved with random changes to the conversation
    and the definitions between the calls (what a loop and its callers do): every record equals
    ``copy.deepcopy`` of its request at the call, to the type, after all of it."""
    rng = random.Random(seed)
    providers = [ScriptedProvider(*["ok"] * 40), FunctionProvider(lambda r: "ok")]
    conversation: list[Message] = []
    sent: list[tuple[CompletionRequest, Any]] = []
    for n in range(14):
        conversation.append(_message(rng, n))
        request = _request(rng, conversation)
        expected = canon(copy.deepcopy(request))
        for provider in providers:
            asyncio.run(provider.complete(request))
        sent.append((request, expected))
        mutate(request, rng, rng.randrange(4))  # between calls: the next request sees it
    took = 0
    for request, _ in sent:
        took += mutate(request, rng, 30)
    assert took > 100  # the mutations reached the originals
    for provider in providers:
        records = provider.requests[-len(sent) :]
        assert [canon(r) for r in records] == [expected for _, expected in sent]


@pytest.mark.parametrize("seed", range(6))
def test_responses_and_their_script_never_change_each_other(seed: int) -> None:
    rng = random.Random(seed)
    script = [
        tool_call_response(ToolCall("c1", "lookup", {"city": "Oslo", "tags": ["x", {"y": [1]}]})),
        CompletionResponse(
            Message(Role.ASSISTANT, [TextBlock("Sunny")], metadata={"k": ["v"]}),
            StopReason.END_TURN,
            Usage(1, 2),
        ),
    ]
    script_before = canon(copy.deepcopy(script))
    scripted = ScriptedProvider(*script)
    got = [asyncio.run(scripted.complete(CompletionRequest(model="m"))) for _ in script]
    got_before = canon(copy.deepcopy(got))
    assert got_before == script_before
    assert mutate(got, rng, 60) > 10
    assert canon(script) == script_before  # the script is as it was
    rng = random.Random(seed + 100)
    second = ScriptedProvider(*script)
    again = [asyncio.run(second.complete(CompletionRequest(model="m"))) for _ in script]
    again_before = canon(copy.deepcopy(again))
    assert mutate(script, rng, 60) > 10
    assert canon(again) == again_before  # what was returned is as it was


def test_a_real_runs_records_survive_changes_to_everything_it_passed() -> None:
    """The loop's own requests (a run with a generated schema's tool): recorded as sent, after
    random changes to every request the provider was given and the run's messages."""
    passed: list[tuple[CompletionRequest, Any]] = []
    scripted = ScriptedProvider(tool_call_response(("lookup", {"city": "Oslo"})), "Sunny.")

    class Watching:
        async def complete(self, request: CompletionRequest) -> CompletionResponse:
            passed.append((request, canon(copy.deepcopy(request))))
            return await scripted.complete(request)

    result = Agent(provider=Watching(), tools=[lookup]).run_sync("Weather?")
    assert result.text == "Sunny."
    rng = random.Random(3)
    for request, _ in passed:
        mutate(request, rng, 40)
    assert [canon(r) for r in scripted.requests] == [expected for _, expected in passed]
    assert len(passed) == 2


def test_a_generated_schema_is_frozen_json() -> None:
    """It cannot change: every change raises (what to do in the message); it is plain JSON to
    ``==``, ``isinstance``, the JSON encoder and pickle; a copy is a mutable plain dict."""
    schema = lookup.definition.parameters
    assert type(schema) is FrozenDict
    assert isinstance(schema, dict)
    assert schema == thaw(schema)
    required = schema["required"]
    assert type(required) is FrozenList
    assert required == ["city"]
    changes = [
        lambda: schema.__setitem__("x", 1),
        lambda: schema.__delitem__("type"),
        lambda: schema.update(x=1),
        lambda: schema.setdefault("x", 1),
        lambda: schema.pop("type"),
        lambda: schema.popitem(),
        lambda: schema.clear(),
        lambda: schema.__ior__({"x": 1}),
        lambda: schema.__init__({"x": 1}),
        lambda: required.append("x"),
        lambda: required.extend(["x"]),
        lambda: required.insert(0, "x"),
        lambda: required.remove("city"),
        lambda: required.pop(),
        lambda: required.clear(),
        lambda: required.sort(),
        lambda: required.reverse(),
        lambda: required.__setitem__(0, "x"),
        lambda: required.__delitem__(0),
        lambda: required.__iadd__(["x"]),
        lambda: required.__imul__(2),
        lambda: FrozenDict({"a": 1}),
    ]
    for change in changes:
        with pytest.raises(TypeError, match=r"copy\.deepcopy\(definition\.parameters\)"):
            change()
    assert canon(schema) == canon(thaw(lookup.definition.parameters))
    assert json.loads(json.dumps(schema)) == schema
    mutable = copy.deepcopy(schema)
    assert type(mutable) is dict
    assert type(mutable["required"]) is list
    mutable["properties"]["city"]["description"] = "changed"
    assert schema["properties"]["city"]["description"] == "The city."
    shallow = copy.copy(schema)
    assert type(shallow) is dict
    shallow["x"] = 1
    assert "x" not in schema
    revived = pickle.loads(pickle.dumps(schema))
    assert type(revived) is FrozenDict
    assert revived == schema


def test_only_json_is_frozen() -> None:
    """A value that is not JSON (an object, a non-str key) leaves the schema plain: its
    holders copy it as before."""
    odd: dict[str, Any] = {"type": "object", "x-note": object()}
    assert freeze(odd) is odd
    keyed: dict[Any, Any] = {1: "int key"}
    assert freeze(keyed) is keyed
    assert canon(freeze({"a": (1, [2.0, True])})) == canon({"a": [1, [2.0, True]]})


def test_a_hand_written_schema_stays_the_callers() -> None:
    """``tool_func``'s schema is the caller's, as before: not frozen."""
    mine: dict[str, Any] = {"type": "object", "properties": {"q": {"type": "string"}}}
    made = tool_func("find", "Find.", mine, lambda args: "x")
    assert type(made.definition.parameters) is dict


@pytest.mark.parametrize("field", ["name", "description", "parameters"])
@pytest.mark.parametrize("whose", ["the definition", "a record"])
def test_a_frozen_definition_changed_past_its_frozenness_is_recorded_as_sent(
    field: str, whose: str
) -> None:
    """``object.__setattr__`` on the definition, or on a record a reader holds: the next
    record, of this provider or a new one, is the definition as it is when sent."""
    definition = ToolDefinition("t", "Adds.", freeze({"type": "object", "properties": {}}))
    request = CompletionRequest(model="m", tools=[definition])
    first, second = ScriptedProvider("1", "2"), ScriptedProvider("3")
    asyncio.run(first.complete(request))
    sent = canon(copy.deepcopy(definition))
    changed = freeze({"type": "object"}) if field == "parameters" else "changed"
    target = definition if whose == "the definition" else first.requests[0].tools[0]
    object.__setattr__(target, field, changed)
    asyncio.run(first.complete(request))
    asyncio.run(second.complete(request))
    now = canon(copy.deepcopy(definition))
    if whose == "the definition":
        assert canon(first.requests[0].tools[0]) == sent
    assert canon(first.requests[1].tools[0]) == now
    assert canon(second.requests[0].tools[0]) == now
