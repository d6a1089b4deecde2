"""A worker killed during an MCP tool call: another worker connects to its own server and
finishes the run; the tool list and the completed calls come from the history, not again.

Workers are real processes (``durable_mcp_app.py``), each starting its own MCP server
(``durable_mcp_server.py``) over stdio, on a real Temporal dev server.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import uuid
from pathlib import Path

import durable_mcp_app  # tests/durable/durable_mcp_app.py
import pytest
from temporalio.testing import WorkflowEnvironment
from worker_process import start_worker, stop  # tests/durable/worker_process.py

from goagent_py.durable._client import result_of

pytest.importorskip("mcp.server.mcpserver", reason="the mcp extra (SDK 2.x) is not installed")
pytestmark = pytest.mark.slow

APP = Path(__file__).parent / "durable_mcp_app.py"


def activities_scheduled(history: object) -> list[str]:
    return [
        e.activity_task_scheduled_event_attributes.activity_type.name
        for e in history.events  # type: ignore[attr-defined]
        if e.HasField("activity_task_scheduled_event_attributes")
    ]


async def test_a_worker_killed_during_an_mcp_call_is_replaced_by_one_with_its_own_server(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    queue, log = f"q-{uuid.uuid4().hex[:8]}", tmp_path / "calls.log"
    first = start_worker(
        APP,
        temporal,
        queue,
        log=log,
        block=True,
        stderr=subprocess.PIPE,  # its BLOCKED line
    )
    second = None
    try:
        durable = durable_mcp_app.durable_agent(queue)
        handle = await durable.start(temporal.client, "go")
        assert first.stderr is not None
        # Model call 1, the note and model call 2 are done; the slow call is in flight now.
        for line in first.stderr:
            if line.strip() == "BLOCKED":
                break
        os.kill(first.pid, signal.SIGKILL)
        first.wait()
        assert first.returncode == -signal.SIGKILL
        second = start_worker(APP, temporal, queue, log=log, stderr=subprocess.DEVNULL)
        result = await result_of(handle)
    finally:
        stop(first)
        if second is not None:
            stop(second)

    assert result.text == "done: noted a, slow 2 done"
    counts = collections.Counter(log.read_text().splitlines())
    # Completed calls ran once; only the MCP call in flight when the worker died ran again,
    # on the second worker's own server.
    assert counts == {"model 0": 1, "model 1": 1, "model 2": 1, "mcp note a": 1, "mcp slow 2": 2}
    scheduled = activities_scheduled(await handle.fetch_history())
    assert scheduled.count("goagent.mcp.list.mcpcrash.crashy") == 1  # listed once, recorded
    assert scheduled.count("goagent.mcp.call.mcpcrash.crashy") == 2  # two calls (one retried)
