"""A durable run that waits for a person survives its worker's SIGKILL (issue 35): the wait
holds no activity, so a new worker takes the decision and the run completes; the approved
tool runs exactly once. Workers are real processes (``durable_approval_app.py``) on a real
Temporal dev server; the session's record is a real SQLite file."""

from __future__ import annotations

import collections
import os
import signal
import uuid
from pathlib import Path

import durable_approval_app  # tests/durable/durable_approval_app.py
import pytest
from temporalio.testing import WorkflowEnvironment
from worker_process import start_worker, stop  # tests/durable/worker_process.py

from goagent_py import Approve, validate_transcript
from goagent_py.durable._client import result_of
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import Role

pytestmark = pytest.mark.slow

APP = Path(__file__).parent / "durable_approval_app.py"


async def test_a_run_waiting_for_approval_survives_a_worker_sigkill(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    queue, log, db, session = (
        f"q-{uuid.uuid4().hex[:8]}",
        tmp_path / "calls.log",
        tmp_path / "chat.db",
        "ticket-9",
    )
    durable = durable_approval_app.durable_agent(db, queue)
    first = start_worker(APP, temporal, queue, str(db), log=log)
    second = None
    try:
        handle = await durable.start(temporal.client, "refund A-17", session_id=session)
        async for event in durable.events(handle):
            if event["type"] == "pending":
                break
        (call,) = await durable.pending(handle)
        # The run waits: no activity runs; the worker dies.
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        assert first.returncode == -signal.SIGKILL
        second = start_worker(APP, temporal, queue, str(db), log=log)
        assert [p.id for p in await durable.pending(handle)] == ["call-1"]
        await durable.decide(handle, {call.id: Approve()})
        result = await result_of(handle)
    finally:
        stop(first)
        if second is not None:
            stop(second)

    assert (call.name, call.arguments) == ("refund", {"order": "A-17", "amount": 25.0})
    assert result.text == "done: refunded 25.00 on A-17"
    lines = log.read_text().splitlines()
    counts = collections.Counter(" ".join(line.split()[:2]) for line in lines)
    assert counts == {"model 0": 1, "model 1": 1, "tool refund": 1}  # the approved call ran once
    async with SQLiteStorage(db, session_id=session) as s:
        history = await s.load()
    assert [m.role for m in history] == [Role.USER, Role.ASSISTANT, Role.TOOL, Role.ASSISTANT]
    assert history[1].metadata["goagent.decisions"] == {
        "call-1": {"decision": "approve", "token": call.token}
    }
    assert validate_transcript(history, allow_pending=False) == []


async def test_a_worker_sigkilled_after_its_claim_committed_is_replaced_and_the_call_runs_once(
    temporal: WorkflowEnvironment, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # durable11: the claim (goagent.memory.settle) committed, then its worker died before it
    # could report; the retry on the next worker finds the wait settled by this claim (its own
    # id, goagent.claim) and the run goes on: the approved call runs once.
    queue, log, db, session = (
        f"q-{uuid.uuid4().hex[:8]}",
        tmp_path / "calls.log",
        tmp_path / "chat.db",
        "ticket-10",
    )
    flag = tmp_path / "killed"
    monkeypatch.setenv("GOAGENT_KILL_AFTER_SETTLE", str(flag))
    durable = durable_approval_app.durable_agent(db, queue)
    first = start_worker(APP, temporal, queue, str(db), log=log)
    second = None
    try:
        handle = await durable.start(temporal.client, "refund A-17", session_id=session)
        async for event in durable.events(handle):
            if event["type"] == "pending":
                break
        (call,) = await durable.pending(handle)
        await durable.decide(handle, {call.id: Approve(token=call.token)})
        first.wait()  # it claims, then dies
        assert first.returncode == -signal.SIGKILL
        assert flag.exists()
        second = start_worker(APP, temporal, queue, str(db), log=log)
        result = await result_of(handle)
    finally:
        stop(first)
        if second is not None:
            stop(second)

    assert result.text == "done: refunded 25.00 on A-17"
    counts = collections.Counter(
        " ".join(line.split()[:2]) for line in log.read_text().splitlines()
    )
    assert counts == {"model 0": 1, "model 1": 1, "tool refund": 1}
    async with SQLiteStorage(db, session_id=session) as s:
        history = await s.load()
    assert history[1].metadata["goagent.claim"].endswith(f":claim:{call.token}")
    assert validate_transcript(history, allow_pending=False) == []
