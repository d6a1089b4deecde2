"""grep and glob walks: bounded in files and time, stopped when their call is cancelled, and
grep's path opened once (code11)."""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import CodingToolError, FileToolkit
from goagent_py.tools import Tool

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX dir fds")


def _tools(kit: FileToolkit) -> dict[str, Tool]:
    return {t.definition.name: t for t in kit.tools}


async def _run(tool: Tool, **args: Any) -> str:
    blocks = await tool.execute(args)
    return "".join(getattr(b, "text", "") for b in blocks)


def _many(root: Path, n: int) -> None:
    for i in range(n):
        d = root / f"d{i // 50:03}"
        d.mkdir(exist_ok=True)
        (d / f"f{i:04}.txt").write_text("needle\n")


async def test_a_cancelled_grep_stops_walking(tmp_path: Path) -> None:
    _many(tmp_path, 2000)
    kit = FileToolkit(tmp_path)
    visited: list[str] = []
    entered = threading.Event()
    go = threading.Event()

    def rule(tool: str, path: str) -> bool:  # asked for every file the walk finds
        visited.append(path)
        entered.set()
        go.wait(60)
        return False

    kit.add_path_rule(rule)
    finished = threading.Event()
    body = kit._grep_sync

    def watched(*args: Any) -> str:
        try:
            return body(*args)
        finally:
            finished.set()

    kit._grep_sync = watched  # type: ignore[method-assign]
    task = asyncio.create_task(_run(_tools(kit)["grep"], pattern="absent"))
    assert await asyncio.to_thread(entered.wait, 60)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    at_cancel = len(visited)
    go.set()
    assert await asyncio.to_thread(finished.wait, 60)
    # The worker thread ended at once, not after walking the other ~2000 files unseen.
    assert len(visited) - at_cancel <= 1


async def test_a_walk_stops_after_max_walk_files_and_says_so(tmp_path: Path) -> None:
    _many(tmp_path, 120)
    t = _tools(FileToolkit(tmp_path, max_walk_files=30))
    out = await _run(t["grep"], pattern="needle")
    assert out.count("needle") == 30
    assert "[note: the search stopped after 30 files" in out
    assert "narrow it with path or glob" in out
    out = await _run(t["glob"], pattern="**/*.txt")
    assert len([line for line in out.splitlines() if line.endswith(".txt")]) == 30
    assert "[note: the search stopped after 30 files" in out
    # Under the bound: no note.
    out = await _run(t["grep"], pattern="needle", path="d002")
    assert out.count("needle") == 20
    assert "note" not in out


async def test_a_walk_stops_after_walk_timeout_and_says_so(tmp_path: Path) -> None:
    _many(tmp_path, 120)
    kit = FileToolkit(tmp_path, walk_timeout=0.05)
    started = time.monotonic()

    def slow_first(tool: str, path: str) -> bool:
        # The first file takes past the walk's time (a condition on the clock, not a sleep).
        while time.monotonic() - started < 0.2:
            pass
        return False

    kit.add_path_rule(slow_first)
    out = await _run(_tools(kit)["grep"], pattern="needle")
    assert "[note: the search stopped after 0.05 seconds" in out
    assert out.count("needle") < 120


def test_walk_limits_are_checked() -> None:
    from goagent_py.errors import ConfigurationError

    for bad in ({"max_walk_files": 0}, {"walk_timeout": 0}, {"walk_timeout": True}):
        with pytest.raises(ConfigurationError):
            FileToolkit(".", **bad)  # type: ignore[arg-type]


async def test_grep_of_a_fifo_is_refused_not_walked(tmp_path: Path) -> None:
    import os

    os.mkfifo(tmp_path / "pipe")
    t = _tools(FileToolkit(tmp_path))
    with pytest.raises(CodingToolError, match="not a regular file"):
        await _run(t["grep"], pattern="x", path="pipe")


SWAPPER = r"""
import ctypes, ctypes.util, os, sys, threading
libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
a, b = (os.fsencode(p) for p in sys.argv[1:3])
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
print("ready", flush=True)
swaps = 0
while not stop.is_set():
    if libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE) != 0:
        raise OSError(ctypes.get_errno(), "renameat2")
    swaps += 1
print(swaps, flush=True)
"""


def _has_rename_exchange() -> bool:
    import ctypes
    import ctypes.util

    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    return name is not None and hasattr(ctypes.CDLL(name), "renameat2")


@pytest.mark.slow
@pytest.mark.skipif(not _has_rename_exchange(), reason="needs Linux renameat2")
def test_grep_on_a_path_swapped_between_a_file_and_a_folder_answers_for_what_it_opened(
    tmp_path: Path,
) -> None:
    import subprocess

    # root/target and root/.alt are exchanged as fast as a process can: at every moment the
    # path is a file or a folder, each holding the needle. Deciding which by the name and then
    # opening it again answered "not a directory" or "is a directory" when a swap fell between.
    (tmp_path / "target").write_text("needle in the file\n")
    (tmp_path / ".alt").mkdir()
    (tmp_path / ".alt" / "n.txt").write_text("needle in the folder\n")
    grep = _tools(FileToolkit(tmp_path))["grep"]
    errors: list[str] = []
    answers = {"file": 0, "folder": 0}

    async def rounds() -> None:
        for _ in range(1500):
            try:
                out = await _run(grep, pattern="needle", path="target")
            except CodingToolError as exc:
                errors.append(str(exc))
                continue
            answers["folder" if "in the folder" in out else "file"] += 1

    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(tmp_path / "target"), str(tmp_path / ".alt")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert swapper.stdin is not None
    assert swapper.stdout is not None
    try:
        assert swapper.stdout.readline().strip() == "ready"
        asyncio.run(rounds())
    finally:
        swapper.stdin.close()
        swapper.stdout.readline()
        swapper.stdout.close()
        swapper.wait()
    assert errors == [], (len(errors), errors[:3], answers)


async def test_list_dir_of_a_huge_folder_is_bounded_and_says_so(tmp_path: Path) -> None:
    for i in range(100):
        (tmp_path / f"e{i:03}").touch()
    t = _tools(FileToolkit(tmp_path, max_walk_files=30))
    out = await _run(t["list_dir"], path=".")
    assert len([line for line in out.splitlines() if line.startswith("e")]) == 30
    assert "[note: the listing stopped after 30 entries" in out
