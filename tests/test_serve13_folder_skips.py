"""A folder of tests that needs an extra, named on pytest's command line on an install without
that extra (the core-only CI job), is skipped, naming the extra: a skip raised while pytest loads
a folder's conftest named on the command line stops pytest with a traceback instead."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent

# Runs pytest with the extras' packages made impossible to import, as on a core-only install.
_RUNNER = """
import importlib.machinery
import sys

BLOCKED = {"starlette", "ag_ui", "uvicorn", "a2a", "temporalio", "mcp"}

class Uninstalled(importlib.machinery.PathFinder):
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            return None  # what the path finder says of a package that is not installed
        return super().find_spec(name, path, target)

sys.meta_path[:] = [
    Uninstalled if f is importlib.machinery.PathFinder else f for f in sys.meta_path
]
import pytest

sys.exit(pytest.main(sys.argv[1:]))
"""


_EXTRA = {"serve": "serve", "a2a": "a2a", "mcp": "mcp", "durable": "temporal"}


@pytest.mark.parametrize("folder", ["serve", "a2a", "mcp", "durable"])
def test_a_folder_without_its_extra_is_skipped_not_a_traceback(folder: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _RUNNER, "-p", "no:cacheprovider", "-q", "-rs", str(TESTS / folder)],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=TESTS.parent,
    )
    out = done.stdout + done.stderr
    assert "Traceback" not in out, out[-3000:]
    # 5: no test ran (every module was skipped while collected), as for any skipped module
    assert done.returncode in (0, 5), out[-3000:]
    assert " passed" not in out, out[-3000:]
    assert " failed" not in out, out[-3000:]
    assert f'needs the "{_EXTRA[folder]}" extra' in out, out[-3000:]
