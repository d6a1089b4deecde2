"""The approval preview and the policy use the one path that was checked: a hard link to a
file, or a link swapped in after the check, never shows another file's content to the user,
and the question names the path the rules were checked on (docs/coding-agent.md)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from goagent_py.coding import ApprovalPolicy
from goagent_py.coding._preview import approval_lines
from goagent_py.coding.approvals import ApprovalRequest
from goagent_py.messages import ToolCall
from goagent_py.tools import ToolDefinition


def call(name: str, **arguments: Any) -> ToolCall:
    return ToolCall(id="c1", name=name, arguments=arguments)


def test_a_write_over_a_hard_link_does_not_show_the_linked_files_content(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("API_KEY=s3cr3t\n")
    os.link(tmp_path / ".env", tmp_path / "notes.txt")
    request = ApprovalRequest(
        call("write_file", path="notes.txt", content="hello\n"), "notes.txt", True
    )
    lines = approval_lines(request, tmp_path)
    # was: a diff whose "-" line was the denied file's secret
    assert not any("s3cr3t" in line for line in lines), lines
    assert any("hard link" in line for line in lines), lines


def test_an_edit_of_a_hard_link_does_not_show_the_linked_files_content(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("API_KEY=s3cr3t\n")
    os.link(tmp_path / ".env", tmp_path / "notes.txt")
    edit = call("edit_file", path="notes.txt", old_string="API", new_string="X")
    lines = approval_lines(ApprovalRequest(edit, "notes.txt", True), tmp_path)
    assert not any("s3cr3t" in line for line in lines), lines


def test_a_link_swapped_in_after_the_check_does_not_show_the_target(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("s3cr3t\n")
    # The rules were checked on notes.txt, a plain file; then it became a link to secret.txt.
    (tmp_path / "notes.txt").symlink_to("secret.txt")
    request = ApprovalRequest(
        call("write_file", path="notes.txt", content="hi\n"), "notes.txt", True
    )
    lines = approval_lines(request, tmp_path)
    # was: the diff read notes.txt by name again, through the link
    assert not any("s3cr3t" in line for line in lines), lines
    assert any("secret.txt" in line and "not shown" in line for line in lines), lines


def test_a_plain_file_still_shows_its_diff(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("old line\n")
    request = ApprovalRequest(
        call("write_file", path="notes.txt", content="new line\n"), "notes.txt", True
    )
    lines = approval_lines(request, tmp_path)
    assert "-old line" in lines
    assert "+new line" in lines


class _SwappingTool:
    """A file tool whose path resolves to a plain file first, then (a link swapped in) to a
    denied one: each resolution is one call of ``rule_path``."""

    mutating = True
    definition = ToolDefinition("write_file", "", {"type": "object", "properties": {}})

    def __init__(self) -> None:
        self.answers = ["notes.txt", "secrets/key"]
        self.resolved = 0

    def rule_path(self, path: str) -> str:
        self.resolved += 1
        return self.answers[min(self.resolved - 1, len(self.answers) - 1)]


async def test_the_policy_resolves_a_path_once_and_asks_about_that_one() -> None:
    tool = _SwappingTool()
    asked: list[ApprovalRequest] = []

    def ask(request: ApprovalRequest) -> str:
        asked.append(request)
        return "always"

    policy = ApprovalPolicy([tool], ask=ask, deny=["*(secrets/**)"])
    assert await policy(call("write_file", path="notes.txt")) is None
    # was: checked on notes.txt, then resolved again for the question ("secrets/key"), and
    # "always" remembered the path nobody checked
    assert tool.resolved == 1
    assert [r.subject for r in asked] == ["notes.txt"]


async def test_read_file_records_the_file_it_read_not_a_second_resolution(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import goagent_py.coding.files as files_module
    from goagent_py.coding import file_tools

    (tmp_path / "a.txt").write_text("A\n")
    (tmp_path / "b.txt").write_text("B\n")
    (tmp_path / "link").symlink_to("a.txt")
    resolve = files_module.resolve_in_root

    def resolve_then_swap(root: Any, path: Any) -> Path:
        found = resolve(root, path)
        if str(path) == "link":  # the link now leads to b.txt, right after a resolution
            (tmp_path / "link").unlink()
            (tmp_path / "link").symlink_to("b.txt")
        return found

    monkeypatch.setattr(files_module, "resolve_in_root", resolve_then_swap)
    tools = {t.definition.name: t for t in file_tools(tmp_path)}
    [shown] = await tools["read_file"].execute({"path": "link"})
    name, letter = ("b.txt", "B") if "B" in shown.text else ("a.txt", "A")
    edit = {"path": name, "old_string": letter, "new_string": "C"}
    [result] = await tools["edit_file"].execute(edit)
    # was: a resolution before the open named a.txt, the open read b.txt through the swapped
    # link, and the read was recorded as one of a.txt: the edit of b.txt, whose content the
    # model had read, was refused as unread
    assert "read the file before" not in result.text, result.text
    assert (tmp_path / name).read_text() == "C\n"
