"""Text no file name or terminal can hold: a lone surrogate in a path is a clear refusal, a
file name that is not UTF-8 is listed escaped, and the line mode shows such text escaped, never
crashing (code11). Paths a tool would refuse are refused before anyone is asked."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import ApprovalPolicy, CodingToolError, file_tools
from goagent_py.coding._terminal import printable
from goagent_py.messages import ToolCall
from goagent_py.testing import FunctionProvider, tool_call_response

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX dir fds")
SURROGATE = "\ud800"


def test_printable_escapes_a_lone_surrogate() -> None:
    shown = printable(f"a{SURROGATE}b\n", newlines=True)
    assert shown == "a\\ud800b\n"
    shown.encode("utf-8")  # a terminal can take it


async def test_a_path_with_a_lone_surrogate_is_refused_clearly(tmp_path: Path) -> None:
    t = {x.definition.name: x for x in file_tools(tmp_path)}
    for name, args in (
        ("read_file", {}),
        ("write_file", {"content": "x"}),
        ("list_dir", {}),
        ("grep", {"pattern": "x"}),
    ):
        with pytest.raises(CodingToolError, match="lone surrogate"):
            await t[name].execute({"path": f"{SURROGATE}.txt", **args})


async def test_a_path_a_tool_would_refuse_is_not_asked_about(tmp_path: Path) -> None:
    asked: list[Any] = []
    policy = ApprovalPolicy(file_tools(tmp_path), ask=lambda r: asked.append(r) or "allow")
    for path in ("../outside.txt", "/etc/passwd", f"{SURROGATE}.txt", "a\x00b"):
        reason = await policy(ToolCall("c1", "write_file", {"path": path, "content": "x"}))
        assert reason is not None
        assert "refused" in reason
    assert asked == []
    # A path that can be written is still asked about.
    assert await policy(ToolCall("c2", "write_file", {"path": "new.txt", "content": "x"})) is None
    assert len(asked) == 1


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses names that are not UTF-8")
async def test_a_file_name_that_is_not_utf8_is_listed_as_text_every_store_takes(
    tmp_path: Path,
) -> None:
    (tmp_path / "sub").mkdir()
    with open(bytes(tmp_path / "sub") + b"/bad\xff.txt", "wb") as f:  # noqa: ASYNC230
        f.write(b"needle\n")
    t = {x.definition.name: x for x in file_tools(tmp_path)}
    for name, args in (
        ("list_dir", {"path": "sub"}),
        ("glob", {"pattern": "**/*.txt"}),
        ("grep", {"pattern": "needle"}),
    ):
        blocks = await t[name].execute(args)
        text = "".join(getattr(b, "text", "") for b in blocks)
        text.encode("utf-8")  # was: UnicodeEncodeError ("bad\udcff.txt")
        assert "bad\\xff.txt" in text


@pytest.mark.skipif(sys.platform == "darwin", reason="macOS refuses names that are not UTF-8")
async def test_a_session_lists_a_folder_with_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    from goagent_py.coding.repl import build_parser, code_main

    root = tmp_path / "ws"
    root.mkdir()
    with open(bytes(root) + b"/bad\xff.txt", "wb") as f:  # noqa: ASYNC230
        f.write(b"x\n")
    answers = iter([tool_call_response(("list_dir", {"path": "."})), "listed"])
    provider = FunctionProvider(lambda request: next(answers))
    lines = iter(["look", None])

    async def read_line(prompt: str) -> str | None:
        return next(lines)

    shown: list[str] = []

    def terminal(line: str) -> None:  # a terminal takes UTF-8
        shown.append(line.encode("utf-8").decode("utf-8"))

    ns = build_parser().parse_args(["--root", str(root), "--db", str(tmp_path / "c.db")])
    # was: UnicodeEncodeError, the line mode ended (the result's first line, "bad\udcff.txt")
    assert await code_main(ns, provider=provider, read_line=read_line, write=terminal) == 0
    assert "listed" in shown
    assert any("bad\\xff.txt" in line for line in shown), shown
    assert not any(line.startswith("error") for line in shown), shown


def test_a_calls_one_line_summary_stays_short() -> None:
    from goagent_py.coding.session import brief

    # A model may send a path or a command of a megabyte: the line mode printed it whole
    # for each call, and the window made it a block's title.
    for args in ({"path": "x" * 100_000}, {"argv": ["echo", "y" * 100_000]}, {"q": "z" * 10}):
        assert len(brief(args)) <= 240
    assert brief({"path": "x" * 300}).endswith("… (100 more characters)")
    assert brief({"path": "src/a.py"}) == "src/a.py"
