"""goagent_py.coding.files: the workspace file tools, held in the root, stale-aware, queued."""

from __future__ import annotations

import asyncio
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import CodingToolError, FileToolkit, file_tools, is_mutating
from goagent_py.coding._tool import PathQueue
from goagent_py.errors import ConfigurationError, ToolArgumentsError
from goagent_py.tools import Tool

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks and dir fds")


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """tmp/root (src/app.py, notes.txt, links in and out) beside tmp/root_evil and tmp/outside."""
    root = tmp_path / "root"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("x = 1\ny = 2\n")
    (root / "notes.txt").write_text("alpha\nbeta\nalpha\n")
    (tmp_path / "root_evil").mkdir()
    (tmp_path / "root_evil" / "x.txt").write_text("SECRET evil")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "b.txt").write_text("SECRET outside")
    (root / "out_link").symlink_to(tmp_path / "outside" / "b.txt")
    (root / "out_dir").symlink_to("../outside")
    (root / "in_link").symlink_to("src/app.py")
    return root


def tools(root: Path, **kw: Any) -> dict[str, Tool]:
    return {t.definition.name: t for t in file_tools(root, **kw)}


async def run(tool: Tool, **args: Any) -> str:
    blocks = await tool.execute(args)
    return "".join(getattr(b, "text", "") for b in blocks)


ESCAPES = {
    "dotdot": "../outside/b.txt",
    "dotdot_inside": "src/../../outside/b.txt",
    "backslash": "src\\..\\..\\outside\\b.txt",
    "absolute": "/etc/passwd",
    "drive": "C:\\x.txt",
    "nul": "notes.txt\x00.png",
    "sibling_prefix": "../root_evil/x.txt",
    "symlink_file_out": "out_link",
    "symlink_dir_out": "out_dir/b.txt",
}


@pytest.mark.parametrize("name", ESCAPES)
async def test_every_tool_refuses_each_escape(tree: Path, name: str) -> None:
    t = tools(tree, require_read=False)
    path = ESCAPES[name]
    calls = [
        ("read_file", {"path": path}),
        ("write_file", {"path": path, "content": "PWNED"}),
        ("edit_file", {"path": path, "old_string": "SECRET", "new_string": "PWNED"}),
        ("grep", {"pattern": "SECRET", "path": path}),
    ]
    for tool_name, args in calls:
        with pytest.raises(CodingToolError, match="refused"):
            await run(t[tool_name], **args)
    for tool_name in ("list_dir", "glob"):
        args = {"path": path} if tool_name == "list_dir" else {"pattern": "*", "path": path}
        if name in ("symlink_file_out",):
            continue  # a file, not a directory: refused as outside below
        with pytest.raises(CodingToolError):
            await run(t[tool_name], **args)
    assert (tree.parent / "outside" / "b.txt").read_text() == "SECRET outside"
    assert not (tree.parent / "outside" / "PWNED").exists()


async def test_walks_never_follow_links_out(tree: Path) -> None:
    t = tools(tree)
    assert "SECRET" not in await run(t["grep"], pattern="SECRET")
    listed = await run(t["glob"], pattern="**/*")
    assert sorted(listed.splitlines()) == ["notes.txt", "src/app.py"]
    assert "out_dir" in await run(t["list_dir"])  # named, not entered


async def test_read_numbers_lines_and_honours_ranges_and_the_cap(tree: Path) -> None:
    (tree / "big.txt").write_text("".join(f"line {i}\n" for i in range(1, 1001)))
    t = tools(tree, max_read_chars=200)
    first = await run(t["read_file"], path="big.txt")
    assert first.startswith("     1\tline 1\n")
    assert "cut at 200 characters" in first
    assert "offset=" in first
    part = await run(t["read_file"], path="big.txt", offset=10, limit=2)
    assert part == "    10\tline 10\n    11\tline 11"
    assert "past the end" in await run(t["read_file"], path="big.txt", offset=5000)
    assert "x = 1" in await run(t["read_file"], path="in_link")  # a link inside is fine


async def test_edit_needs_a_unique_match_and_a_read_first(tree: Path) -> None:
    t = tools(tree)
    edit = t["edit_file"]
    with pytest.raises(CodingToolError, match="read the file before"):
        await run(edit, path="notes.txt", old_string="beta", new_string="BETA")
    await run(t["read_file"], path="notes.txt")
    with pytest.raises(CodingToolError, match="appears 2 times"):
        await run(edit, path="notes.txt", old_string="alpha", new_string="A")
    with pytest.raises(CodingToolError, match="not found"):
        await run(edit, path="notes.txt", old_string="gamma", new_string="G")
    assert "1 replacement" in await run(edit, path="notes.txt", old_string="beta", new_string="B")
    out = await run(edit, path="notes.txt", old_string="alpha", new_string="A", replace_all=True)
    assert "2 replacement" in out
    assert (tree / "notes.txt").read_text() == "A\nB\nA\n"


async def test_a_file_changed_behind_the_agents_back_is_stale(tree: Path) -> None:
    t = tools(tree)
    await run(t["read_file"], path="src/app.py")
    (tree / "src" / "app.py").write_text("x = 100\ny = 2\n")  # someone else edits it
    with pytest.raises(CodingToolError, match="stale"):
        await run(t["edit_file"], path="src/app.py", old_string="y = 2", new_string="y = 3")
    with pytest.raises(CodingToolError, match="stale"):
        await run(t["write_file"], path="src/app.py", content="gone")
    again = await run(t["read_file"], path="src/app.py")
    assert again.startswith("[note: this file changed since you last read it]")
    await run(t["edit_file"], path="src/app.py", old_string="y = 2", new_string="y = 3")
    assert "changed since" not in await run(t["read_file"], path="src/app.py")  # own edits
    assert (tree / "src" / "app.py").read_text() == "x = 100\ny = 3\n"


async def test_write_creates_files_and_directories_inside(tree: Path) -> None:
    t = tools(tree)
    assert "wrote pkg/new/mod.py" in await run(t["write_file"], path="pkg/new/mod.py", content="a")
    assert (tree / "pkg" / "new" / "mod.py").read_text() == "a"
    with pytest.raises(CodingToolError, match="read the file before"):
        await run(t["write_file"], path="notes.txt", content="clobber")


async def test_grep_output_is_ripgrep_like_and_capped(tree: Path) -> None:
    for i in range(30):
        (tree / "src" / f"m{i:02}.py").write_text("import os\nTODO = 1\n")
    (tree / "blob.bin").write_bytes(b"TODO\x00\x01")
    t = tools(tree, max_results=10)
    out = (await run(t["grep"], pattern="todo", ignore_case=True)).splitlines()
    assert out[0] == "src/m00.py:2:TODO = 1"
    assert len(out) == 12
    assert out[-2].startswith("[... ")
    assert "narrow the search" in out[-2]
    assert out[-1] == "[note: binary files match (lines not shown): blob.bin]"  # no bytes shown
    only = await run(t["grep"], pattern="x =", glob="*.py")
    assert only == "src/app.py:1:x = 1"
    assert await run(t["grep"], pattern="nothing-here") == "[no matches]"
    with pytest.raises(CodingToolError, match="invalid regular expression"):
        await run(t["grep"], pattern="(")


async def test_tools_say_whether_they_mutate_and_check_arguments(tree: Path) -> None:
    kinds = {t.definition.name: is_mutating(t) for t in file_tools(tree)}
    assert kinds == {
        "read_file": False,
        "write_file": True,
        "edit_file": True,
        "list_dir": False,
        "glob": False,
        "grep": False,
    }
    assert is_mutating(object())  # a tool that does not say is treated as mutating
    with pytest.raises(ToolArgumentsError):
        await run(tools(tree)["read_file"], path=3)
    with pytest.raises(ToolArgumentsError):
        await run(tools(tree)["read_file"], file="x")
    with pytest.raises(ConfigurationError):
        FileToolkit(tree / "missing")
    with pytest.raises(ConfigurationError):
        file_tools(tree, max_read_chars=0)


async def test_parallel_edits_of_one_file_run_in_call_order(tree: Path) -> None:
    t = tools(tree)
    await run(t["read_file"], path="src/app.py")
    # Each edit needs the previous one applied: out of order, one would not find its text.
    edits = [
        run(t["edit_file"], path="src/app.py", old_string=f"x = {i}", new_string=f"x = {i + 1}")
        for i in range(1, 21)
    ]
    results = await asyncio.gather(*edits)
    assert all("1 replacement" in r for r in results)
    assert (tree / "src" / "app.py").read_text() == "x = 21\ny = 2\n"


def test_a_symlink_swapped_during_1000_rounds_never_lets_a_tool_read_or_write_outside(
    tree: Path,
) -> None:
    """One thread flips root/flip and root/leaf between inside and outside while the tools read
    and write through them 1,000 rounds (with check-then-open in place of open_in_root this
    read the outer file and wrote outside)."""
    outside = tree.parent / "outside"
    deep = "/".join(f"d{i}" for i in range(20))
    for base, text in ((outside, "SECRET"), (tree / "src", "inside")):
        (base / deep).mkdir(parents=True)
        (base / deep / "f").write_text(text)
    (tree / "flip").symlink_to("src")
    (tree / "leaf").symlink_to(f"src/{deep}/f")
    t = tools(tree, require_read=False)
    start = threading.Barrier(2)
    done = threading.Event()
    swaps = 0

    def swap() -> None:
        nonlocal swaps
        start.wait()
        i = 0
        while not done.is_set():
            i += 1
            inner = i % 2 == 1
            target = "src" if inner else str(outside)
            leaf = f"src/{deep}/f" if inner else str(outside / deep / "f")
            for name, to in (("flip", target), ("leaf", leaf)):
                tmp = tree / f".{name}.tmp"
                tmp.symlink_to(to)
                os.replace(tmp, tree / name)
            swaps += 1

    counts = {"inside": 0, "SECRET": 0, "refused": 0, "other": 0, "writes": 0}

    async def use_the_tools() -> None:
        try:
            for _ in range(1000):
                for path in (f"flip/{deep}/f", "leaf"):
                    try:
                        text = await run(t["read_file"], path=path)
                        counts["SECRET" if "SECRET" in text else "inside"] += 1
                    except CodingToolError as exc:
                        counts["refused" if "refused" in str(exc) else "other"] += 1
                    try:
                        await run(t["write_file"], path=path, content="inside")
                        counts["writes"] += 1
                    except CodingToolError as exc:
                        counts["refused" if "refused" in str(exc) else "other"] += 1
        finally:
            done.set()

    worker = threading.Thread(target=swap)
    worker.start()
    start.wait()
    asyncio.run(use_the_tools())
    worker.join()
    assert swaps > 100
    assert counts["SECRET"] == 0, counts
    assert (outside / deep / "f").read_text() == "SECRET", "a write went outside"
    assert sorted(p.name for p in outside.iterdir()) == ["b.txt", "d0"]
    assert counts["inside"] + counts["refused"] > 0


async def test_the_path_queue_keeps_order_when_a_waiter_is_cancelled(tmp_path: Path) -> None:
    queue = PathQueue()
    path = tmp_path / "f"
    order: list[str] = []
    gate = asyncio.Event()

    def step(name: str, wait: bool = False) -> Any:
        async def body() -> str:
            order.append(f"{name} start")
            if wait:
                await gate.wait()
            order.append(f"{name} end")
            return name

        return body

    first = asyncio.create_task(queue.run(path, step("a", wait=True)))
    second = asyncio.create_task(queue.run(path, step("b")))
    third = asyncio.create_task(queue.run(path, step("c")))
    other = asyncio.create_task(queue.run(tmp_path / "g", step("other")))
    assert await other == "other"  # another path does not wait
    second.cancel()
    with pytest.raises(asyncio.CancelledError):
        await second
    assert not third.done()  # still behind "a"
    gate.set()
    assert await asyncio.gather(first, third) == ["a", "c"]
    assert order == ["a start", "other start", "other end", "a end", "c start", "c end"]


async def test_a_hard_link_to_a_file_outside_is_not_written(tree: Path) -> None:
    outside = tree.parent / "outside" / "b.txt"
    os.link(outside, tree / "hard.txt")
    t = tools(tree, require_read=False)
    with pytest.raises(CodingToolError, match="hard links"):
        await run(t["write_file"], path="hard.txt", content="PWNED")
    assert outside.read_text() == "SECRET outside"


# A catastrophic pattern run in a child process: with the standard re it holds the GIL for
# hours (the event loop, the UI and abort stop), so the child is what the test can bound.
CATASTROPHIC = r"""
import asyncio, sys
from goagent_py.coding import CodingToolError, FileToolkit

async def main() -> None:
    root = sys.argv[1]
    grep = {t.definition.name: t for t in FileToolkit(root, grep_timeout=0.5).tools}["grep"]
    ticks = 0
    # (a+)+$ is the review's pattern (the regex package ends it at once); (a|aa)+$ backtracks
    # there too: the time bound ends it.
    for pattern in ("(a+)+$", "(a|aa)+$"):
        task = asyncio.ensure_future(grep.execute({"pattern": pattern}))
        while not task.done():
            await asyncio.sleep(0)  # the loop keeps running while grep matches
            ticks += 1
        try:
            print("returned", task.result()[0].text)
        except CodingToolError as exc:
            print("error:", exc)
    # A glob is a regular expression too: with re, many *a in a row backtrack on a long name
    # (10 s for 40 characters, 8 of them); bounded like grep's pattern.
    glob = {t.definition.name: t for t in FileToolkit(root, grep_timeout=0.5).tools}["glob"]
    try:
        print("returned", (await glob.execute({"pattern": "*a" * 12 + "*b"}))[0].text)
    except CodingToolError as exc:
        print("error:", exc)
    # An abort (cancel) while a slow grep runs: the loop is alive to deliver it at once.
    slow = {t.definition.name: t for t in FileToolkit(root, grep_timeout=1).tools}["grep"]
    task = asyncio.ensure_future(slow.execute({"pattern": "(a|aa)+$"}))
    for _ in range(1000):
        await asyncio.sleep(0)
    task.cancel()
    try:
        await task
        print("not cancelled")
    except asyncio.CancelledError:
        print("cancelled")
    print("ticks", ticks)

asyncio.run(main())
"""


@pytest.mark.slow  # ~5-12 s: the regex package checks its timeout coarsely
def test_a_catastrophic_grep_pattern_ends_in_an_error_and_never_stalls_the_loop(
    tmp_path: Path,
) -> None:
    import subprocess

    (tmp_path / "a.txt").write_text("a" * 34 + "!\n")
    (tmp_path / ("a" * 60)).write_text("")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", CATASTROPHIC, str(tmp_path)],
            capture_output=True,
            text=True,
            timeout=120,  # a bound on a hang, not a timing claim: it ends in ~4 s
            env=env,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("grep ran for 120 s on (a+)+$ and the event loop was frozen")
    lines = done.stdout.splitlines()
    assert done.returncode == 0, done.stderr
    assert lines[0] == "returned [no matches]", lines  # a.txt has no match; aaa... is empty
    assert lines[1].startswith("error: grep stopped after 0.5 s of matching"), lines
    assert "simplify the pattern" in lines[1]
    assert lines[2] == "returned [no files match]", lines  # with re: hours on one name
    assert lines[3] == "cancelled"
    assert int(lines[4].split()[1]) > 0


async def test_write_and_edit_accept_dot_slash_names_like_read(tree: Path) -> None:
    t = tools(tree)
    assert "wrote ./new.txt" in await run(t["write_file"], path="./new.txt", content="one\n")
    assert (tree / "new.txt").read_text() == "one\n"
    await run(t["read_file"], path="./notes.txt")
    await run(t["edit_file"], path="./notes.txt", old_string="beta", new_string="BETA")
    assert (tree / "notes.txt").read_text() == "alpha\nBETA\nalpha\n"
    assert "wrote .//src/x.py" in await run(t["write_file"], path=".//src/x.py", content="x")


async def test_a_line_longer_than_the_read_cap_is_shown_cut_not_skipped(tree: Path) -> None:
    (tree / "min.js").write_text("var a=1;" * 100 + "\nsecond line\n")
    t = tools(tree, max_read_chars=100)
    first = await run(t["read_file"], path="min.js")
    body, note = first.splitlines()
    assert body == ("     1\t" + "var a=1;" * 100)[:100]
    assert "line 1 cut at 100 characters" in note
    assert "offset=2" in note  # onwards, not the same line again
    assert await run(t["read_file"], path="min.js", offset=2) == "     2\tsecond line"
    (tree / "one.txt").write_text("x" * 500)
    last = await run(t["read_file"], path="one.txt")
    assert last.startswith("     1\txxx")
    assert "offset=" not in last  # nothing after it


async def test_writes_and_edits_are_capped_like_reads(tree: Path) -> None:
    t = tools(tree, max_file_bytes=1000)
    with pytest.raises(CodingToolError, match="more than the 1000 bytes allowed"):
        await run(t["write_file"], path="big.txt", content="x" * 1001)
    assert not (tree / "big.txt").exists()
    (tree / "grow.txt").write_text("ab " * 300)  # 900 bytes
    await run(t["read_file"], path="grow.txt")
    with pytest.raises(CodingToolError, match="more than the 1000 bytes allowed"):
        await run(
            t["edit_file"], path="grow.txt", old_string="ab", new_string="abc", replace_all=True
        )
    assert (tree / "grow.txt").read_text() == "ab " * 300


async def test_writes_to_one_file_keep_call_order_whatever_order_a_gate_answers(
    tree: Path,
) -> None:
    """A custom async gate answers the three edits c3, c2, c1: each edit needs the one before
    it applied, so they must still run c1, c2, c3."""
    from goagent_py.agent import Agent
    from goagent_py.messages import ToolCall
    from goagent_py.testing import ScriptedProvider, tool_call_response

    (tree / "f.txt").write_text("x = 0\n")
    edits = [
        ("edit_file", {"path": "f.txt", "old_string": f"x = {i}", "new_string": f"x = {i + 1}"})
        for i in range(3)
    ]
    provider = ScriptedProvider(
        tool_call_response(("read_file", {"path": "f.txt"})),
        tool_call_response(*edits),
        "done",
    )
    waiting: dict[str, asyncio.Event] = {}
    all_in = asyncio.Event()

    async def gate(call: ToolCall) -> str | None:
        if call.name != "edit_file":
            return None
        waiting[call.id] = mine = asyncio.Event()
        if len(waiting) == 3:
            all_in.set()
        await mine.wait()
        return None

    async def answer_backwards() -> None:
        await all_in.wait()
        for event in reversed(list(waiting.values())):
            event.set()
            for _ in range(50):
                await asyncio.sleep(0)  # let that call go as far as it can (no time passes)

    agent = Agent(
        provider=provider,
        tools=file_tools(tree),
        before_tool_call=gate,
        tool_execution="parallel",
    )
    answering = asyncio.ensure_future(answer_backwards())
    result = await agent.run("go")
    await answering
    assert result.text == "done"
    assert (tree / "f.txt").read_text() == "x = 3\n"


async def test_an_invalid_glob_is_a_clear_tool_error(tree: Path) -> None:
    t = tools(tree)
    with pytest.raises(CodingToolError, match="invalid glob pattern"):
        await run(t["glob"], pattern="[z-a]")
    with pytest.raises(CodingToolError, match="invalid glob pattern"):
        await run(t["grep"], pattern="x", glob="[z-a]")
