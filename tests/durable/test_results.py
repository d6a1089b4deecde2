"""Tool results by reference (goagent_py/durable/_results.py): stored beside the session."""

from __future__ import annotations

from pathlib import Path

import pytest

from goagent_py.durable._results import (
    RESULT_WHOLE,
    expanded,
    reference_of,
    store_result,
    thinking_by_reference,
)
from goagent_py.durable._wire import content_to_text
from goagent_py.errors import CorruptedDataError
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import ImageBlock, Message, Role, TextBlock, ThinkingBlock


async def test_a_stored_result_comes_back_in_its_messages_place(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    memory = ShortTermMemory(storage)
    content = [TextBlock("a" * 1000), ImageBlock(data=b"\x89PNG", media_type="image/png")]
    ref = await store_result(memory, content, content_to_text(content))
    assert ref is not None
    again = await store_result(memory, content, content_to_text(content))
    assert again == ref  # the same content: one row
    by_ref = Message(Role.TOOL, [TextBlock(ref)], tool_call_id="c1", is_error=True)
    assert reference_of(by_ref) == ref.split(":")[1]
    prompt = Message(Role.USER, [TextBlock(ref)])  # a user's text is never a reference
    out = await expanded(memory, [prompt, by_ref])
    assert out == [prompt, Message(Role.TOOL, content, tool_call_id="c1", is_error=True)]
    # Beside the conversation, not in it.
    assert await storage.load() == []
    await storage.aclose()


async def test_a_memory_without_sessions_gets_the_result_whole() -> None:
    content = [TextBlock("b" * 10)]
    assert await store_result(ShortTermMemory(), content, content_to_text(content)) is None
    assert await store_result(None, content, content_to_text(content)) is None


async def test_a_result_removed_under_the_run_fails_loudly(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    missing = Message(Role.TOOL, [TextBlock("goagent.result:" + "0" * 64)], tool_call_id="c")
    with pytest.raises(CorruptedDataError, match="no longer stored"):
        await expanded(ShortTermMemory(storage), [missing])
    await storage.aclose()


async def test_a_big_thinking_block_is_stored_and_comes_back_with_its_signature(
    tmp_path: Path,
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    memory = ShortTermMemory(storage)
    small = ThinkingBlock("short", signature="a")
    big = ThinkingBlock("t" * (RESULT_WHOLE + 1), signature="b")
    answer = Message(Role.ASSISTANT, [small, big, TextBlock("done")])
    lean = await thinking_by_reference(memory, answer)
    assert lean.content[0] == small
    assert isinstance(lean.content[1], ThinkingBlock)
    assert lean.content[1].thinking.startswith("goagent.result:")
    assert lean.content[1].signature == "b"
    assert await expanded(memory, [lean]) == [answer]
    await storage.aclose()
