"""Worker processes for the crash tests: a worker app started on the real Temporal dev server
(it prints READY once it polls), and stopped or killed at will. Not a test module."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

ROOT = Path(__file__).parents[2]


def start_worker(
    app: Path,
    temporal: WorkflowEnvironment,
    *args: str,
    log: Path,
    block: bool = False,
    stderr: int | None = None,
) -> subprocess.Popen[str]:
    """Run ``app ADDRESS *args`` until it is READY; ``block`` sets GOAGENT_BLOCK for it."""
    env = {
        **os.environ,
        "PYTHONPATH": f"{ROOT}{os.pathsep}{app.parent}",
        "GOAGENT_LOG": str(log),
    }
    env.pop("GOAGENT_BLOCK", None)
    if block:
        env["GOAGENT_BLOCK"] = "1"
    address = temporal.client.service_client.config.target_host
    proc = subprocess.Popen(
        [sys.executable, str(app), address, *args],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        env=env,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "READY"
    return proc


def stop(proc: subprocess.Popen[str]) -> None:
    """Kill the worker if it still runs, and close its pipes."""
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    for stream in (proc.stdout, proc.stderr):
        if stream is not None:
            stream.close()
