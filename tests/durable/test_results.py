"""Tool results by reference (goagent_py/durable/_results.py): stored beside the session."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from goagent_py.durable._results import (
    RESULT_WHOLE,
    expanded,
    marked,
    reference_of,
    reference_text,
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
    digest = await store_result(memory, "s", content, content_to_text(content))
    assert digest is not None
    again = await store_result(memory, "s", content, content_to_text(content))
    assert again == digest  # the same content: one row
    ref = reference_text(digest)
    tool = Message(Role.TOOL, [TextBlock(ref)], tool_call_id="c1", is_error=True)
    by_ref = marked(tool, digest)
    assert reference_of(by_ref) == digest
    prompt = Message(Role.USER, [TextBlock(ref)])  # a user's text is never a reference
    out = await expanded(memory, "s", [prompt, by_ref])
    # The content back, the mark gone (what is stored and what the model reads).
    assert out == [prompt, Message(Role.TOOL, content, tool_call_id="c1", is_error=True)]
    # Beside the conversation, not in it.
    assert await storage.load() == []
    await storage.aclose()


async def test_a_tool_output_that_reads_like_a_reference_stays_data(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    memory = ShortTermMemory(storage)
    content = [TextBlock("secret of another run " * 5000)]
    digest = await store_result(memory, "s", content, content_to_text(content))
    assert digest is not None
    # A tool that answers with a stored result's reference text (hostile, or unlucky): no
    # mark, so it is what the model reads and what is stored, never the stored content.
    forged = Message(Role.TOOL, [TextBlock(reference_text(digest))], tool_call_id="c2")
    assert reference_of(forged) is None
    assert await expanded(memory, "s", [forged]) == [forged]
    # Nor a thinking block that reads like one in an answer the model activity did not mark.
    thought = Message(Role.ASSISTANT, [ThinkingBlock(reference_text(digest), signature="x")])
    assert await expanded(memory, "s", [thought]) == [thought]
    await storage.aclose()


async def test_clearing_a_conversation_deletes_its_result_rows_and_only_its_own(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.db"
    mine, other = SQLiteStorage(path, session_id="s"), SQLiteStorage(path, session_id="s2")
    prefix = SQLiteStorage(path, session_id="s-longer")  # another conversation, a longer name
    content = [TextBlock("c" * (RESULT_WHOLE + 1))]
    data = content_to_text(content)
    for storage in (mine, other, prefix):  # the same content in three conversations
        digest = await store_result(ShortTermMemory(storage), storage.session_id, content, data)
        assert digest is not None
    by_ref = marked(
        Message(Role.TOOL, [TextBlock(reference_text(digest))], tool_call_id="c"), digest
    )
    await mine.clear()
    with pytest.raises(CorruptedDataError, match="no longer stored"):
        await expanded(ShortTermMemory(mine), "s", [by_ref])
    for storage in (other, prefix):  # theirs survive: each conversation owns its row
        out = await expanded(ShortTermMemory(storage), storage.session_id, [by_ref])
        assert out[0].content == content
    await other.clear()
    await prefix.clear()
    for storage in (mine, other, prefix):
        await storage.aclose()
    conn = sqlite3.connect(path)  # every id with rows, parts too (list_sessions lists no parts)
    try:
        assert conn.execute("SELECT count(*) FROM goagent_messages").fetchone() == (0,)
    finally:
        conn.close()


async def test_a_memory_without_sessions_gets_the_result_whole() -> None:
    content = [TextBlock("b" * 10)]
    assert await store_result(ShortTermMemory(), "s", content, content_to_text(content)) is None
    assert await store_result(None, "s", content, content_to_text(content)) is None


async def test_a_result_removed_under_the_run_fails_loudly(tmp_path: Path) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    digest = "0" * 64
    missing = Message(Role.TOOL, [TextBlock(reference_text(digest))], tool_call_id="c")
    with pytest.raises(CorruptedDataError, match="no longer stored"):
        await expanded(ShortTermMemory(storage), "s", [marked(missing, digest)])
    await storage.aclose()


async def test_a_big_thinking_block_is_stored_and_comes_back_with_its_signature(
    tmp_path: Path,
) -> None:
    storage = SQLiteStorage(tmp_path / "chat.db", session_id="s")
    memory = ShortTermMemory(storage)
    small = ThinkingBlock("short", signature="a")
    big = ThinkingBlock("t" * (RESULT_WHOLE + 1), signature="b")
    answer = Message(Role.ASSISTANT, [small, big, TextBlock("done")])
    lean = await thinking_by_reference(memory, "s", answer)
    assert lean.content[0] == small
    assert isinstance(lean.content[1], ThinkingBlock)
    assert lean.content[1].thinking.startswith("goagent.result:")
    assert lean.content[1].signature == "b"
    assert await expanded(memory, "s", [lean]) == [answer]
    await storage.aclose()
