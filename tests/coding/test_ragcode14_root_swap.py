"""A workspace root swapped within one call: every open stays in the folder the tools were made in.

``WorkspaceRoot.check`` refuses a call whose root was moved or replaced before it starts; these
tests swap the root right after that check passes, inside the call (the root folder renamed and
a symlink to an outside folder put under its name), with real folders and a real symlink. The
tools open everything relative to the root's descriptor held since start-up, so no byte of the
outside folder is read, listed or written, and no program runs in it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import CodingToolError, file_tools, shell_tool
from goagent_py.coding._tool import CodingTool


@pytest.fixture
def places(tmp_path: Path) -> tuple[Path, Path]:
    root, outside = tmp_path / "project", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (root / "notes.txt").write_text("inside\n")
    (outside / "notes.txt").write_text("OUTSIDE SECRET\n")
    (outside / "only_outside.txt").write_text("OUTSIDE SECRET\n")
    return root, outside


def _swap_after_check(tool: CodingTool, root: Path, outside: Path, *, last: int = 1) -> list[bool]:
    """Make ``tool``'s root check swap the root for a link to ``outside`` once it has passed
    for the ``last`` time in the call (the shell tool checks twice: before its body, and in
    the arguments' check the body runs)."""
    assert tool.root is not None
    workspace = tool.root
    original = workspace.check
    swapped: list[bool] = []
    checks: list[None] = []

    def check_then_swap() -> None:
        original()
        checks.append(None)
        if len(checks) == last:
            root.rename(root.with_name("project-moved"))
            root.symlink_to(outside, target_is_directory=True)
            swapped.append(True)

    workspace.check = check_then_swap  # type: ignore[method-assign]
    return swapped


def _tool(tools: list[CodingTool], name: str) -> CodingTool:
    return next(t for t in tools if t.definition.name == name)


async def _run(tool: CodingTool, args: dict[str, Any]) -> str:
    try:
        blocks = await tool.execute(args)
    except CodingToolError as exc:
        return f"refused: {exc}"
    return "".join(getattr(b, "text", "") for b in blocks)


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("read_file", {"path": "notes.txt"}),
        ("list_dir", {"path": "."}),
        ("glob", {"pattern": "*.txt"}),
        ("grep", {"pattern": "SECRET"}),
    ],
)
def test_a_root_swapped_within_a_read_call_shows_nothing_from_outside(
    places: tuple[Path, Path], name: str, args: dict[str, Any]
) -> None:
    root, outside = places
    tools = file_tools(root)
    tool = _tool(tools, name)
    swapped = _swap_after_check(tool, root, outside)
    answer = asyncio.run(_run(tool, args))
    assert swapped
    assert "SECRET" not in answer
    assert "only_outside" not in answer


def test_a_root_swapped_within_a_write_call_writes_nothing_outside(
    places: tuple[Path, Path],
) -> None:
    root, outside = places
    tools = file_tools(root, require_read=False)
    tool = _tool(tools, "write_file")
    swapped = _swap_after_check(tool, root, outside)
    asyncio.run(_run(tool, {"path": "made/new.txt", "content": "written"}))
    assert swapped
    assert sorted(p.name for p in outside.iterdir()) == ["notes.txt", "only_outside.txt"]
    assert (outside / "notes.txt").read_text() == "OUTSIDE SECRET\n"


def test_a_root_swapped_within_an_edit_call_leaves_the_outside_file_alone(
    places: tuple[Path, Path],
) -> None:
    root, outside = places
    tools = file_tools(root, require_read=False)
    tool = _tool(tools, "edit_file")
    swapped = _swap_after_check(tool, root, outside)
    args = {"path": "notes.txt", "old_string": "SECRET", "new_string": "changed"}
    asyncio.run(_run(tool, args))
    assert swapped
    assert (outside / "notes.txt").read_text() == "OUTSIDE SECRET\n"


def test_a_root_swapped_within_a_shell_call_runs_nothing_in_the_outside_folder(
    places: tuple[Path, Path],
) -> None:
    root, outside = places
    tool = shell_tool(root)
    swapped = _swap_after_check(tool, root, outside, last=2)
    answer = asyncio.run(_run(tool, {"argv": ["cat", "notes.txt"]}))
    assert swapped
    assert "SECRET" not in answer
    assert "inside" in answer  # it ran in the folder the tool was made in
