"""examples/pipeline.py runs offline and prints what its docstring promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_pipeline_example_prints_each_stage_and_the_total() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "pipeline.py")],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    ).stdout
    assert "[article/researcher] Notes: tidal power is predictable" in out
    assert "[article/reviewer] APPROVED." in out
    assert "stages: researcher -> writer -> reviewer; tokens: 180" in out
