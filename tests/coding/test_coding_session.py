"""A coding agent from the public API: a scripted Session over real files, then the REPL."""

from __future__ import annotations

import os
import select
import sys
from pathlib import Path
from typing import Any

import pytest
from test_session import assert_valid_for_every_provider

from goagent_py.agent import Agent
from goagent_py.coding import ApprovalPolicy, ApprovalRequest, file_tools, shell_tool
from goagent_py.coding.repl import build_parser, code_main
from goagent_py.events import AgentEnd, ToolExecutionUpdate
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import Role, StopReason
from goagent_py.session import Session
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX processes")
PY = sys.executable

# Starts a grandchild (which a kill of the child alone would leave running), says so, waits.
BLOCKER = (
    "import subprocess, sys; "
    "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
    "print('ready', p.pid, flush=True); p.wait()"
)


def _exited(pid: int) -> bool:
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], 10)[0])
    finally:
        os.close(fd)


def _texts(messages: list[Any], role: Role) -> list[str]:
    return [m.text for m in messages if m.role is role]


async def test_a_scripted_coding_session_reads_edits_runs_and_is_aborted(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "app.py").write_text("print('v1')\n")
    provider = ScriptedProvider(
        tool_call_response(("read_file", {"path": "app.py"})),
        # Two edits in one turn: the second needs the first applied (queued, in call order).
        tool_call_response(
            ("edit_file", {"path": "app.py", "old_string": "v1", "new_string": "v2"}),
            ("edit_file", {"path": "app.py", "old_string": "v2", "new_string": "v3"}),
        ),
        tool_call_response(("shell", {"argv": [PY, "app.py"]})),
        text_response("app.py prints v3 now"),
        tool_call_response(("shell", {"argv": [PY, "-c", BLOCKER]})),
        tool_call_response(("write_file", {"path": "app.py", "content": "print('gone')\n"})),
    )
    asked: list[str] = []

    def ask(request: ApprovalRequest) -> str:
        asked.append(f"{request.call.name} {request.subject}")
        if request.call.name == "write_file":
            return "stop"
        return "always" if request.call.name == "edit_file" else "allow"

    tools = [*file_tools(root), shell_tool(root)]
    storage = SQLiteStorage(tmp_path / "s.db", session_id="s1")
    session: Session

    def stop(reason: str) -> None:
        session.abort("after_tools", reason=reason)

    policy = ApprovalPolicy(tools, ask=ask, stop=stop)
    agent = Agent(
        provider=provider,
        tools=tools,
        before_tool_call=policy,
        short_term_memory=ShortTermMemory(storage),
    )
    session = Session(agent)

    result = await session.prompt("make app.py print v3 and run it")
    assert result.text == "app.py prints v3 now"
    assert (root / "app.py").read_text() == "print('v3')\n"
    results = _texts(session.transcript, Role.TOOL)
    assert results[1:3] == ["edited app.py: 1 replacement(s)"] * 2
    assert results[3] == "v3\nexit code: 0"
    # "always" for the first edit: the second was not asked about.
    assert asked == ["edit_file app.py", f"shell {PY} app.py"]

    # Aborted mid-tool: the command (and its grandchild) die, the call gets a result.
    grandchild = 0
    end: AgentEnd | None = None
    async for event in session.stream("run the server"):
        if isinstance(event, ToolExecutionUpdate):
            output = event.update.get("output", "")
            if output.startswith("ready"):
                grandchild = int(output.split()[1])
                session.abort("now", reason="Ctrl-C")
        elif isinstance(event, AgentEnd):
            end = event
    assert end is not None
    assert end.result.stop_reason is StopReason.ABORTED
    assert grandchild
    assert _exited(grandchild)
    assert_valid_for_every_provider(session.transcript)

    # "stop": the call is blocked and the run ends without another model call.
    policy.reset_stop()
    result = await session.prompt("replace app.py")
    assert result.stop_reason is StopReason.ABORTED
    assert provider.remaining == 0
    assert (root / "app.py").read_text() == "print('v3')\n"
    assert "stopped the run" in _texts(session.transcript, Role.TOOL)[-1]
    assert_valid_for_every_provider(session.transcript)

    # The transcript in SQLite is what the session holds, and a new process resumes it.
    await storage.aclose()
    again = SQLiteStorage(tmp_path / "s.db", session_id="s1")
    resumed = Session(Agent(provider=provider, short_term_memory=ShortTermMemory(again)))
    loaded = await resumed.load()
    assert [m.text for m in loaded] == [m.text for m in session.transcript]
    assert_valid_for_every_provider(loaded)
    await again.aclose()


async def _repl(args: list[str], inputs: list[str], provider: Any) -> list[str]:
    lines = iter(inputs)
    out: list[str] = []

    async def read_line(prompt: str) -> str | None:
        text = next(lines, None)
        out.append(f"{prompt}{text}")
        return text

    assert (
        await code_main(
            build_parser().parse_args(args),
            provider=provider,
            read_line=read_line,
            write=out.append,
        )
        == 0
    )
    return out


async def test_the_repl_asks_edits_persists_and_continue_resumes(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("hello\n")
    base = ["--root", str(root), "--db", str(tmp_path / "code.db"), "--plain"]
    provider = ScriptedProvider(
        tool_call_response(("read_file", {"path": "a.txt"})),
        tool_call_response(
            ("edit_file", {"path": "a.txt", "old_string": "hello", "new_string": "bye"})
        ),
        text_response("changed it"),
    )
    out = await _repl(base, ["change a.txt", "x", "y", "/exit"], provider)
    assert (root / "a.txt").read_text() == "bye\n"
    assert "allow edit_file a.txt? [y]es [a]lways [n]o [s]top: x" in out
    assert "  answer y, a, n or s" in out
    assert "changed it" in out
    first = next(line for line in out if line.startswith("session "))
    assert "(0 messages)" in first

    out = await _repl([*base, "--continue"], ["/exit"], ScriptedProvider())
    again = next(line for line in out if line.startswith("session "))
    assert again.split()[1] == first.split()[1]
    assert "(6 messages)" in again  # user, call, result, call, result, answer

    out = await _repl([*base, "--continue"], ["/clear", "/exit"], ScriptedProvider())
    assert "(conversation cleared)" in out
    out = await _repl([*base, "--continue"], [], ScriptedProvider())  # EOF ends it too
    assert "(0 messages)" in next(line for line in out if line.startswith("session "))
    out = await _repl(base, ["/exit"], ScriptedProvider())  # without --continue: a new one
    assert next(line for line in out if line.startswith("session ")).split()[1] != first.split()[1]


async def test_the_repl_compacts_and_survives_a_failing_provider(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    base = ["--root", str(root), "--db", str(tmp_path / "code.db")]
    answers = ScriptedProvider(*[text_response(f"answer {i}") for i in range(6)])
    await _repl(base, [f"question {i}" for i in range(6)], answers)
    summary = ScriptedProvider("Summary: six questions, six answers.")
    out = await _repl([*base, "--continue"], ["/compact the answers", "/exit"], summary)
    assert "(compacted)" in out
    assert summary.remaining == 0
    failing = ScriptedProvider(ConnectionError("the model is down"), "back again")
    out = await _repl([*base, "--continue"], ["hello?", "hello again", "/exit"], failing)
    assert sum(line.startswith("error: ") and "down" in line for line in out) == 1, out
    assert "back again" in out


async def test_the_code_agent_delegates_exploration_to_a_read_only_sub_agent(
    tmp_path: Path,
) -> None:
    import argparse

    from goagent_py.coding.repl import code_main
    from goagent_py.testing import ScriptedProvider, tool_call_response

    (tmp_path / "app.py").write_text("def handler():\n    return 42\n")
    provider = ScriptedProvider(
        tool_call_response(("explore", {"prompt": "where is handler?"})),  # the lead delegates
        tool_call_response(("grep", {"pattern": "def handler"})),  # the sub-agent searches
        "app.py line 1 defines handler.",  # the sub-agent's report
        "handler is in app.py.",  # the lead's answer
    )
    lines = iter(["where is handler?", "/exit"])
    out: list[str] = []

    async def read_line(prompt: str) -> str | None:
        return next(lines, None)

    sessions: list[Any] = []
    ns = argparse.Namespace(
        root=str(tmp_path), provider=None, plain=True, db=str(tmp_path / "code.db"),
        session=None, resume=False, shell=False, yes=False, max_iterations=10, mcp=[],
    )  # fmt: skip
    await code_main(
        ns, provider=provider, read_line=read_line, write=out.append, on_session=sessions.append
    )
    sub_request = provider.requests[1]  # the sub-agent's own request
    assert sub_request.tools
    assert {t.name for t in sub_request.tools} <= {
        "read_file", "list_dir", "glob", "grep",
    }  # fmt: skip
    assert "write_file" not in {t.name for t in sub_request.tools}
    assert len(sub_request.messages) == 1  # its own context: only the delegated prompt
    assert any("handler is in app.py" in line for line in out)
    # The line mode shows the sub-agent's work indented under its call, then the status line.
    at = out.index("  • explore prompt='where is handler?'")
    shown = ["    • [explore] grep pattern='def handler'", "      ✓ " + out[at + 2][8:]]
    assert out[at + 1 :][:2] == shown
    assert out[at + 2].endswith("app.py:1:def handler():")
    assert "    explore: app.py line 1 defines handler." in out
    assert out[-1].startswith("[")
    assert "· cost — ·" in out[-1]
