"""Every Python block of docs/scaling-out.md runs as it stands, against the real PostgreSQL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

DOC = Path(__file__).parents[2] / "docs" / "scaling-out.md"
BLOCKS = re.findall(r"```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.DOTALL)


def test_the_page_has_examples() -> None:
    assert len(BLOCKS) >= 2


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_a_doc_example_runs(index: int, pg_dsn: str, tmp_path: Path) -> None:
    script = tmp_path / f"example_{index}.py"
    script.write_text(BLOCKS[index], encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(DOC.parents[1]), "GOAGENT_PG_DSN": pg_dsn},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "GOAGENT_PG_DSN" not in done.stdout  # it ran against the server
