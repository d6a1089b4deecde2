"""A person approves the file a call's path led to when it was listed, not the path's text
(approve14; docs/approvals.md "What an approval covers"): a symlink swapped inside the root
between the wait and the decision makes the approved call refused, with the model told why,
and nothing written. Real files and real symlinks."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from goagent_py import Agent, Approve, Role, ToolCall
from goagent_py.coding import ApprovalPolicy, file_tools
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.testing import ScriptedProvider, tool_call_response

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX symlinks")

WRITE = tool_call_response(
    ToolCall("w", "write_file", {"path": "notes/plan.md", "content": "the plan"})
)


def _workspace(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "src").mkdir()
    os.symlink("docs", root / "notes")  # notes -> docs
    return root


def _agent(root: Path, db: Path, *script: object) -> Agent:
    tools = file_tools(root, require_read=False)
    policy = ApprovalPolicy(tools)  # every write waits for a person
    return Agent(
        provider=ScriptedProvider(*script),
        tools=tools,
        short_term_memory=ShortTermMemory(storage=SQLiteStorage(db, session_id="s")),
        **policy.deferred(),
    )


async def test_an_approved_write_whose_link_was_swapped_meanwhile_is_refused(
    tmp_path: Path,
) -> None:
    root = _workspace(tmp_path)
    db = tmp_path / "chat.db"
    (asked,) = (await _agent(root, db, WRITE).run("write the plan")).pending
    assert asked.resolved == "docs/plan.md"  # what the person is approving
    # Between the question and the click, the link inside the root now leads elsewhere.
    os.remove(root / "notes")
    os.symlink("src", root / "notes")
    later = _agent(root, db, "noted")
    result = await later.resume({"w": Approve(token=asked.token)})
    assert not (root / "src" / "plan.md").exists()
    assert not (root / "docs" / "plan.md").exists()
    (told,) = [m for m in result.messages if m.role is Role.TOOL]
    assert told.is_error
    assert "src/plan.md" in told.text
    assert "docs/plan.md" in told.text
    assert result.text == "noted"


async def test_an_approved_write_whose_link_still_leads_there_runs(tmp_path: Path) -> None:
    root = _workspace(tmp_path)
    db = tmp_path / "chat.db"
    (asked,) = (await _agent(root, db, WRITE).run("write the plan")).pending
    later = _agent(root, db, "written")
    result = await later.resume({"w": Approve(token=asked.token)})
    assert (root / "docs" / "plan.md").read_text() == "the plan"
    assert result.text == "written"


async def test_an_approval_with_an_edited_path_runs_on_the_path_the_person_wrote(
    tmp_path: Path,
) -> None:
    root = _workspace(tmp_path)
    db = tmp_path / "chat.db"
    (asked,) = (await _agent(root, db, WRITE).run("write the plan")).pending
    os.remove(root / "notes")
    os.symlink("src", root / "notes")
    edited = {"path": "docs/plan.md", "content": "the plan"}
    await _agent(root, db, "ok").resume({"w": Approve(edited, token=asked.token)})
    assert (root / "docs" / "plan.md").read_text() == "the plan"
