"""A durable run's claim is fenced by the generation its load read (approve14; docs/approvals.md
"A clear under a decision"): the conversation cleared while the run waited and filled again
with the same waiting message (same digest) does not take the decision; the run fails with
ConversationClearedError named and the approved call does not run. Real Temporal dev server,
real SQLite file."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from refund_clerk import clerk, next_wait, one_refund
from refund_waits import refund_tool  # tests/refund_waits.py
from temporalio.testing import WorkflowEnvironment

from goagent_py import Approve
from goagent_py.durable import DurableRunError, create_worker
from goagent_py.durable._client import result_of
from goagent_py.memory.storage import SQLiteStorage

pytestmark = pytest.mark.slow


async def test_a_durable_claim_on_a_conversation_cleared_and_refilled_is_refused(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    db = tmp_path / "chat.db"
    ran: list[str] = []
    durable, registry = clerk(one_refund(), [refund_tool(ran)], db=db)
    async with create_worker(temporal.client, [durable], registry=registry):
        handle = await durable.start(temporal.client, "refund A-1", session_id="s1")
        await next_wait(durable, handle, 0)
        (call,) = await durable.pending(handle)
        async with SQLiteStorage(db, session_id="s1") as other:  # another process
            stored = await other.load()
            await other.clear()
            await other.append(stored)
        await durable.decide(handle, {call.id: Approve(token=call.token)})
        with pytest.raises(DurableRunError) as caught:
            await asyncio.wait_for(result_of(handle), timeout=300)
        async with SQLiteStorage(db, session_id="s1") as check:
            after = await check.load()

    assert caught.value.type == "ConversationClearedError"
    assert ran == []
    assert after == stored  # the refilled conversation still waits: nothing was settled
