"""The file tools' bookkeeping never holds the event loop (docs/approvals.md, "What an
approval covers"): a
write's place is taken on the loop (``reserve``) while a preview or a write's
read-check-write holds the files in a worker thread; the loop takes no lock such a holder
keeps across file I/O."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

from goagent_py.coding.files import FileToolkit
from goagent_py.messages import ToolCall


async def test_taking_a_place_does_not_wait_for_a_slow_preview(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("one\n")
    toolkit = FileToolkit(tmp_path)
    first = ToolCall(id="c1", name="write_file", arguments={"path": "a.txt", "content": "two\n"})
    later = ToolCall(id="c2", name="edit_file", arguments={"path": "a.txt", "old": "two",
                                                            "new": "three"})  # fmt: skip
    order: list[str] = []
    reading, go_on = threading.Event(), threading.Event()

    def slow_read(root: object) -> tuple[str | None, str]:
        reading.set()
        # The loop's turn comes while this holds the files; the wait ends it only when the
        # loop is held (the test then fails on the order, not by hanging).
        go_on.wait(timeout=60)
        order.append("preview read")
        return "one\n", ""

    holder = threading.Thread(target=toolkit.planned, args=(first, slow_read))
    holder.start()
    try:
        assert await asyncio.to_thread(reading.wait, 60)
        release = toolkit.reserve(later)  # on the event loop, as the loop calls it
        order.append("place taken")
        assert release is not None
        release()
        order.append("place given up")
    finally:
        go_on.set()
        await asyncio.to_thread(holder.join)
    assert order == ["place taken", "place given up", "preview read"]
