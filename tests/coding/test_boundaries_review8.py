"""Review 8: an "always" answer covers what the user was shown, nothing more."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import ApprovalPolicy, ApprovalRequest, file_tools, shell_tool
from goagent_py.messages import ToolCall

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX paths")


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(f"c-{name}-{len(args)}-{id(args)}", name, args)


def _policy(root: Path, asked: list[str]) -> ApprovalPolicy:
    def ask(request: ApprovalRequest) -> str:
        asked.append(f"{request.call.name} {request.subject}")
        return "always" if len(asked) == 1 else "deny"

    return ApprovalPolicy([*file_tools(root), shell_tool(root)], ask=ask)


async def test_always_on_a_file_edit_does_not_approve_another_file(tmp_path: Path) -> None:
    asked: list[str] = []
    policy = _policy(tmp_path, asked)
    edit = {"old_string": "a", "new_string": "b"}
    assert await policy(call("edit_file", path="a.py", **edit)) is None
    # The same file, however spelled: not asked again.
    assert await policy(call("edit_file", path="./a.py", **edit)) is None
    assert await policy(call("edit_file", path=".//a.py", **edit)) is None
    # Another file (the user never saw it): asked, and denied here.
    reason = await policy(call("edit_file", path=".git/hooks/pre-commit", **edit))
    assert reason == "the user denied edit_file on .git/hooks/pre-commit"
    assert asked == ["edit_file a.py", "edit_file .git/hooks/pre-commit"]


async def test_always_on_a_file_write_is_not_carried_by_a_symlink_swap(tmp_path: Path) -> None:
    asked: list[str] = []
    policy = _policy(tmp_path, asked)
    (tmp_path / "notes.txt").write_text("x")
    assert await policy(call("write_file", path="notes.txt", content="y")) is None
    # notes.txt now a link to another file of the root: the write reaches that file.
    (tmp_path / "notes.txt").unlink()
    (tmp_path / "setup.py").write_text("")
    (tmp_path / "notes.txt").symlink_to("setup.py")
    reason = await policy(call("write_file", path="notes.txt", content="z"))
    assert reason is not None
    assert asked == ["write_file notes.txt", "write_file setup.py"]


async def test_always_on_a_command_does_not_approve_it_in_another_directory(
    tmp_path: Path,
) -> None:
    (tmp_path / "scratch").mkdir()
    asked: list[str] = []
    policy = _policy(tmp_path, asked)
    rm = ["rm", "-rf", "build"]
    assert await policy(call("shell", argv=rm, cwd="scratch")) is None
    assert await policy(call("shell", argv=rm, cwd="./scratch/")) is None  # the same folder
    # The same argv in the root removes another folder: asked (and denied here).
    assert await policy(call("shell", argv=rm)) is not None
    assert len(asked) == 2


async def test_always_on_a_command_follows_the_folder_not_its_link_name(tmp_path: Path) -> None:
    (tmp_path / "scratch").mkdir()
    (tmp_path / "src").mkdir()
    (tmp_path / "here").symlink_to("scratch")
    asked: list[str] = []
    policy = _policy(tmp_path, asked)
    rm = ["rm", "-rf", "build"]
    assert await policy(call("shell", argv=rm, cwd="here")) is None
    (tmp_path / "here").unlink()
    (tmp_path / "here").symlink_to("src")
    assert await policy(call("shell", argv=rm, cwd="here")) is not None
    assert len(asked) == 2


# -- the file written is the file approved ----------------------------------------------------


async def test_a_write_approved_for_one_file_is_refused_when_a_link_swap_redirects_it(
    tmp_path: Path,
) -> None:
    from goagent_py.agent import Agent
    from goagent_py.messages import Role
    from goagent_py.testing import ScriptedProvider, text_response, tool_call_response

    root = tmp_path / "ws"
    root.mkdir()
    (root / "notes.txt").write_text("notes\n")
    (root / "setup.py").write_text("import setuptools\n")
    provider = ScriptedProvider(
        tool_call_response(
            ("read_file", {"path": "notes.txt"}), ("read_file", {"path": "setup.py"})
        ),
        tool_call_response(("write_file", {"path": "notes.txt", "content": "pwned\n"})),
        text_response("done"),
    )
    asked: list[str] = []

    def ask(request: ApprovalRequest) -> str:
        asked.append(f"{request.call.name} {request.subject}")
        # While the user reads the question, notes.txt becomes a link to setup.py (a command
        # of the same turn, another process...).
        (root / "notes.txt").unlink()
        (root / "notes.txt").symlink_to("setup.py")
        return "allow"

    tools = file_tools(root)
    agent = Agent(provider=provider, tools=tools, before_tool_call=ApprovalPolicy(tools, ask=ask))
    result = await agent.run("note it")
    assert asked == ["write_file notes.txt"]
    assert (root / "setup.py").read_text() == "import setuptools\n"
    told = [m.text for m in result.messages if m.role is Role.TOOL][-1]
    assert "notes.txt" in told
    assert "setup.py" in told


# -- a path of a tool the policy cannot resolve (an MCP tool's) -------------------------------


def _plain_tool(name: str) -> Any:
    from goagent_py.tools import ToolDefinition

    class Plain:
        mutating = True
        definition = ToolDefinition(name, "", {"type": "object", "properties": {}})

    return Plain()


@pytest.mark.parametrize("path", ["a/../secrets/k", "./x/./../secrets/k", "secrets/./k"])
async def test_a_deny_pattern_holds_a_dotted_path_of_a_tool_without_resolution(
    tmp_path: Path, path: str
) -> None:
    policy = ApprovalPolicy([_plain_tool("fs_read")], deny=["*(secrets/**)"], allow=["fs_read"])
    reason = await policy(call("fs_read", path=path))
    assert reason is not None
    assert "denied by policy" in reason


@pytest.mark.parametrize("path", ["src/../../etc/passwd", "src/../.git/config"])
async def test_an_allow_pattern_does_not_cover_a_path_that_climbs_out_of_it(
    tmp_path: Path, path: str
) -> None:
    policy = ApprovalPolicy([_plain_tool("fs_write")], allow=["fs_write(src/**)"])
    assert await policy(call("fs_write", path="src/a.py")) is None
    reason = await policy(call("fs_write", path=path))
    assert reason is not None
    assert "needs approval" in reason


# -- a path the system cannot open --------------------------------------------------------------


@pytest.mark.parametrize("tool", ["read_file", "grep"])
async def test_a_path_too_long_is_a_refusal_the_model_reads(tmp_path: Path, tool: str) -> None:
    from goagent_py.coding import CodingToolError

    tools = {t.definition.name: t for t in file_tools(tmp_path)}
    args: dict[str, Any] = {"path": "a" * 5000}
    if tool == "grep":
        args["pattern"] = "x"
    with pytest.raises(CodingToolError, match="too long"):
        await tools[tool].execute(args)


async def test_a_write_whose_path_prepare_arguments_repaired_goes_to_the_repaired_path(
    tmp_path: Path,
) -> None:
    from goagent_py.agent import Agent
    from goagent_py.testing import ScriptedProvider, text_response, tool_call_response

    root = tmp_path / "ws"
    root.mkdir()
    provider = ScriptedProvider(
        tool_call_response(("write_file", {"path": "typo.txt", "content": "hi\n"})),
        text_response("done"),
    )

    def repair(call: ToolCall) -> dict[str, Any] | None:
        return {**call.arguments, "path": "fixed.txt"} if call.name == "write_file" else None

    tools = file_tools(root)
    agent = Agent(provider=provider, tools=tools, prepare_arguments=repair)
    await agent.run("write it")
    assert (root / "fixed.txt").read_text() == "hi\n"
    assert not (root / "typo.txt").exists()
