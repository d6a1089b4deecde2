"""A Ctrl-C while the command still imports (before ``main()`` runs) ends it cleanly.

The console script that pip writes for ``[project.scripts]`` imports its function's module
first; a SIGINT during those imports printed a Python traceback and the process died by the
signal. These tests run the entry point exactly as that script does (read from pyproject) and
send SIGINT to the process while a chosen module is being imported, deterministically: a
finder at the head of ``sys.meta_path`` signals when the module is looked up.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_TRIP = """
import os, signal, sys
class _Trip:
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            os.kill(os.getpid(), signal.SIGINT)  # what Ctrl-C sends, now, mid-import
        return None
sys.meta_path.insert(0, _Trip())
sys.argv[1:] = {argv!r}
"""


def _console_script() -> str:
    """The text pip's installer writes for the ``goagent-py`` entry point."""
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    module, function = scripts["goagent-py"].split(":")
    return f"import sys\nfrom {module} import {function}\nsys.exit({function}())\n"


def _interrupted(program: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GOAGENT_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )


@pytest.mark.parametrize(
    ("argv", "module"),
    [
        (["chat"], "goagent_py.agent"),  # inside the package's own __init__
        (["chat"], "goagent_py.cli._common"),  # inside goagent_py.cli.main
        (["serve", "--help"], "goagent_py.serve.run"),  # the parser's imports
        (["code", "--help"], "goagent_py.coding.repl"),  # code's own parser
    ],
)
def test_ctrl_c_during_the_entry_points_imports_ends_without_a_traceback(
    argv: list[str], module: str, tmp_path: Path
) -> None:
    done = _interrupted(_TRIP.format(module=module, argv=argv) + _console_script(), tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stdout == ""
