"""The README example of docs/notes/codingui.md runs, in under 30 lines, and prints what its
comment says (the check tests/test_readme.py makes once the block is in README.md)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_under_30_lines_example_runs() -> None:
    notes = (ROOT / "docs" / "notes" / "codingui.md").read_text()
    (code,) = re.findall(r"```python\n(.*?)```", notes, re.S)
    assert len(code.splitlines()) < 30
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "allow edit_file a.py? yes",
        f"allow shell {sys.executable} a.py? yes",
        "a.py prints hi now.",
        "print('hi')",
    ]
    for expected in re.findall(r"#\s*(.+)$", code, re.M):
        assert expected.strip() in out.stdout
