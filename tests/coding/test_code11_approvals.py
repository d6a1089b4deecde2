"""An approval names the file the call then writes: the path is resolved once per call (code11).

Before, the write queue's place (taken as the call starts) and the question (asked after) each
resolved the path: a link swapped between them made the question name one file while the
write reached the other."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

import goagent_py.coding.files as files_module
from goagent_py import Agent
from goagent_py.coding import ApprovalPolicy, ApprovalRequest, file_tools
from goagent_py.testing import ScriptedProvider, tool_call_response

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks")


async def test_the_file_asked_about_is_the_file_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "a.txt").write_text("A\n")
    (tmp_path / "b.txt").write_text("B\n")
    link = tmp_path / "link"
    link.symlink_to("a.txt")

    def point(to: str) -> None:
        link.unlink()
        link.symlink_to(to)

    real = files_module.resolve_in_root
    swaps = iter(["b.txt"])

    def resolve_then_swap(root: Any, path: Any) -> Path:
        resolved = real(root, path)
        if path == "link":  # the attacker's process swaps the link right after a check
            to = next(swaps, None)
            if to is not None:
                point(to)
        return resolved

    monkeypatch.setattr(files_module, "resolve_in_root", resolve_then_swap)
    asked: list[str] = []

    def ask(request: ApprovalRequest) -> str:
        asked.append(request.subject)
        point("a.txt")  # and back, before the write
        return "allow"

    tools = file_tools(tmp_path, require_read=False)
    policy = ApprovalPolicy(tools, ask=ask)
    call = ("write_file", {"path": "link", "content": "NEW\n"})
    provider = ScriptedProvider(tool_call_response(call), "done")
    await Agent(provider=provider, tools=tools, before_tool_call=policy).run("write it")
    assert len(asked) == 1
    written = [n for n in ("a.txt", "b.txt") if (tmp_path / n).read_text() == "NEW\n"]
    # Nothing written, or exactly the file the user was asked about.
    assert written in ([], asked)
