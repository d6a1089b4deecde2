"""Edits and writes racing a change on disk: the file checked is the file written, and a change
made by another program between the read and the write is never overwritten (code11)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import goagent_py.coding._edit as edit_module
from goagent_py.coding import CodingToolError, file_tools
from goagent_py.tools import Tool

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX dir fds")


def _tools(root: Path) -> dict[str, Tool]:
    return {t.definition.name: t for t in file_tools(root)}


async def _run(tool: Tool, **args: Any) -> str:
    blocks = await tool.execute(args)
    return "".join(getattr(b, "text", "") for b in blocks)


async def test_an_edit_never_overwrites_a_change_made_while_it_ran(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "app.py"
    target.write_text("x = 1\ny = 2\n")
    t = _tools(tmp_path)
    await _run(t["read_file"], path="app.py")
    real = edit_module.occurrences

    def formatter_runs_meanwhile(text: str, old: str, **kw: Any) -> int:
        # Another program (a formatter the model started in the same turn) rewrites the file
        # after the edit read it and before it writes.
        target.write_text("x = 1\ny = 2\nz = 3  # the formatter's\n")
        return real(text, old, **kw)

    monkeypatch.setattr(edit_module, "occurrences", formatter_runs_meanwhile)
    with pytest.raises(CodingToolError, match="changed on disk while it was being changed"):
        await _run(t["edit_file"], path="app.py", old_string="x = 1", new_string="x = 10")
    assert target.read_text() == "x = 1\ny = 2\nz = 3  # the formatter's\n"


async def test_write_file_makes_a_new_file_and_its_folders(tmp_path: Path) -> None:
    t = _tools(tmp_path)
    out = await _run(t["write_file"], path="a/b/new.txt", content="one\ntwo")
    assert out == "wrote a/b/new.txt (7 bytes, 2 lines)"
    assert (tmp_path / "a" / "b" / "new.txt").read_text() == "one\ntwo"
    # Replacing it needs no read (this toolkit wrote it) and keeps one file.
    await _run(t["write_file"], path="a/b/new.txt", content="three")
    assert (tmp_path / "a" / "b" / "new.txt").read_text() == "three"


async def test_write_file_too_large_makes_nothing(tmp_path: Path) -> None:
    t = {x.definition.name: x for x in file_tools(tmp_path, max_file_bytes=10)}
    with pytest.raises(CodingToolError, match="more than the 10 bytes allowed"):
        await _run(t["write_file"], path="big.txt", content="x" * 11)
    assert not (tmp_path / "big.txt").exists()


async def test_an_edit_of_a_file_replaced_meanwhile_says_the_change_is_not_in_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "app.py"
    target.write_text("x = 1\n")
    t = _tools(tmp_path)
    await _run(t["read_file"], path="app.py")
    real = edit_module.occurrences

    def editor_saves_meanwhile(text: str, old: str, **kw: Any) -> int:
        # The user's editor saves as editors do: a new file renamed over the old name.
        (tmp_path / ".app.py.swp").write_text("x = 1\n# the user's\n")
        (tmp_path / ".app.py.swp").replace(target)
        return real(text, old, **kw)

    monkeypatch.setattr(edit_module, "occurrences", editor_saves_meanwhile)
    # was: "edited app.py", the edit written to the replaced (unlinked) file: lost, unsaid
    with pytest.raises(CodingToolError, match="replaced while it was being changed"):
        await _run(t["edit_file"], path="app.py", old_string="x = 1", new_string="x = 10")
    assert target.read_text() == "x = 1\n# the user's\n"
