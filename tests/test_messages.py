"""Messages and blocks: media types, text helpers, JSON round-trip."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from goagent_py import (
    ConfigurationError,
    DocumentBlock,
    ImageBlock,
    InvalidMediaTypeError,
    Message,
    Role,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    Usage,
    assistant_message,
    messages_from_json,
    messages_to_json,
    text_from,
    user_message,
)


@pytest.mark.parametrize("media_type", ["image/jpeg", "image/png", "image/gif", "image/webp"])
def test_image_media_types_accepted(media_type: str) -> None:
    assert ImageBlock(b"\x89PNG", media_type).media_type == media_type


@pytest.mark.parametrize("media_type", ["image/bmp", "image/PNG", "", "application/pdf"])
def test_image_media_type_rejected_with_the_allowed_list(media_type: str) -> None:
    with pytest.raises(InvalidMediaTypeError, match="image/jpeg, image/png"):
        ImageBlock(b"x", media_type)


@pytest.mark.parametrize("media_type", ["application/pdf", "text/plain"])
def test_document_media_types_accepted(media_type: str) -> None:
    assert DocumentBlock(b"%PDF", media_type, title="t").title == "t"


def test_document_media_type_rejected() -> None:
    with pytest.raises(InvalidMediaTypeError) as info:
        DocumentBlock(b"<html>", "text/html")
    assert info.value.media_type == "text/html"
    assert isinstance(info.value, ValueError)


def test_block_data_must_be_bytes() -> None:
    with pytest.raises(ConfigurationError, match="bytes"):
        ImageBlock("not bytes", "image/png")  # type: ignore[arg-type]


def test_text_joins_non_empty_text_blocks_and_ignores_the_rest() -> None:
    msg = Message(
        Role.ASSISTANT,
        [
            ThinkingBlock("hmm", "sig"),
            TextBlock("a"),
            TextBlock(""),
            ImageBlock(b"x", "image/png"),
            TextBlock("b"),
        ],
    )
    assert msg.text == "a\nb"
    assert text_from(msg.content) == "a\nb"
    assert msg.has("thinking")
    assert msg.has("image")
    assert not msg.has("document")


def test_helpers_make_one_text_block_even_for_empty_text() -> None:
    assert user_message("").content == [TextBlock("")]
    assert user_message("hi").role is Role.USER
    assert assistant_message("yo").role is Role.ASSISTANT


def test_enums_are_lowercase_strings() -> None:
    assert Role.ASSISTANT == "assistant"
    assert StopReason.END_TURN == "end_turn"


def test_usage_adds_every_field() -> None:
    total = Usage(1, 2, 3, 4) + Usage(10, 20, 30, 40)
    assert total == Usage(11, 22, 33, 44)
    assert total.total_tokens == 110


def test_json_round_trip_keeps_bytes_and_every_field() -> None:
    messages = [
        Message(Role.USER, [TextBlock("look"), ImageBlock(bytes(range(256)), "image/png")]),
        Message(
            Role.ASSISTANT,
            [ThinkingBlock("think", "sig=="), TextBlock("calling")],
            tool_calls=[ToolCall("c1", "read", {"path": "/x", "n": [1, 2]})],
        ),
        Message(
            Role.TOOL,
            [DocumentBlock(b"%PDF-1.7\x00\xff", "application/pdf", title="doc")],
            tool_call_id="c1",
            is_error=True,
            metadata={"source": "a.pdf", "page": 2},
        ),
    ]
    back = messages_from_json(messages_to_json(messages))
    assert back == messages
    assert back[0].role is Role.USER
    assert isinstance(back[2].content[0], DocumentBlock)
    assert back[2].content[0].data == b"%PDF-1.7\x00\xff"


def test_json_rejects_unknown_block_types_and_bad_media_types() -> None:
    with pytest.raises(ValueError, match="type"):
        messages_from_json('[{"role": "user", "content": [{"type": "pickle", "x": 1}]}]')
    with pytest.raises(ValueError, match="image/bmp"):
        messages_from_json(
            '[{"role":"user","content":[{"type":"image","data":"AA==","media_type":"image/bmp"}]}]'
        )


_blocks = st.one_of(
    st.builds(TextBlock, st.text()),
    st.builds(ImageBlock, st.binary(), st.sampled_from(["image/png", "image/gif"])),
    st.builds(DocumentBlock, st.binary(), st.just("application/pdf"), title=st.text()),
    st.builds(ThinkingBlock, st.text(), st.text()),
)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)
_messages = st.builds(
    Message,
    st.sampled_from(list(Role)),
    st.lists(_blocks, max_size=4),
    tool_calls=st.lists(
        st.builds(ToolCall, st.text(), st.text(), st.dictionaries(st.text(), _json_values)),
        max_size=2,
    ),
    tool_call_id=st.text(),
    is_error=st.booleans(),
    metadata=st.dictionaries(st.text(), _json_values, max_size=3),
)


@given(st.lists(_messages, max_size=5))
def test_any_message_list_round_trips(messages: list[Message]) -> None:
    assert messages_from_json(messages_to_json(messages)) == messages


def test_legacy_system_and_document_rows_load_as_user_messages() -> None:
    raw = (
        b'[{"role": "document", "content": [{"type": "text", "text": "a"}]},'
        b' {"role": "system", "content": [{"type": "text", "text": "b"}]}]'
    )
    loaded = messages_from_json(raw)
    assert [m.role for m in loaded] == [Role.USER, Role.USER]
    assert [m.text for m in loaded] == ["a", "b"]


_any_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text()
    | st.sampled_from([1e16, 1e-7, 1e22, 0.1, -0.0, 123456789.0]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner)
        | st.dictionaries(st.text(), inner, max_size=3)
        | st.dictionaries(st.integers(), inner, max_size=2)
    ),
    max_leaves=8,
)
_any_messages = st.builds(
    Message,
    st.sampled_from(list(Role)),
    st.lists(_blocks, max_size=4),
    tool_calls=st.lists(
        st.builds(ToolCall, st.text(), st.text(), st.dictionaries(st.text(), _any_values)),
        max_size=2,
    ),
    tool_call_id=st.text(),
    is_error=st.booleans(),
    metadata=st.dictionaries(st.text(), _any_values, max_size=3),
)


@given(st.lists(_any_messages, max_size=4))
def test_json_is_byte_for_byte_what_the_pydantic_adapter_writes(messages: list[Message]) -> None:
    # Long-term entry ids hash this JSON: the stdlib path must never change a byte of it.
    from goagent_py.messages import _messages_adapter

    try:
        expected = _messages_adapter().dump_json(messages)
    except ValueError as exc:  # pydantic refuses it (a lone surrogate): so does messages_to_json
        with pytest.raises(type(exc), match=re.escape(str(exc))):
            messages_to_json(messages)
        return
    assert messages_to_json(messages) == expected


def test_json_of_awkward_values_matches_pydantic() -> None:
    from goagent_py.messages import _messages_adapter

    message = Message(
        Role.ASSISTANT,
        [TextBlock('a\u00e9\x01\x7f"\\/\n\u2028'), ImageBlock(b"\xfb\xff\xfe", "image/png")],
        tool_calls=[ToolCall("c", "n", {"x": 1e-7, "y": (1, 2), "z": float("nan")})],
        metadata={"k": {1: "int key"}, "big": 2**80},
    )
    assert messages_to_json([message]) == _messages_adapter().dump_json([message])


def test_a_new_process_writes_messages_without_building_the_pydantic_adapter() -> None:
    # Issue 36: the adapter costs ~100 ms to build; a new process's first stored message
    # (SQLite append, long-term entry id) must not wait for it.
    import subprocess
    import sys

    probe = (
        "import sys\n"
        "from goagent_py.messages import Message, Role, TextBlock, ToolCall, messages_to_json\n"
        "call = ToolCall('c', 'f', {'a': 1})\n"
        "m = Message(Role.ASSISTANT, [TextBlock('hi')], tool_calls=[call])\n"
        "messages_to_json([m])\n"
        "from goagent_py import messages\n"
        "print(bool(messages._ADAPTER), 'pydantic' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
