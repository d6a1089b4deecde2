"""goagent_py.coding.files under a directory-swap race: walks and parent creation stay inside.

A separate process swaps ``root/sub`` (a real folder) with ``root/.alt`` (a symlink to a folder
outside the root) atomically (``renameat2(RENAME_EXCHANGE)``), as fast as it can, while each
walking tool runs 1,000 rounds through ``sub/inner``. No outside name or byte may come back and
nothing may be made outside. (With the walks on ``os.fwalk``/``os.scandir``/``os.makedirs`` of a
path checked once with ``realpath``, grep returned outside contents, glob and list_dir outside
names, and write_file made directories outside.)
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import CodingToolError, file_tools
from goagent_py.tools import Tool

ROUNDS = 1000

# The swapper: exchange root/sub and root/.alt until stdin closes; print the number of swaps.
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
if swaps % 2:  # leave the real folder at root/sub
    libc.renameat2(AT_FDCWD, a, AT_FDCWD, b, RENAME_EXCHANGE)
print(swaps, flush=True)
"""


def _has_rename_exchange() -> bool:
    if not sys.platform.startswith("linux"):
        return False
    name = ctypes.util.find_library("c")
    return name is not None and hasattr(ctypes.CDLL(name), "renameat2")


pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not _has_rename_exchange(), reason="needs Linux renameat2"),
]


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "root"
    outside = tmp_path / "outside"
    (root / "sub" / "inner" / "deeper").mkdir(parents=True)
    (root / "sub" / "inner" / "inside.txt").write_text("inside-bytes\n")
    (root / "sub" / "inner" / "deeper" / "more.txt").write_text("inside-bytes too\n")
    (outside / "inner" / "deeper").mkdir(parents=True)
    (outside / "inner" / "OUTSIDE_NAME.txt").write_text("OUTSIDE-BYTES\n")
    (outside / "inner" / "deeper" / "OUTSIDE_DEEP.txt").write_text("OUTSIDE-BYTES deep\n")
    (root / ".alt").symlink_to(outside)
    return root, outside


def _listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


async def _text(tool: Tool, **args: Any) -> str:
    blocks = await tool.execute(args)
    return "".join(getattr(b, "text", "") for b in blocks)


def test_a_folder_swapped_for_an_outside_link_never_leaks_through_a_walk(
    tmp_path: Path,
) -> None:
    root, outside = _tree(tmp_path)
    before_outside = _listing(outside)
    t = {x.definition.name: x for x in file_tools(root, require_read=False)}
    calls: dict[str, Any] = {
        "grep": lambda i: {"pattern": ".", "path": "sub/inner"},
        "glob": lambda i: {"pattern": "**", "path": "sub/inner"},
        "list_dir": lambda i: {"path": "sub/inner"},
        "write_file": lambda i: {"path": f"sub/inner/d{i}/x.txt", "content": "inside"},
    }
    seen = {n: {"inside": 0, "refused": 0, "other error": 0, "LEAK": 0} for n in calls}
    leaks: list[str] = []
    errors: list[str] = []

    async def rounds() -> None:
        for name, args in calls.items():
            for i in range(ROUNDS):
                try:
                    out = await _text(t[name], **args(i))
                except CodingToolError:
                    seen[name]["refused"] += 1
                    continue
                except Exception as exc:  # counted: none may happen
                    seen[name]["other error"] += 1
                    errors.append(f"{name}: {exc!r}")
                    continue
                if "OUTSIDE" in out:
                    seen[name]["LEAK"] += 1
                    leaks.append(f"{name}: {out[:200]}")
                elif "inside" in out or "wrote" in out:
                    seen[name]["inside"] += 1

    swapper = subprocess.Popen(
        [sys.executable, "-c", SWAPPER, str(root / "sub"), str(root / ".alt")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert swapper.stdin is not None
    assert swapper.stdout is not None
    try:
        assert swapper.stdout.readline().strip() == "ready"
        started = time.perf_counter()
        asyncio.run(rounds())
        took = time.perf_counter() - started
    finally:
        swapper.stdin.close()  # the swapper stops and says how many swaps it made
        swaps = int(swapper.stdout.readline() or 0)
        swapper.stdout.close()
        swapper.wait()
    print(f"\n{ROUNDS} rounds x {len(calls)} tools in {took:.2f} s, {swaps} swaps: {seen}")
    made_outside = sorted(set(_listing(outside)) - set(before_outside))
    print(f"made outside: {made_outside[:5]} ({len(made_outside)})")
    assert leaks == [], leaks[:5]
    assert made_outside == [], "something was made outside the root"
    assert errors == [], errors[:5]  # refusals are CodingToolErrors the model reads
    assert swaps > ROUNDS  # the race really ran
    assert sum(c["inside"] for c in seen.values()) > 0, seen  # the tools worked meanwhile
    assert all(c["inside"] + c["refused"] == ROUNDS for c in seen.values()), seen
