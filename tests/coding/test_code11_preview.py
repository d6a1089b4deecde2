"""The approval preview shows the edit the tool will make: the same matching (line endings,
overlapping matches) as edit_file itself (code11)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import CodingToolError, file_tools
from goagent_py.coding._preview import approval_lines
from goagent_py.coding.approvals import ApprovalRequest
from goagent_py.messages import ToolCall

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX dir fds")


def _request(**arguments: Any) -> ApprovalRequest:
    return ApprovalRequest(ToolCall("c1", "edit_file", arguments), arguments["path"], True)


async def _edit(root: Path, **args: Any) -> str:
    t = {x.definition.name: x for x in file_tools(root)}
    await t["read_file"].execute({"path": args["path"]})
    blocks = await t["edit_file"].execute(args)
    return "".join(getattr(b, "text", "") for b in blocks)


async def test_a_crlf_edit_is_previewed_as_the_change_it_makes(tmp_path: Path) -> None:
    (tmp_path / "w.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    args = {"path": "w.txt", "old_string": "one\ntwo", "new_string": "one\n2"}
    lines = approval_lines(_request(**args), tmp_path)
    # was: "(old_string is not in w.txt: the edit will fail)", and then the edit was made
    assert "-two" in lines, lines
    assert "+2" in lines, lines
    assert await _edit(tmp_path, **args) == "edited w.txt: 1 replacement(s)"
    assert (tmp_path / "w.txt").read_bytes() == b"one\r\n2\r\nthree\r\n"


async def test_an_ambiguous_edit_is_previewed_as_failing(tmp_path: Path) -> None:
    (tmp_path / "g.txt").write_text("a\n\n\nb\n")
    args = {"path": "g.txt", "old_string": "\n\n", "new_string": "\n"}
    lines = approval_lines(_request(**args), tmp_path)
    # was: a diff (str.count saw one match), and then the edit refused as ambiguous
    assert any("will fail" in line and "2 times" in line for line in lines), lines
    with pytest.raises(CodingToolError, match="appears 2 times"):
        await _edit(tmp_path, **args)


def test_a_large_rewrite_is_previewed_without_quadratic_matching(tmp_path: Path) -> None:
    import random

    rng = random.Random(1)
    old = [str(rng.random()) for _ in range(2000)]
    new = [str(rng.random()) if i % 2 else line for i, line in enumerate(old)]
    (tmp_path / "big.txt").write_text("\n".join(old) + "\n")
    args = {"path": "big.txt", "content": "\n".join(new) + "\n"}
    request = ApprovalRequest(ToolCall("c1", "write_file", args), "big.txt", True)
    lines = approval_lines(request, tmp_path)
    # was: difflib's quadratic matching over every line (93 s for 20,000 lines)
    assert lines[0] == "(a large change: 1999 line(s) replaced by 1999; the first of each shown)"
    assert f"-{old[1]}" in lines
    assert f"+{new[1]}" in lines
    assert any(line.startswith("[... ") and "more + line(s)" in line for line in lines), lines
