"""Review 9c of deferred approvals (issues 35, 14, 28): what a decision applies to, and the
one record every path leaves."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from goagent_py import Agent, Approve, Message, StopReason, tool
from goagent_py._metadata_keys import PENDING_KEY
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.testing import ScriptedProvider, tool_call_response


def _remover(ran: list[tuple[str, bool]], *, dry_by_default: bool) -> Any:
    if dry_by_default:

        @tool(requires_approval=True)
        def remove(path: str, dry_run: bool = True) -> str:
            """Remove a file.

            Args:
                path: which file.
                dry_run: only say what would go.
            """
            ran.append((path, dry_run))
            return f"removed {path} (dry run: {dry_run})"

        return remove

    @tool(requires_approval=True)
    def remove(path: str, dry_run: bool = False) -> str:  # type: ignore[no-redef]
        """Remove a file.

        Args:
            path: which file.
            dry_run: only say what would go.
        """
        ran.append((path, dry_run))
        return f"removed {path} (dry run: {dry_run})"

    return remove


def _memory(db: Path) -> ShortTermMemory:
    return ShortTermMemory(storage=SQLiteStorage(db, session_id="ticket"))


async def test_an_approval_runs_the_arguments_the_person_was_shown_after_a_redeploy(
    tmp_path: Path,
) -> None:
    # The person is shown the validated arguments (defaults filled in); the resume ran the
    # model's raw arguments, validated again by whatever tool the new process has: a default
    # that changed between the question and the click changed what ran.
    db = tmp_path / "chat.db"
    ran: list[tuple[str, bool]] = []
    asked = await Agent(
        provider=ScriptedProvider(tool_call_response(("remove", {"path": "build"}))),
        tools=[_remover(ran, dry_by_default=True)],
        short_term_memory=_memory(db),
    ).run("clean up")
    (call,) = asked.pending
    assert call.arguments == {"path": "build", "dry_run": True}

    later = Agent(
        provider=ScriptedProvider("Done."),
        tools=[_remover(ran, dry_by_default=False)],
        short_term_memory=_memory(db),
    )
    done = await later.resume({call.id: Approve()})
    assert ran == [("build", True)]
    assert done.messages[0].text == "removed build (dry run: True)"


async def test_an_approval_runs_what_was_asked_when_the_stored_call_changed(
    tmp_path: Path,
) -> None:
    # The stored assistant message's arguments changed while the call waited (another
    # writer of the record): the person approved what the pending record showed, and that
    # is what may run, never the other arguments.
    db = tmp_path / "chat.db"
    ran: list[tuple[str, bool]] = []
    remove = _remover(ran, dry_by_default=True)
    memory = _memory(db)
    asked = await Agent(
        provider=ScriptedProvider(tool_call_response(("remove", {"path": "build"}))),
        tools=[remove],
        short_term_memory=memory,
    ).run("clean up")
    (call,) = asked.pending

    def swapped(m: Message) -> Message:
        calls = [replace(c, arguments={"path": "/", "dry_run": False}) for c in m.tool_calls]
        return replace(m, tool_calls=calls)

    assert await memory.update_where(lambda m: PENDING_KEY in m.metadata, swapped) is not None
    done = await Agent(
        provider=ScriptedProvider("Done."), tools=[remove], short_term_memory=_memory(db)
    ).resume({call.id: Approve()})
    assert ran == [("build", True)]
    assert done.stop_reason is StopReason.END_TURN
