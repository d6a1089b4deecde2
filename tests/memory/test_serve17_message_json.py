"""serve17 (issue 36): a stored message's JSON is written by one encoder built once, with the
bytes ``json.dumps`` (and pydantic's adapter) wrote; SQLite storage stores them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import (
    Message,
    Role,
    TextBlock,
    ToolCall,
    _messages_adapter,
    messages_from_json,
    messages_to_json,
    user_message,
)

_TEXTS = ["plain", "é ü 中文 🙂", 'quote " and \\ back', "line\nbreak\ttab\u2028\u2029", "\x00\x1f"]


def _messages() -> list[Message]:
    out = [user_message(text) for text in _TEXTS]
    out.append(
        Message(
            Role.ASSISTANT,
            [TextBlock("calls")],
            tool_calls=[ToolCall("c1", "f", {"n": 1, "x": 2.5, "neg": -0.0, "l": [None, True]})],
            metadata={"k": {"nested": ["é", 3]}, "": ""},
        )
    )
    return out


def test_the_json_is_the_adapters_and_dumps_alike() -> None:
    for message in _messages():
        ours = messages_to_json([message])
        assert ours == _messages_adapter().dump_json([message])
        plain = json.loads(ours)
        assert ours.decode() == json.dumps(plain, ensure_ascii=False, separators=(",", ":"))
        assert messages_from_json(ours) == [message]


def test_a_lone_surrogate_is_stored_as_the_replacement_character() -> None:
    (back,) = messages_from_json(messages_to_json([user_message("name \udcff.txt")]))
    assert back.text == "name \ufffd.txt"


async def test_storing_messages_builds_no_encoder_per_message(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="t")
    await storage.append([user_message("warm up")])
    built: list[object] = []
    real_init = json.JSONEncoder.__init__

    def init(self: json.JSONEncoder, *args: object, **kwargs: object) -> None:
        built.append(kwargs)
        real_init(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(json.JSONEncoder, "__init__", init)
    messages = _messages()
    for message in messages:
        await storage.append([message])
    assert built == []
    assert (await storage.load())[1:] == messages
    await storage.aclose()
