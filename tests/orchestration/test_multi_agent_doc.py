"""Every Python block of docs/multi-agent.md runs as it stands."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).parents[2] / "docs" / "multi-agent.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) >= 3


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_a_doc_example_runs(index: int, tmp_path: Path) -> None:
    script = tmp_path / f"example_{index}.py"
    script.write_text(BLOCKS[index], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        cwd=DOC.parents[1],
        env={"PYTHONPATH": str(DOC.parents[1]), "PATH": "/usr/bin:/bin"},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_the_mermaid_shown_is_what_the_example_prints(tmp_path: Path) -> None:
    text = DOC.read_text(encoding="utf-8")
    (shown,) = re.findall(r"```mermaid\n(.*?)```", text, re.DOTALL)
    (example,) = [b for b in BLOCKS if "graph.mermaid()" in b]
    script = tmp_path / "mermaid_example.py"
    script.write_text(example, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(DOC.parents[1]), "PATH": "/usr/bin:/bin"},
        timeout=120,
        check=True,
    )
    assert done.stdout.strip() == shown.strip()
