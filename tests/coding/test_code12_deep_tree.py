"""A hostile repository nests folders thousands deep (code12).

A walk held one open descriptor per level: a chain deeper than the process's descriptor limit
ended grep and glob with ``OSError: Too many open files`` (and, while they ran, starved every
other open of the process: the session store, the shell's pipes).
"""

from __future__ import annotations

import os
import resource
import sys
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import file_tools
from goagent_py.coding.files import MAX_WALK_DEPTH

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX descriptors")


def _chain(root: Path, depth: int) -> None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(depth):
            os.mkdir("d", dir_fd=fd)
            below = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        made = os.open("deep.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
        os.write(made, b"KEY\n")
        os.close(made)
    finally:
        os.close(fd)


async def _text(tool: Any, **args: Any) -> str:
    blocks = await tool.execute(args)
    return "".join(getattr(b, "text", "") for b in blocks)


async def test_a_chain_deeper_than_the_descriptor_limit_is_walked_within_bounds(
    tmp_path: Path,
) -> None:
    (tmp_path / "top.txt").write_text("KEY\n")
    _chain(tmp_path, 600)
    tools = {t.definition.name: t for t in file_tools(tmp_path)}
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(400, hard), hard))
    try:
        globbed = await _text(tools["glob"], pattern="**/*.txt")
        grepped = await _text(tools["grep"], pattern="KEY")
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    note = f"[note: folders nested deeper than {MAX_WALK_DEPTH} levels were not searched"
    assert globbed.splitlines()[0] == "top.txt"
    assert note in globbed
    assert grepped.splitlines()[0] == "top.txt:1:KEY"
    assert note in grepped
    assert "deep.txt" not in globbed + grepped


async def test_a_file_just_within_the_depth_is_found(tmp_path: Path) -> None:
    _chain(tmp_path, MAX_WALK_DEPTH)
    tools = {t.definition.name: t for t in file_tools(tmp_path)}
    globbed = await _text(tools["glob"], pattern="**/deep.txt")
    assert globbed.endswith("/deep.txt")
    assert "note" not in globbed


async def test_a_path_too_many_folders_deep_is_refused_before_anything_is_made(
    tmp_path: Path,
) -> None:
    from goagent_py._paths import MAX_PATH_DEPTH
    from goagent_py.coding._tool import CodingToolError

    tools = {t.definition.name: t for t in file_tools(tmp_path)}
    deep = "d/" * (MAX_PATH_DEPTH + 1) + "x.txt"
    with pytest.raises(CodingToolError, match=f"more than {MAX_PATH_DEPTH} folders deep"):
        await _text(tools["write_file"], path=deep, content="x")
    assert os.listdir(tmp_path) == []  # no folder made on the way
    _chain(tmp_path, MAX_PATH_DEPTH + 1)
    with pytest.raises(CodingToolError, match="folders deep"):
        await _text(tools["read_file"], path="d/" * (MAX_PATH_DEPTH + 1) + "deep.txt")
