"""goagent_py.coding: the shell tool (argv, opt-in shell, timeout, caps, env) and ApprovalPolicy."""

from __future__ import annotations

import asyncio
import os
import select
import sys
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import (
    ApprovalPolicy,
    ApprovalRequest,
    CodingToolError,
    Decision,
    file_tools,
    shell_tool,
)
from goagent_py.errors import ConfigurationError, ToolArgumentsError
from goagent_py.messages import ToolCall
from goagent_py.tools import Tool

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")
PY = sys.executable


async def run(tool: Tool, **args: Any) -> str:
    blocks = await tool.execute(args)
    return "".join(getattr(b, "text", "") for b in blocks)


async def test_argv_runs_in_the_root_and_reports_the_exit_code(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    sh = shell_tool(tmp_path)
    out = await run(sh, argv=[PY, "-c", "import os; print(os.getcwd()); raise SystemExit(3)"])
    assert out == f"{tmp_path}\nexit code: 3"
    out = await run(sh, argv=[PY, "-c", "import os; print(os.getcwd())"], cwd="sub")
    assert out == f"{tmp_path / 'sub'}\nexit code: 0"
    assert sh.mutating is True
    # argv is not a command line: a ; is just an argument.
    out = await run(sh, argv=[PY, "-c", "import sys; print(sys.argv[1:])", "a; rm -rf x"])
    assert "['a; rm -rf x']" in out


async def test_cwd_outside_the_root_and_shell_lines_are_refused(tmp_path: Path) -> None:
    sh = shell_tool(tmp_path)
    for cwd in ("..", "/tmp", "../x"):
        with pytest.raises(CodingToolError, match="refused"):
            await run(sh, argv=["pwd"], cwd=cwd)
    with pytest.raises(ToolArgumentsError, match="unknown argument 'command'"):
        await run(sh, command="echo hi")
    with pytest.raises(CodingToolError, match="no such program"):
        await run(sh, argv=["definitely-not-a-program-xyz"])
    assert "command" not in sh.definition.parameters["properties"]


async def test_a_command_line_runs_through_the_shell_when_enabled(tmp_path: Path) -> None:
    sh = shell_tool(tmp_path, allow_shell=True)
    assert await run(sh, command="echo one && echo two | tr a-z A-Z") == "one\nTWO\nexit code: 0"
    with pytest.raises(CodingToolError, match="exactly one"):
        await run(sh, command="true", argv=["true"])


async def test_the_environment_has_no_api_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-secret")
    monkeypatch.setenv("GITHUB_TOKEN", "ghp-secret")
    sh = shell_tool(tmp_path, env={"MY_FLAG": "1"})
    out = await run(sh, argv=[PY, "-c", "import os; print(sorted(os.environ))"])
    assert "ANTHROPIC_API_KEY" not in out
    assert "GITHUB_TOKEN" not in out
    assert "MY_FLAG" in out
    assert "PATH" in out


async def test_output_is_capped_with_a_marker_keeping_both_ends(tmp_path: Path) -> None:
    sh = shell_tool(tmp_path, max_output_chars=100)
    code = "print('BEGIN'); print('x' * 10000); print('END')"
    out = await run(sh, argv=[PY, "-c", code])
    assert out.startswith("BEGIN")
    assert "characters of output cut" in out
    assert out.endswith("END\nexit code: 0")
    assert len(out) < 200


def _exited(pid: int) -> bool:
    """Whether ``pid`` has ended: its pidfd turns readable at exit (an event, not a poll loop)."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 10)[0])
    finally:
        os.close(fd)


async def test_the_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    sh = shell_tool(tmp_path, timeout=1)
    # The child starts a grandchild that would outlive a plain kill of the child.
    code = (
        "import subprocess, sys; "
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        "print(p.pid, flush=True); p.wait()"
    )
    out = await run(sh, argv=[PY, "-c", code])
    assert "[killed after 1 seconds (timeout)]" in out
    assert "exit code: -9" in out
    grandchild = int(out.split()[0])
    assert _exited(grandchild)


def test_misuse_is_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError):
        shell_tool(tmp_path / "missing")
    with pytest.raises(ConfigurationError):
        shell_tool(tmp_path, timeout=0)
    with pytest.raises(ConfigurationError):
        shell_tool(tmp_path, max_output_chars=0)
    with pytest.raises(ConfigurationError):
        ApprovalPolicy(allow=[""])


# -- approvals ---------------------------------------------------------------------------------


def call(name: str, **args: Any) -> ToolCall:
    return ToolCall(f"c-{name}-{len(args)}", name, args)


async def test_read_only_tools_pass_and_mutating_ones_are_asked(tmp_path: Path) -> None:
    asked: list[ApprovalRequest] = []

    async def ask(request: ApprovalRequest) -> Decision:
        asked.append(request)
        return Decision("deny", "not now, use a branch")

    tools = [*file_tools(tmp_path), shell_tool(tmp_path)]
    policy = ApprovalPolicy(tools, ask=ask)
    assert await policy(call("read_file", path="a.py")) is None
    assert await policy(call("grep", pattern="x")) is None
    assert await policy(call("write_file", path="./a.py", content="")) == "not now, use a branch"
    assert [(r.call.name, r.subject, r.mutating) for r in asked] == [("write_file", "a.py", True)]
    assert await policy(call("unknown_tool")) is not None  # not listed: counts as mutating
    strict = ApprovalPolicy(tools, allow_read_only=False)  # no ask: denied
    assert "needs approval" in str(await strict(call("read_file", path="a.py")))


async def test_allow_and_deny_patterns_by_tool_path_and_command(tmp_path: Path) -> None:
    tools = [*file_tools(tmp_path), shell_tool(tmp_path)]
    policy = ApprovalPolicy(
        tools,
        allow=["edit_file(src/**)", "shell(git status*)"],
        deny=["*(secrets/*)", "shell(rm *)"],
    )
    assert await policy(call("edit_file", path="src/a.py", old_string="a", new_string="b")) is None
    edit = call("edit_file", path="docs/a.md", old_string="a", new_string="b")
    assert "needs approval" in str(await policy(edit))  # no ask: denied
    assert await policy(call("shell", argv=["git", "status", "-s"])) is None
    assert "denied by policy" in str(await policy(call("shell", argv=["rm", "-rf", "/"])))
    assert "denied by policy" in str(await policy(call("read_file", path="secrets/key.pem")))


async def test_always_allows_for_the_session_and_stop_stops(tmp_path: Path) -> None:
    answers = iter(["always", "allow", "always", "allow", "stop"])
    asked: list[str] = []
    stopped: list[str] = []

    def ask(request: ApprovalRequest) -> Any:
        asked.append(f"{request.call.name} {request.subject}")
        return next(answers)

    tools = [*file_tools(tmp_path), shell_tool(tmp_path)]
    policy = ApprovalPolicy(tools, ask=ask, stop=stopped.append)
    edit = {"old_string": "a", "new_string": "b"}
    assert await policy(call("edit_file", path="a.py", **edit)) is None  # always: this file
    assert await policy(call("edit_file", path="./a.py", **edit)) is None
    assert await policy(call("edit_file", path="b.py", **edit)) is None  # asked: allow, once
    assert await policy(call("shell", argv=["make", "test"])) is None  # always: this command
    assert await policy(call("shell", argv=["make", "test"])) is None
    assert await policy(call("shell", argv=["make", "lint"])) is None  # allow: once
    reason = await policy(call("write_file", path="c.py", content=""))
    assert reason is not None
    assert "stopped the run" in reason
    assert stopped
    assert policy.stopped
    assert await policy(call("shell", argv=["make", "test"])) == "the user stopped this run"
    policy.reset_stop()
    assert asked == [
        "edit_file a.py",
        "edit_file b.py",
        "shell make test",
        "shell make lint",
        "write_file c.py",
    ]


async def test_parallel_asks_come_one_at_a_time_in_call_order(tmp_path: Path) -> None:
    live = 0
    most = 0
    order: list[str] = []

    async def ask(request: ApprovalRequest) -> str:
        nonlocal live, most
        live += 1
        most = max(most, live)
        order.append(request.subject)
        await asyncio.sleep(0)
        live -= 1
        return "allow"

    policy = ApprovalPolicy(file_tools(tmp_path), ask=ask)
    calls = [call("write_file", path=f"f{i}.py", content="") for i in range(5)]
    assert await asyncio.gather(*(policy(c) for c in calls)) == [None] * 5
    assert most == 1
    assert order == [f"f{i}.py" for i in range(5)]


async def test_writes_to_one_path_apply_in_call_order_when_only_the_first_is_asked(
    tmp_path: Path,
) -> None:
    """The first write waits for a person, the second is allowed by a pattern: the second
    must still wait for the first (the order is the model's, not the approvals')."""
    import asyncio

    from goagent_py.agent import Agent
    from goagent_py.coding import ApprovalPolicy, file_tools
    from goagent_py.testing import ScriptedProvider, tool_call_response

    (tmp_path / "f.txt").write_text("one\n")
    provider = ScriptedProvider(
        tool_call_response(("read_file", {"path": "f.txt"})),
        tool_call_response(
            ("write_file", {"path": "f.txt", "content": "two\n"}),  # asked about
            ("edit_file", {"path": "f.txt", "old_string": "two", "new_string": "three"}),
        ),
        "done",
    )
    tools = file_tools(tmp_path)
    asked = asyncio.Event()
    answer: asyncio.Future[str] = asyncio.get_running_loop().create_future()

    async def ask(request: ApprovalRequest) -> str:
        asked.set()
        return await answer

    policy = ApprovalPolicy(tools, ask=ask, allow=["edit_file(f.txt)"])
    run = asyncio.ensure_future(
        Agent(
            provider=provider, tools=tools, before_tool_call=policy, tool_execution="parallel"
        ).run("go")
    )
    await asked.wait()
    # The edit was allowed at once; it must not have run ahead of the write it follows.
    for _ in range(50):
        await asyncio.sleep(0)  # let the edit's task go as far as it can (no time passes)
    assert (tmp_path / "f.txt").read_text() == "one\n"
    answer.set_result("allow")
    result = await run
    assert result.text == "done"
    assert (tmp_path / "f.txt").read_text() == "three\n"
