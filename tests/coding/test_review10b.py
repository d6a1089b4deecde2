"""Review 10b: the edit tool's semantics and what the file tools tell the model about files
that are not plain UTF-8 text (CRLF, other encodings, binary, too large to search)."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from goagent_py.coding import CodingToolError, FileToolkit, _match, file_tools, shell_tool
from goagent_py.coding.repl import build_parser, code_main
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response
from goagent_py.tools import Tool

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX file tools")


def tools(root: Path, **kw: Any) -> dict[str, Tool]:
    return {t.definition.name: t for t in file_tools(root, **kw)}


async def run(tool: Tool, **args: Any) -> str:
    blocks = await tool.execute(args)
    return "".join(getattr(b, "text", "") for b in blocks)


async def test_an_edit_whose_old_string_matches_at_overlapping_places_is_refused_as_ambiguous(
    tmp_path: Path,
) -> None:
    # "\n\n" sits at two places of "a\n\n\nb" (they overlap); str.count sees one.
    (tmp_path / "o.txt").write_text("a\n\n\nb\n")
    t = tools(tmp_path)
    await run(t["read_file"], path="o.txt")
    with pytest.raises(CodingToolError, match="appears 2 times"):
        await run(t["edit_file"], path="o.txt", old_string="\n\n", new_string="\nX\n")
    assert (tmp_path / "o.txt").read_text() == "a\n\n\nb\n"


async def test_a_multi_line_edit_in_a_crlf_file_matches_and_keeps_crlf(tmp_path: Path) -> None:
    # read_file shows lines without their "\r": the model writes old_string with "\n".
    (tmp_path / "c.txt").write_bytes(b"one\r\ntwo\r\nthree\r\n")
    t = tools(tmp_path)
    await run(t["read_file"], path="c.txt")
    answer = await run(t["edit_file"], path="c.txt", old_string="one\ntwo", new_string="1\n2")
    assert "1 replacement" in answer
    assert (tmp_path / "c.txt").read_bytes() == b"1\r\n2\r\nthree\r\n"


async def test_an_edit_of_a_file_that_is_not_utf8_keeps_its_other_bytes(tmp_path: Path) -> None:
    (tmp_path / "l.txt").write_bytes(b"caf\xe9 = 1\nx = 2\n")
    t = tools(tmp_path)
    shown = await run(t["read_file"], path="l.txt")
    assert "not valid UTF-8" in shown  # the model is told what the replacement marks are
    await run(t["edit_file"], path="l.txt", old_string="x = 2", new_string="x = 3")
    assert (tmp_path / "l.txt").read_bytes() == b"caf\xe9 = 1\nx = 3\n"


async def test_reading_a_binary_file_tells_the_model_instead_of_showing_its_bytes(
    tmp_path: Path,
) -> None:
    (tmp_path / "b.bin").write_bytes(bytes(range(256)) * 4)
    shown = await run(tools(tmp_path)["read_file"], path="b.bin")
    assert "binary" in shown
    assert "1024 bytes" in shown
    assert "\x00" not in shown
    assert "\x1b" not in shown


async def test_grep_says_which_files_were_too_large_to_search(tmp_path: Path) -> None:
    (tmp_path / "big.log").write_text("needle\n" + "x" * 2000 + "\n")
    (tmp_path / "small.txt").write_text("hay\n")
    shown = await run(tools(tmp_path, max_file_bytes=1000)["grep"], pattern="needle")
    assert "[no matches]" in shown
    assert "big.log" in shown
    assert "not searched" in shown


async def test_an_edit_that_needs_an_earlier_edit_of_the_same_turn_applies_after_it(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.py").write_text("x = 1\n")
    t = tools(tmp_path)
    await run(t["read_file"], path="a.py")
    await run(t["edit_file"], path="a.py", old_string="x = 1", new_string="x = 2")
    await run(t["edit_file"], path="a.py", old_string="x = 2", new_string="x = 3")
    assert (tmp_path / "a.py").read_text() == "x = 3\n"


async def test_an_edit_without_a_trailing_newline_leaves_the_end_as_it_was(
    tmp_path: Path,
) -> None:
    (tmp_path / "n.txt").write_bytes(b"a\nb")
    t = tools(tmp_path)
    await run(t["read_file"], path="n.txt")
    await run(t["edit_file"], path="n.txt", old_string="b", new_string="c")
    assert (tmp_path / "n.txt").read_bytes() == b"a\nc"


async def test_an_edit_that_differs_only_in_tabs_says_the_whitespace_differs(
    tmp_path: Path,
) -> None:
    (tmp_path / "m.py").write_text("def f():\n\treturn 1\n")
    t = tools(tmp_path)
    await run(t["read_file"], path="m.py")
    with pytest.raises(CodingToolError, match="except for whitespace"):
        await run(t["edit_file"], path="m.py", old_string="    return 1", new_string="\treturn 2")


async def test_text_that_utf8_cannot_hold_is_refused_by_write_and_edit(tmp_path: Path) -> None:
    # JSON may carry a lone surrogate ("\ud800"); the model reads why instead of a crash.
    (tmp_path / "a.txt").write_text("a\n")
    t = tools(tmp_path)
    await run(t["read_file"], path="a.txt")
    with pytest.raises(CodingToolError, match="UTF-8"):
        await run(t["write_file"], path="b.txt", content="x\ud800")
    with pytest.raises(CodingToolError, match="UTF-8"):
        await run(t["edit_file"], path="a.txt", old_string="a", new_string="\ud800")
    assert not (tmp_path / "b.txt").exists()
    assert (tmp_path / "a.txt").read_text() == "a\n"


async def _repl(args: list[str], inputs: list[str], provider: Any) -> list[str]:
    lines = iter(inputs)
    out: list[str] = []

    async def read_line(prompt: str) -> str | None:
        return next(lines, None)

    ns = build_parser().parse_args(args)
    assert await code_main(ns, provider=provider, read_line=read_line, write=out.append) == 0
    return out


async def test_the_line_mode_shows_the_last_messages_of_a_continued_session(
    tmp_path: Path,
) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    base = ["--root", str(root), "--db", str(tmp_path / "code.db"), "--plain", "--yes"]
    provider = ScriptedProvider(
        tool_call_response(("list_dir", {"path": "."})), text_response("the folder is empty")
    )
    await _repl(base, ["what is here?"], provider)
    out = await _repl([*base, "--continue"], [], ScriptedProvider())
    start = next(i for i, line in enumerate(out) if line.startswith("session "))
    assert out[start + 1 :] == ["> what is here?", "the folder is empty"]


async def test_grep_over_a_tree_slow_to_read_is_not_blamed_on_its_pattern(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tree of 100k files takes longer than grep_timeout to walk and read: the bound is on
    # matching (a pattern that backtracks), so a plain pattern still answers. Reading each file
    # is made to "take" one second of the clock the bound reads.
    for i in range(20):
        (tmp_path / f"f{i:02}.txt").write_text("hay\n" if i else "needle\n")
    now = [1000.0]
    monkeypatch.setattr(_match, "time", SimpleNamespace(monotonic=lambda: now[0]))
    read = FileToolkit._grep_bytes

    def slow(self: FileToolkit, *args: Any) -> bytes | None:
        now[0] += 1.0
        return read(self, *args)

    monkeypatch.setattr(FileToolkit, "_grep_bytes", slow)
    grep = {t.definition.name: t for t in FileToolkit(tmp_path, grep_timeout=5).tools}["grep"]
    assert await run(grep, pattern="needle") == "f00.txt:1:needle"


async def test_a_file_too_large_to_edit_is_read_in_its_first_bytes_and_the_model_told(
    tmp_path: Path,
) -> None:
    (tmp_path / "big.log").write_text("".join(f"line {i}\n" for i in range(1, 1001)))
    t = tools(tmp_path, max_file_bytes=1000)
    shown = await run(t["read_file"], path="big.log", limit=3)
    assert shown.splitlines()[1:4] == ["     1\tline 1", "     2\tline 2", "     3\tline 3"]
    assert "only its first 1000 bytes" in shown
    # Past what can be read, the model is told why instead of an empty answer.
    far = await run(t["read_file"], path="big.log", offset=900)
    assert "only its first 1000 bytes" in far
    # It stays too large to edit (the read recorded nothing an edit could rely on).
    with pytest.raises(CodingToolError, match="more than the 1000 bytes"):
        await run(t["edit_file"], path="big.log", old_string="line 1\n", new_string="x\n")


async def test_an_old_string_copied_with_read_files_line_numbers_is_explained(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")
    t = tools(tmp_path)
    shown = await run(t["read_file"], path="a.py")
    with pytest.raises(CodingToolError, match="line numbers"):
        await run(t["edit_file"], path="a.py", old_string=shown, new_string="x = 3\ny = 2")
    assert (tmp_path / "a.py").read_text() == "x = 1\ny = 2\n"


async def test_grep_says_which_binary_files_match_without_showing_their_bytes(
    tmp_path: Path,
) -> None:
    (tmp_path / "data.bin").write_bytes(b"\x00\x01needle\x1b[2J\n")
    (tmp_path / "other.bin").write_bytes(b"\x00\x01hay\n")
    shown = await run(tools(tmp_path)["grep"], pattern="needle")
    assert shown == "[no matches]\n[note: binary files match (lines not shown): data.bin]"


async def test_a_read_of_zero_lines_says_so_instead_of_answering_nothing(tmp_path: Path) -> None:
    (tmp_path / "a.txt").write_text("x\n")
    with pytest.raises(CodingToolError, match="limit"):
        await run(tools(tmp_path)["read_file"], path="a.txt", limit=0)


async def test_a_one_line_edit_that_adds_lines_to_a_crlf_file_adds_crlf_lines(
    tmp_path: Path,
) -> None:
    (tmp_path / "c.txt").write_bytes(b"one\r\ntwo\r\n")
    t = tools(tmp_path)
    await run(t["read_file"], path="c.txt")
    await run(t["edit_file"], path="c.txt", old_string="one", new_string="one\nextra")
    assert (tmp_path / "c.txt").read_bytes() == b"one\r\nextra\r\ntwo\r\n"


async def test_shell_output_cut_inside_a_character_shows_no_replacement_marks(
    tmp_path: Path,
) -> None:
    # "é" is two bytes: a cap of 102 counted in bytes cut the head and the tail inside one (it
    # counts characters now: 51 of them at each end).
    shell = shell_tool(tmp_path, max_output_chars=102)
    argv = [sys.executable, "-c", "import sys; sys.stdout.write('é' * 500)"]
    shown = await run(shell, argv=argv)
    assert "\ufffd" not in shown
    assert "characters of output cut" in shown
    assert shown.startswith("é" * 51 + "\n")
