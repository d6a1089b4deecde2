"""Two changes of one file in one turn: the second is previewed against the file as it will be.

The calls of a turn are asked about one after another, in call order, and the writes come
later; the question about a second edit of a file showed its diff against the file before the
first edit (code12's notes): a diff with the wrong context, or "the edit will fail" for an edit
that then succeeded. The preview now applies the changes approved before it that have not run
yet. Real files, the real policy and preview; the bodies run afterwards through the real tools.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from goagent_py.coding import ApprovalPolicy, file_tools
from goagent_py.coding._preview import approval_lines
from goagent_py.coding.approvals import Answer, ApprovalRequest
from goagent_py.messages import ToolCall

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX dir fds")


class _Asked:
    """An ``ask`` that records what each question showed, with fixed answers."""

    def __init__(self, root: Path, answers: list[Answer]) -> None:
        self.root, self.answers, self.shown = root, answers, []  # type: ignore[var-annotated]

    def __call__(self, request: ApprovalRequest) -> Answer:
        self.shown.append(approval_lines(request, self.root))
        return self.answers.pop(0)


def _edit(call_id: str, old: str, new: str) -> ToolCall:
    return ToolCall(call_id, "edit_file", {"path": "a.py", "old_string": old, "new_string": new})


async def _decide(root: Path, calls: list[ToolCall], answers: list[Answer]) -> _Asked:
    tools = file_tools(root)
    read = next(t for t in tools if t.definition.name == "read_file")
    await read.execute({"path": "a.py"})
    asked = _Asked(root, answers)
    policy = ApprovalPolicy(tools, ask=asked)

    async def gate(call: ToolCall) -> str | None:
        return await policy(call)

    # Each call in its own task, started in call order, as the agent loop runs a turn's calls.
    reasons = await asyncio.gather(*(asyncio.create_task(gate(c)) for c in calls))
    assert all(r is None or "denied" in r for r in reasons), reasons
    return asked


def test_a_second_edit_that_needs_the_first_is_previewed_after_it(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")
    calls = [_edit("c1", "x = 1", "x = 10"), _edit("c2", "x = 10", "x = 100")]
    asked = asyncio.run(_decide(tmp_path, calls, ["allow", "allow"]))
    second = asked.shown[1]
    # was: "(the edit will fail: old_string is not in a.py ...)" (previewed against x = 1)
    assert not any("will fail" in line for line in second), second
    assert "-x = 10" in second, second
    assert "+x = 100" in second, second


def test_the_second_edit_s_context_is_the_file_after_the_first(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")
    calls = [_edit("c1", "x = 1", "x = 10"), _edit("c2", "y = 2", "y = 20")]
    asked = asyncio.run(_decide(tmp_path, calls, ["allow", "allow"]))
    second = asked.shown[1]
    assert " x = 10" in second, second  # the context line as the file will be
    assert " x = 1" not in second, second
    assert any("earlier" in line for line in second), second  # it says why


def test_a_denied_first_edit_is_not_in_the_second_preview(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("x = 1\ny = 2\n")
    calls = [_edit("c1", "x = 1", "x = 10"), _edit("c2", "y = 2", "y = 20")]
    asked = asyncio.run(_decide(tmp_path, calls, ["deny", "allow"]))
    second = asked.shown[1]
    assert " x = 1" in second, second
    assert " x = 10" not in second, second


def test_a_write_then_an_edit_are_previewed_in_order_and_written_so(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("old\n")

    async def turn() -> tuple[list[list[str]], str]:
        from goagent_py.agent import Agent
        from goagent_py.testing import ScriptedProvider, tool_call_response

        tools = file_tools(tmp_path)
        shown: list[list[str]] = []

        def ask(request: ApprovalRequest) -> Answer:
            shown.append(approval_lines(request, tmp_path))
            return "allow"

        policy = ApprovalPolicy(tools, ask=ask)
        edit: dict[str, Any] = {"path": "a.py", "old_string": "two", "new_string": "three"}
        provider = ScriptedProvider(
            tool_call_response(("read_file", {"path": "a.py"})),
            tool_call_response(
                ("write_file", {"path": "a.py", "content": "one\ntwo\n"}), ("edit_file", edit)
            ),
            "done",
        )
        agent = Agent(provider=provider, model="m", tools=tools, before_tool_call=policy)
        await agent.run("go")
        return shown, (tmp_path / "a.py").read_text()

    shown, final = asyncio.run(turn())
    assert "+three" in shown[1], shown[1]
    assert "-two" in shown[1], shown[1]
    assert final == "one\nthree\n"
