"""Review 8: an "always" answer covers what the user was shown, nothing more."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import ApprovalPolicy, ApprovalRequest, file_tools, shell_tool
from goagent_py.messages import ToolCall

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(f"c-{name}-{len(args)}-{id(args)}", name, args)


def _policy(root: Path, asked: list[str]) -> ApprovalPolicy:
    def ask(request: ApprovalRequest) -> str:
        asked.append(f"{request.call.name} {request.subject}")
        return "always" if len(asked) == 1 else "deny"

    return ApprovalPolicy([*file_tools(root), shell_tool(root)], ask=ask)


async def test_always_on_a_file_edit_does_not_approve_another_file(tmp_path: Path) -> None:
    asked: list[str] = []
    policy = _policy(tmp_path, asked)
    edit = {"old_string": "a", "new_string": "b"}
    assert await policy(call("edit_file", path="a.py", **edit)) is None
    # The same file, however spelled: not asked again.
    assert await policy(call("edit_file", path="./a.py", **edit)) is None
    assert await policy(call("edit_file", path=".//a.py", **edit)) is None
    # Another file (the user never saw it): asked, and denied here.
    reason = await policy(call("edit_file", path=".git/hooks/pre-commit", **edit))
    assert reason == "the user denied edit_file on .git/hooks/pre-commit"
    assert asked == ["edit_file a.py", "edit_file .git/hooks/pre-commit"]


async def test_always_on_a_file_write_is_not_carried_by_a_symlink_swap(tmp_path: Path) -> None:
    asked: list[str] = []
    policy = _policy(tmp_path, asked)
    (tmp_path / "notes.txt").write_text("x")
    assert await policy(call("write_file", path="notes.txt", content="y")) is None
    # notes.txt now a link to another file of the root: the write reaches that file.
    (tmp_path / "notes.txt").unlink()
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "notes.txt").symlink_to("setup.py")
    reason = await policy(call("write_file", path="notes.txt", content="z"))
    assert reason is not None
    assert asked == ["write_file notes.txt", "write_file setup.py"]


async def test_always_on_a_command_does_not_approve_it_in_another_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "scratch").mkdir()
    asked: list[str] = []
    policy = _policy(tmp_path, asked)
    rm = ["rm", "-rf", "build"]
    assert await policy(call("shell", argv=rm, cwd="scratch")) is None
    assert await policy(call("shell", argv=rm, cwd="./scratch/")) is None  # the same folder
    # The same argv in the root removes another folder: asked (and denied here).
    assert await policy(call("shell", argv=rm)) is not None
    assert len(asked) == 2


async def test_always_on_a_command_follows_the_folder_not_its_link_name(tmp_path: Path) -> None:
    (tmp_path / "scratch").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "here").symlink_to("scratch")
    asked: list[str] = []
    policy = _policy(tmp_path, asked)
    rm = ["rm", "-rf", "build"]
    assert await policy(call("shell", argv=rm, cwd="here")) is None
    (tmp_path / "here").unlink()
    (tmp_path / "here").symlink_to("src")
    assert await policy(call("shell", argv=rm, cwd="here")) is not None
    assert len(asked) == 2
