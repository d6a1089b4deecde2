"""Path rules of ApprovalPolicy over the file tools: matched on the resolved path, and filtering
what the walks return (issue 29)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import ApprovalPolicy, CodingToolError, FileToolkit, file_tools
from goagent_py.messages import ToolCall
from goagent_py.tools import Tool

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks and dir fds")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """root with secrets/ (and a link alias -> secrets), src/, the command's code.db."""
    root = tmp_path / "root"
    (root / "secrets" / "deeper").mkdir(parents=True)
    (root / "secrets" / "key.txt").write_text("TOP-SECRET key\n")
    (root / "secrets" / "deeper" / "more.txt").write_text("TOP-SECRET more\n")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('TOP-SECRET is a string here')\n")
    (root / "alias").symlink_to("secrets")
    (root / "code.db").write_text("the stored conversation\n")
    (root / "db_alias").symlink_to("code.db")
    return root


def named(tools: list[Any]) -> dict[str, Tool]:
    return {t.definition.name: t for t in tools}


async def run(tool: Tool, **args: Any) -> str:
    blocks = await tool.execute(args)
    return "".join(getattr(b, "text", "") for b in blocks)


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(f"c-{name}", name, args)


def allow(_: Any) -> str:
    return "allow"


SPELLINGS = ["secrets/key.txt", ".//secrets/key.txt", "./secrets/key.txt", "secrets//key.txt"]


async def test_deny_patterns_match_the_resolved_path_relative_to_the_root(root: Path) -> None:
    """``.//secrets/key.txt`` or a link to secrets/ passed ``write_file(secrets/*)``, and
    ``.//code.db`` passed the command's guard on its own database."""
    policy = ApprovalPolicy(
        file_tools(root), ask=allow, deny=["write_file(secrets/*)", "*(code.db*)"]
    )
    for path in [*SPELLINGS, "secrets/./key.txt", "alias/key.txt", "./alias//key.txt"]:
        reason = await policy(call("write_file", path=path, content="x"))
        assert "denied by policy" in str(reason), path
    for path in ["code.db", ".//code.db", "./code.db", "db_alias"]:
        assert "denied by policy" in str(await policy(call("read_file", path=path))), path
    assert await policy(call("write_file", path="src/new.py", content="x")) is None


async def test_the_question_names_the_resolved_path(root: Path) -> None:
    asked: list[str] = []

    def ask(request: Any) -> str:
        asked.append(request.subject)
        return "deny"

    policy = ApprovalPolicy(file_tools(root), ask=ask)
    await policy(call("write_file", path=".//alias/new.txt", content="x"))
    assert asked == ["secrets/new.txt"]


async def test_a_deny_pattern_filters_what_grep_glob_and_list_dir_return(root: Path) -> None:
    t = named(file_tools(root))
    ApprovalPolicy(list(t.values()), deny=["*(secrets/**)"])
    grep = await run(t["grep"], pattern="TOP-SECRET")
    assert grep == "src/app.py:1:print('TOP-SECRET is a string here')"
    assert await run(t["grep"], pattern="TOP-SECRET", path="alias") == "[no matches]"
    assert await run(t["grep"], pattern="TOP-SECRET", path="./secrets") == "[no matches]"
    assert sorted((await run(t["glob"], pattern="**")).splitlines()) == ["code.db", "src/app.py"]
    assert await run(t["glob"], pattern="**", path="alias") == "[no files match]"
    assert await run(t["list_dir"], path="secrets") == "[empty directory]"
    assert await run(t["list_dir"], path="alias/deeper") == "[empty directory]"
    assert "key.txt" not in await run(t["list_dir"], path="alias")


async def test_a_rule_for_one_tool_filters_only_that_tools_walks(root: Path) -> None:
    t = named(file_tools(root))
    ApprovalPolicy(list(t.values()), deny=["glob(secrets/**)"])
    assert "secrets/key.txt" not in await run(t["glob"], pattern="**")
    assert "secrets/key.txt:1:TOP-SECRET key" in await run(t["grep"], pattern="TOP-SECRET")


async def test_a_link_swapped_in_after_the_check_is_refused_at_open(root: Path) -> None:
    """The policy checks the path when the call is made; the tool checks the file it opens."""
    (root / "public").mkdir()
    (root / "public" / "key.txt").write_text("public\n")
    (root / "door").symlink_to("public")
    t = named(file_tools(root, require_read=False))
    policy = ApprovalPolicy(list(t.values()), ask=allow, deny=["*(secrets/**)"])
    for name, args in [
        ("read_file", {"path": "door/key.txt"}),
        ("write_file", {"path": "door/key.txt", "content": "PWNED"}),
        ("grep", {"pattern": "TOP", "path": "door/key.txt"}),
    ]:
        (root / "door").unlink()
        (root / "door").symlink_to("public")
        assert await policy(call(name, **args)) is None  # door/key.txt is public/key.txt now
        (root / "door").unlink()
        (root / "door").symlink_to("secrets")  # swapped before the tool runs
        with pytest.raises(CodingToolError, match="path rule"):
            await run(t[name], **args)
    assert (root / "secrets" / "key.txt").read_text() == "TOP-SECRET key\n"


def test_rule_path_is_the_one_normalisation(root: Path) -> None:
    kit = FileToolkit(root)
    assert {kit.rule_path(p) for p in [*SPELLINGS, "alias/key.txt"]} == {"secrets/key.txt"}
    assert kit.rule_path(".") == kit.rule_path("./") == "."
    assert kit.rule_path("db_alias") == "code.db"
    assert kit.rule_path("new/dir/file.txt") == "new/dir/file.txt"  # need not exist
    assert kit.rule_path("../outside") == "../outside"  # refused by the tools anyway


async def test_the_root_is_named_by_any_spelling_of_dot(root: Path) -> None:
    t = named(file_tools(root))
    listed = await run(t["list_dir"])
    for spelling in (".", "./", ".//", "", "././"):
        assert await run(t["list_dir"], path=spelling) == listed, spelling
        assert "src/app.py" in await run(t["glob"], pattern="**", path=spelling)
    for refused in ("/", "//", "\\"):
        with pytest.raises(CodingToolError, match="refused"):
            await run(t["list_dir"], path=refused)


async def test_tools_used_without_the_policy_still_hold_its_deny_patterns(root: Path) -> None:
    """A sub-agent given the same tool objects (goagent-py code's explore) but no policy:
    the toolkit holds the deny patterns itself."""
    tools = file_tools(root)
    ApprovalPolicy(tools, deny=["*(code.db*)"])
    t = named(tools)
    for path in ("code.db", ".//code.db", "db_alias"):
        with pytest.raises(CodingToolError, match="path rule"):
            await run(t["read_file"], path=path)
    assert "code.db" not in await run(t["glob"], pattern="**")
    assert "stored conversation" not in await run(t["grep"], pattern="conversation")


async def test_a_hard_link_to_a_denied_file_is_not_read_or_grepped(root: Path) -> None:
    """A hard link made by the shell is the denied file under another name (same inode): no
    path rule can see it, so with path rules a file with other links is refused."""
    import os

    os.link(root / "secrets" / "key.txt", root / "copy.txt")
    t = named(file_tools(root, require_read=False))
    ApprovalPolicy(list(t.values()), ask=allow, deny=["*(secrets/**)"])
    with pytest.raises(CodingToolError, match="hard links"):
        await run(t["read_file"], path="copy.txt")
    with pytest.raises(CodingToolError, match="hard links"):
        await run(t["grep"], pattern="TOP", path="copy.txt")
    found = await run(t["grep"], pattern="TOP-SECRET")
    assert "src/app.py" in found
    assert "TOP-SECRET key" not in found


async def test_a_hard_linked_file_reads_without_path_rules(root: Path) -> None:
    import os

    os.link(root / "secrets" / "key.txt", root / "copy.txt")
    t = named(file_tools(root, require_read=False))
    assert "TOP-SECRET key" in await run(t["read_file"], path="copy.txt")
