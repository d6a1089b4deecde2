"""``python -m goagent_py`` interrupted while Python imports the package itself (before its
``__main__`` runs) ends as the console script does: 130, no traceback (docs/cli.md).

The trip is a ``sitecustomize`` module, which Python imports at start-up, before ``-m``
imports the package: a finder at the head of ``sys.meta_path`` sends SIGINT when a module of
the package's ``__init__`` is looked up, deterministically.
"""

from __future__ import annotations

import os
import subprocess
import sys
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
"""


def _run_m(
    module: str, args: list[str], trip: str, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(_TRIP.format(module=trip))
    env = {
        **os.environ,
        "GOAGENT_HOME": str(tmp_path / "home"),
        "PYTHONPATH": os.pathsep.join([str(site), str(ROOT)]),
    }
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("goagent_py", ["chat"]),
        ("goagent_py.serve", ["--help"]),
        ("goagent_py.mcp", ["serve", "--help"]),
    ],
)
def test_ctrl_c_while_python_m_imports_the_package_ends_without_a_traceback(
    module: str, args: list[str], tmp_path: Path
) -> None:
    done = _run_m(module, args, "goagent_py.agent", tmp_path)
    # was: "Traceback ... KeyboardInterrupt" from runpy, and the process died by the signal
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stdout == ""


def test_python_m_goagent_py_still_runs_and_ctrl_c_still_reaches_the_command(
    tmp_path: Path,
) -> None:
    """The guard lasts only while the package imports: later, Ctrl-C is the command's own."""
    done = _run_m("goagent_py", ["chat"], "goagent_py.cli._common", tmp_path)
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130, (done.returncode, done.stderr)
    help_ = subprocess.run(
        [sys.executable, "-m", "goagent_py", "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=tmp_path,
    )
    assert help_.returncode == 0, help_.stderr
    assert "usage" in help_.stdout


def test_importing_the_package_elsewhere_leaves_sigint_alone() -> None:
    program = (
        "import signal, goagent_py; "
        "print(signal.getsignal(signal.SIGINT) is signal.default_int_handler)"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.stdout.strip() == "True", done.stderr
