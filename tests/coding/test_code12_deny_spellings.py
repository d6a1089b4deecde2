"""Deny rules hold for every spelling a file system may open as the same file (code12).

On a case-insensitive file system (macOS, Windows) ``.ENV`` opens ``.env``; on macOS ``é`` may be
stored decomposed (NFD) while a rule is typed composed (NFC). A deny rule matched the path as
spelled, so ``*(.env)`` let ``read_file .ENV`` through. The machine running this test folds
neither, so the files are made under the other spelling: what matters is what the rule lets the
tools open and show.
"""

from __future__ import annotations

import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import ApprovalPolicy, file_tools
from goagent_py.messages import ToolCall

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX names")

NFD = unicodedata.normalize("NFD", "sécrets")
NFC = unicodedata.normalize("NFC", "sécrets")


def _tools(root: Path, deny: list[str]) -> tuple[dict[str, Any], ApprovalPolicy]:
    tools = file_tools(root)
    policy = ApprovalPolicy(tools, deny=deny)
    return {t.definition.name: t for t in tools}, policy


async def _text(tool: Any, **args: Any) -> str:
    blocks = await tool.execute(args)
    return "".join(getattr(b, "text", "") for b in blocks)


async def test_a_deny_rule_holds_whatever_the_case(tmp_path: Path) -> None:
    (tmp_path / ".ENV").write_text("API_KEY=TOP-SECRET\n")
    (tmp_path / "Secrets").mkdir()
    (tmp_path / "Secrets" / "Key.txt").write_text("TOP-SECRET\n")
    tools, policy = _tools(tmp_path, ["*(.env)", "*(secrets/**)"])
    for path in (".ENV", ".Env", "Secrets/Key.txt", "SECRETS/key.TXT"):
        reason = await policy(ToolCall("c", "read_file", {"path": path}))
        assert reason is not None, path
        assert "denied by policy" in reason
    # The tools hold the rules themselves (a caller that skips the gate, a link swapped in).
    assert "path rule" in await _text_error(tools["read_file"], path=".ENV")
    assert "TOP-SECRET" not in await _text(tools["grep"], pattern="TOP-SECRET")
    assert "Key.txt" not in await _text(tools["glob"], pattern="**/*")
    assert ".ENV" not in await _text(tools["list_dir"], path=".")


async def test_a_deny_rule_holds_whatever_the_unicode_normal_form(tmp_path: Path) -> None:
    (tmp_path / NFD).mkdir()
    (tmp_path / NFD / "key.txt").write_text("TOP-SECRET\n")
    tools, policy = _tools(tmp_path, [f"*({NFC}/**)"])
    for path in (f"{NFD}/key.txt", f"{NFC.upper()}/key.txt"):
        reason = await policy(ToolCall("c", "read_file", {"path": path}))
        assert reason is not None
        assert "denied by policy" in reason
    assert "TOP-SECRET" not in await _text(tools["grep"], pattern="TOP-SECRET")
    assert "key.txt" not in await _text(tools["glob"], pattern="**/*")


async def test_allow_rules_and_always_stay_exact(tmp_path: Path) -> None:
    # Only deny rules fold: an allow for src/** does not let SRC/x through unasked.
    (tmp_path / "SRC").mkdir()
    asked: list[str] = []

    def ask(request: Any) -> str:
        asked.append(request.subject)
        return "deny"

    tools = file_tools(tmp_path)
    policy = ApprovalPolicy(tools, ask=ask, allow=["write_file(src/**)"])
    await policy(ToolCall("c", "write_file", {"path": "SRC/x.py", "content": "x"}))
    assert asked == ["SRC/x.py"]


async def _text_error(tool: Any, **args: Any) -> str:
    from goagent_py.coding._tool import CodingToolError

    with pytest.raises(CodingToolError) as caught:
        await tool.execute(args)
    return str(caught.value)


async def test_a_command_deny_rule_holds_whatever_the_case(tmp_path: Path) -> None:
    # macOS and Windows find /BIN/RM as /bin/rm: the deny covers the program in any case.
    from goagent_py.coding import shell_tool

    policy = ApprovalPolicy([shell_tool(tmp_path, allow_shell=True)], deny=["shell(rm *)"])
    for args in ({"argv": ["/BIN/RM", "-rf", "x"]}, {"command": "true; Rm -rf x"}):
        reason = await policy(ToolCall("c", "shell", args))
        assert reason is not None, args
        assert "denied by policy" in reason
