"""The sandbox hides what its paths name when each command starts, not at start-up (code12).

The hidden paths were resolved, and the missing ones dropped, when the tool was made: a folder
made later, a link pointed elsewhere later, or a hidden folder whose parent a command renamed
escaped the rule; a root moved away left a command bound to whatever took its name.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import shell_tool
from goagent_py.coding._sandbox import sandbox_available

SANDBOX, WHY_NOT = sandbox_available()
pytestmark = [
    pytest.mark.skipif(not SANDBOX, reason=f"no shell sandbox here: {WHY_NOT}"),
    pytest.mark.slow,
]
PY = os.path.realpath(sys.executable)


@pytest.fixture
def tmp_path() -> Any:
    """A folder outside /tmp (the sandbox gives a command a private, empty /tmp: what lies in
    the real one cannot tell a hidden path from a visible one)."""
    folder = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="goagent-code12-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def _run(tool: Any, **args: Any) -> str:
    blocks = await tool.execute(args)
    return "".join(getattr(b, "text", "") for b in blocks)


async def test_a_hidden_folder_made_after_start_is_hidden(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    later_out, later_in = tmp_path / "later", root / "private"
    sh = shell_tool(root, sandbox=True, hide=[later_out, later_in])
    for folder in (later_out, later_in):
        folder.mkdir()
        (folder / "key.txt").write_text("TOP-SECRET")
    out = await _run(sh, argv=["cat", str(later_out / "key.txt"), str(later_in / "key.txt")])
    assert "TOP-SECRET" not in out


async def test_a_hidden_link_pointed_elsewhere_hides_its_new_target(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    (tmp_path / "new" / "key.txt").write_text("TOP-SECRET")
    link = tmp_path / "creds"
    link.symlink_to(tmp_path / "old")
    sh = shell_tool(root, sandbox=True, hide=[link])
    link.unlink()
    link.symlink_to(tmp_path / "new")
    out = await _run(sh, argv=["cat", str(link / "key.txt"), str(tmp_path / "new" / "key.txt")])
    assert "TOP-SECRET" not in out


async def test_a_command_cannot_move_a_hidden_folder_out_from_under_the_rule(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    (root / "a" / "private").mkdir(parents=True)
    (root / "a" / "private" / "key.txt").write_text("TOP-SECRET")
    sh = shell_tool(root, sandbox=True, hide=[root / "a" / "private"], allow_shell=True)
    out = await _run(sh, command="mv a b; mv a/private c; cat b/private/key.txt c/key.txt")
    assert "TOP-SECRET" not in out
    assert (root / "a" / "private" / "key.txt").exists()  # nothing was moved
    out = await _run(sh, command="cat a/private/key.txt b/private/key.txt")
    assert "TOP-SECRET" not in out


async def test_a_root_moved_away_runs_nothing_and_says_why(tmp_path: Path) -> None:
    from goagent_py.coding._tool import CodingToolError

    root = tmp_path / "ws"
    root.mkdir()
    sh = shell_tool(root, sandbox=True)
    root.rename(tmp_path / "ws-old")
    victim = tmp_path / "elsewhere"
    victim.mkdir()
    root.symlink_to(victim)  # what now has the root's name: another folder
    with pytest.raises(CodingToolError, match="moved or replaced"):
        await _run(sh, argv=["touch", "pwned"])
    assert not (victim / "pwned").exists()


async def test_the_tools_refuse_a_root_moved_away_sandbox_or_not(tmp_path: Path) -> None:
    from goagent_py.coding import file_tools
    from goagent_py.coding._tool import CodingToolError

    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("mine\n")
    tools = {t.definition.name: t for t in [*file_tools(root), shell_tool(root)]}
    victim = tmp_path / "elsewhere"
    victim.mkdir()
    (victim / "a.txt").write_text("not the workspace's\n")
    root.rename(tmp_path / "ws-old")
    root.symlink_to(victim)
    for name, args in [
        ("read_file", {"path": "a.txt"}),
        ("write_file", {"path": "b.txt", "content": "x"}),
        ("list_dir", {}),
        ("shell", {"argv": ["touch", "pwned"]}),
    ]:
        with pytest.raises(CodingToolError, match="moved or replaced"):
            await _run(tools[name], **args)
    assert sorted(p.name for p in victim.iterdir()) == ["a.txt"]


async def test_a_sandboxed_command_starts_only_in_the_folder_the_tool_opened(
    tmp_path: Path,
) -> None:
    # bubblewrap enters the working folder by name, after the tool opened and checked it: a
    # command running beside it could swap the folder for a link meanwhile. The command starts
    # only when the folder it is in is the one the tool opened (here: told another one).
    import asyncio

    from goagent_py.coding._sandbox import Sandbox

    root = tmp_path / "ws"
    (root / "scratch").mkdir(parents=True)
    (root / "src").mkdir()
    (root / "src" / "keep.py").write_text("x")
    other = os.stat(root / "src")
    argv = Sandbox(root).wrap(
        ["sh", "-c", "rm -f ./*; echo ran"], root / "scratch", folder=(other.st_dev, other.st_ino)
    )
    proc = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    assert proc.returncode == 126
    assert b"ran" not in out
    assert b"not the folder" in out
    same = os.stat(root / "scratch")
    sh = shell_tool(root, sandbox=True)
    assert await _run(sh, argv=["pwd"], cwd="scratch") == f"{root / 'scratch'}\nexit code: 0"
    assert same.st_ino == os.stat(root / "scratch").st_ino
    assert (root / "src" / "keep.py").exists()
