"""The loop's fast builders of frozen records make what the public constructors make."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from typing import Annotated, Any

import pytest

from goagent_py import Message, PendingCall, Role, RunResult, StopReason, TextBlock, ToolCall, Usage
from goagent_py._records import (
    FIELDS,
    message,
    run_result,
    text_block,
    text_of,
    tool_call,
    tool_result,
)
from goagent_py.messages import ContentBlock, _LegacyRole
from goagent_py.results import ToolResult


@pytest.mark.parametrize("kind", sorted(FIELDS, key=lambda k: k.__name__))
def test_every_builder_sets_every_field_of_its_class(kind: type) -> None:
    assert FIELDS[kind] == tuple(f.name for f in dataclasses.fields(kind))
    if kind is not Message:  # its __post_init__ only makes a Role of a string role
        assert "__post_init__" not in vars(kind)  # nothing a builder would skip


def test_the_builders_make_what_the_constructors_make() -> None:
    call = ToolCall("c1", "add", {"a": 1})
    assert tool_call("c1", "add", {"a": 1}) == call
    assert type(tool_call("c1", "add", {})) is ToolCall
    block = text_block("hi")
    assert block == TextBlock("hi")
    assert block.type == "text"
    assert repr(block) == repr(TextBlock("hi"))
    error = ValueError("x")
    when = datetime.now(UTC)
    made = tool_result(call, [block], error, 0.5, when)
    assert made == ToolResult(call, [TextBlock("hi")], error, 0.5, when)
    assert made.details is None
    assert made.terminate is False
    assert made.is_error
    pending = [PendingCall(call)]
    messages = [Message("user", [TextBlock("q")])]
    usage = Usage(1, 2, 3, 4)
    fast = run_result(
        "t", StopReason.END_TURN, 2, usage, 1, 0.1, 0.2, messages, None, "r", "o", pending
    )
    assert fast == RunResult(
        text="t",
        stop_reason=StopReason.END_TURN,
        iterations=2,
        usage=usage,
        tool_calls=1,
        tool_time=0.1,
        duration=0.2,
        messages=messages,
        error=None,
        run_id="r",
        output="o",
        pending=pending,
    )
    assert str(fast) == "t"
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast.text = "changed"  # type: ignore[misc]


def test_the_message_builder_makes_what_the_constructor_makes() -> None:
    content = [TextBlock("5")]
    made = message(Role.TOOL, content, "call_1", True)
    assert made == Message(Role.TOOL, [TextBlock("5")], tool_call_id="call_1", is_error=True)
    assert made.content is content
    plain = message(Role.USER, [])
    assert plain == Message(Role.USER)
    assert repr(plain) == repr(Message("user"))
    other = message(Role.USER, [])
    # Fresh containers per message, as the default factories give.
    assert plain.tool_calls is not other.tool_calls
    assert plain.metadata is not other.metadata
    # The one thing __post_init__ does, the builder's callers never need: the role is a Role.
    assert type(Message("user").role) is Role


def test_the_request_builder_makes_what_the_constructor_makes() -> None:
    from goagent_py import CompletionRequest, ThinkingConfig, ToolDefinition
    from goagent_py._loop import new_request as request

    assert [f.name for f in dataclasses.fields(CompletionRequest)] == [
        "model",
        "system_prompt",
        "messages",
        "tools",
        "thinking",
        "effort",
        "max_tokens",
        "output",
    ]  # the builder sets each of these; a new field needs a line there
    assert "__post_init__" not in vars(CompletionRequest)

    messages = [Message(Role.USER, [TextBlock("q")])]
    tools = [ToolDefinition("add", "Add.", {"type": "object"})]
    thinking = ThinkingConfig(budget_tokens=1024)
    made = request("m", "sys", messages, tools, thinking, "low", 100)
    assert made == CompletionRequest(
        model="m",
        system_prompt="sys",
        messages=messages,
        tools=tools,
        thinking=thinking,
        effort="low",
        max_tokens=100,
    )
    assert made.messages is messages
    assert made.tools is tools
    assert made.output is None
    assert repr(request("m", "", [], [], None, None, None)) == repr(CompletionRequest("m"))


@pytest.mark.parametrize(
    "content",
    [
        [],
        [TextBlock("5")],
        [TextBlock("")],
        [TextBlock("a"), TextBlock("b")],
        [TextBlock("a"), TextBlock("")],
    ],
)
def test_text_of_is_the_messages_text(content: list[Any]) -> None:
    made = Message(Role.ASSISTANT, content)
    assert text_of(made) == made.text


def test_text_of_a_message_subclass_is_its_own_text() -> None:
    @dataclasses.dataclass(slots=True)
    class Shouting(Message):
        @property
        def text(self) -> str:
            return "LOUD"

    assert text_of(Shouting(Role.ASSISTANT, [TextBlock("quiet")])) == "LOUD"


def test_usage_and_text_block_keep_their_dataclass_constructors() -> None:
    import inspect

    params = inspect.signature(Usage).parameters
    assert [(p.name, p.default, p.kind) for p in params.values()] == [
        (name, 0, inspect.Parameter.POSITIONAL_OR_KEYWORD) for name in FIELDS_OF_USAGE
    ]
    assert Usage(1, 2, cache_read_input_tokens=4) == Usage(1, 2, 0, 4)
    assert Usage(1, 2, 3, 4).total_tokens == 10
    assert dataclasses.replace(Usage(1), output_tokens=5) == Usage(1, 5)
    assert list(inspect.signature(TextBlock).parameters) == ["text"]
    assert TextBlock(text="x").type == "text"
    assert dataclasses.replace(TextBlock("a"), text="b") == TextBlock("b")
    with pytest.raises(TypeError):
        TextBlock("a", "text")  # type: ignore[call-arg]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Usage().input_tokens = 1  # type: ignore[misc]


FIELDS_OF_USAGE = [f.name for f in dataclasses.fields(Usage)]


def test_the_streaming_check_answers_what_isinstance_answers() -> None:
    from goagent_py.provider import StreamingProvider, _streams
    from goagent_py.testing import FunctionProvider, ScriptedProvider

    class Blocked(ScriptedProvider):
        stream = None  # type: ignore[assignment]

    class Registered:
        pass

    for provider in (ScriptedProvider(), FunctionProvider(lambda r: "x"), Blocked(), object()):
        assert _streams(provider) == isinstance(provider, StreamingProvider)
    assert _streams(ScriptedProvider())
    assert not _streams(FunctionProvider(lambda r: "x"))
    assert not _streams(Blocked())
    assert not _streams(Registered())


# Twins of ToolCall and Message with the constructors dataclasses generates (the same fields,
# annotations and __post_init__): the hand-written constructors must take and make the same.
@dataclasses.dataclass(slots=True, frozen=True)
class _ToolCallTwin:
    id: str
    name: str
    arguments: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(slots=True)
class _MessageTwin:
    role: Annotated[Role, _LegacyRole()]
    content: list[ContentBlock] = dataclasses.field(default_factory=list)
    _: dataclasses.KW_ONLY
    tool_calls: list[ToolCall] = dataclasses.field(default_factory=list)
    tool_call_id: str = ""
    is_error: bool = False
    metadata: dict[str, Any] = dataclasses.field(default_factory=dict)

    __post_init__ = Message.__post_init__


def _made(kind: type, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """What ``kind(*args, **kwargs)`` gives, as data: the field values, or the error (its text
    with a twin's name read as its class's)."""
    try:
        made = kind(*args, **kwargs)
    except Exception as exc:
        text = str(exc).replace("_ToolCallTwin", "ToolCall").replace("_MessageTwin", "Message")
        return type(exc), text
    return type(made) is kind, [getattr(made, f.name) for f in dataclasses.fields(kind)]


_ARGS = {"a": 1}
_CALLS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    (("c1", "add"), {}),
    (("c1", "add", _ARGS), {}),
    (("c1",), {"name": "add", "arguments": _ARGS}),
    ((), {"id": "c1", "name": "add"}),
    (("c1",), {}),
    ((), {}),
    (("c1", "add", _ARGS, "extra"), {}),
    (("c1", "add"), {"argument": _ARGS}),
    (("c1", "add"), {"arguments": None}),
]
_BLOCKS = [TextBlock("q")]
_MESSAGES: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    ((Role.USER,), {}),
    (("user",), {}),
    (("assistant", _BLOCKS), {}),
    ((Role.TOOL, _BLOCKS), {"tool_call_id": "c1", "is_error": True}),
    ((Role.ASSISTANT,), {"tool_calls": [ToolCall("c1", "add")], "metadata": {"k": 1}}),
    ((), {"role": Role.USER, "content": _BLOCKS}),
    (("system",), {}),
    (("document", _BLOCKS), {}),
    ((3,), {}),
    ((), {}),
    ((Role.USER, _BLOCKS, []), {}),
    ((Role.USER,), {"tool_call": []}),
    ((Role.USER,), {"content": _BLOCKS, "metadata": None}),
]


@pytest.mark.parametrize(("kind", "twin"), [(ToolCall, _ToolCallTwin), (Message, _MessageTwin)])
def test_tool_call_and_message_constructors_have_the_generated_signature(
    kind: type, twin: type
) -> None:
    import inspect

    assert inspect.signature(kind) == inspect.signature(twin)
    assert kind.__init__.__qualname__ == f"{kind.__name__}.__init__"
    assert kind.__match_args__ == twin.__match_args__


@pytest.mark.parametrize(("args", "kwargs"), _CALLS)
def test_the_tool_call_constructor_makes_what_the_generated_one_makes(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    assert _made(ToolCall, args, kwargs) == _made(_ToolCallTwin, args, kwargs)


@pytest.mark.parametrize(("args", "kwargs"), _MESSAGES)
def test_the_message_constructor_makes_what_the_generated_one_makes(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    assert _made(Message, args, kwargs) == _made(_MessageTwin, args, kwargs)


def test_constructors_give_fresh_defaults_and_keep_what_is_given() -> None:
    first, second = ToolCall("c1", "add"), ToolCall("c2", "add")
    assert first.arguments == {}
    assert first.arguments is not second.arguments
    given = {"a": 1}
    assert ToolCall("c1", "add", given).arguments is given
    one, two = Message(Role.USER), Message(Role.USER)
    assert one.content is not two.content
    assert one.tool_calls is not two.tool_calls
    assert one.metadata is not two.metadata
    assert Message(Role.USER, _BLOCKS).content is _BLOCKS
    with pytest.raises(dataclasses.FrozenInstanceError):
        first.name = "other"  # type: ignore[misc]
    assert dataclasses.replace(first, arguments=given) == ToolCall("c1", "add", {"a": 1})
    assert dataclasses.replace(one, role="assistant").role is Role.ASSISTANT


def test_a_message_subclass_still_gets_its_post_init() -> None:
    seen: list[str] = []

    class Logged(Message):
        __slots__ = ()

        def __post_init__(self) -> None:
            seen.append(self.role)
            Message.__post_init__(self)

    made = Logged(Role.USER)
    assert seen == [Role.USER]
    assert type(made.role) is Role
