"""Review 9c of deferred approvals (issues 35, 14, 28): what a decision applies to, and the
one record every path leaves."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from goagent_py import Agent, Approve, Message, Role, StopReason, tool, validate_transcript
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


def _erase(ran: list[str]) -> Any:
    @tool(requires_approval=True)
    def erase(name: str) -> str:
        """Erase something.

        Args:
            name: what.
        """
        ran.append(name)
        return f"erased {name}"

    return erase


def _lead_with_scratch(db: Path, ran: list[str]) -> Agent:
    scratch = Agent(
        provider=ScriptedProvider(*[tool_call_response(("erase", {"name": "tmp"})), "Gone."] * 2),
        tools=[_erase(ran)],
        short_term_memory=ShortTermMemory(storage=SQLiteStorage(db, session_id="scratch")),
    )
    return Agent(
        provider=ScriptedProvider(
            *[tool_call_response(("scratch", {"prompt": "erase tmp"})), "Cleaned."] * 2
        ),
        tools=[scratch.as_tool(name="scratch", description="Scratch space.")],
        short_term_memory=ShortTermMemory(storage=SQLiteStorage(db, session_id="lead")),
    )


async def test_a_sub_agent_whose_parent_dropped_its_wait_asks_again(tmp_path: Path) -> None:
    # A sub-agent with a memory of its own keeps its wait there. When the parent's wait ended
    # without resuming it (the process died after the parent's claim, or the resume was
    # aborted first), the parent closed its call as interrupted, but the sub-agent's record
    # waited on: every later call of the sub-agent failed with ApprovalPendingError.
    db = tmp_path / "chat.db"
    ran: list[str] = []
    asked = await _lead_with_scratch(db, ran).run("tidy")
    (call,) = asked.pending
    claimed = await _lead_with_scratch(db, ran).start_resume({call.id: Approve()}, streaming=False)
    del claimed  # the process dies here: claimed, nothing of it ran

    lead = _lead_with_scratch(db, ran)
    again = await lead.run("tidy again")
    assert again.stop_reason is StopReason.DEFERRED
    (waiting,) = again.pending
    assert waiting.name == "erase"
    done = await lead.resume({waiting.id: Approve()})
    assert done.text == "Cleaned."
    assert ran == ["tmp"]
    async with SQLiteStorage(db, session_id="scratch") as storage:
        child = await storage.load()
    assert validate_transcript(child, allow_pending=False) == []
    closed = [m for m in child if m.role is Role.TOOL and m.is_error]
    assert len(closed) == 1
    assert "was not run" in closed[0].text


async def test_a_sibling_call_of_the_same_sub_agent_leaves_the_first_ones_wait(
    tmp_path: Path,
) -> None:
    # Two calls of one sub-agent (with a memory of its own) in one sequential batch: the
    # first waits; the second must not close that wait as if its parent had dropped it.
    db = tmp_path / "chat.db"
    ran: list[str] = []
    scratch = Agent(
        provider=ScriptedProvider(tool_call_response(("erase", {"name": "tmp"})), "Gone."),
        tools=[_erase(ran)],
        short_term_memory=ShortTermMemory(storage=SQLiteStorage(db, session_id="scratch")),
    )
    lead = Agent(
        provider=ScriptedProvider(
            tool_call_response(
                ("scratch", {"prompt": "erase tmp"}), ("scratch", {"prompt": "and more"})
            ),
            "Cleaned.",
        ),
        tools=[scratch.as_tool(name="scratch", description="Scratch space.")],
        short_term_memory=ShortTermMemory(storage=SQLiteStorage(db, session_id="lead")),
        tool_execution="sequential",
    )
    asked = await lead.run("tidy")
    (waiting,) = asked.pending
    done = await lead.resume({waiting.id: Approve()})
    assert ran == ["tmp"]
    assert done.text == "Cleaned."
