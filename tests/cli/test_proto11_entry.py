"""Every ``python -m goagent_py...`` entry point ends with 130 and no traceback on a Ctrl-C
while it still imports, wherever the import is: the package's ``__init__``, the subpackage's
``__init__``, the ``__main__`` module's own imports, the command's module (docs/cli.md).

The package's guard used to end with the package's ``__init__``: ``python -m goagent_py.serve``
then imported ``goagent_py.serve`` and ``goagent_py.serve.run`` unguarded, and a Ctrl-C there
printed "Traceback ... KeyboardInterrupt" and the process died by the signal. Once the command
runs, Ctrl-C is its own again (``--help`` still works, an interrupted ``serve`` still ends
through its own handler).

The trip is a ``sitecustomize`` module, imported at start-up before ``-m`` looks the module up:
a finder at the head of ``sys.meta_path`` sends SIGINT when the chosen module is looked up.
"""

from __future__ import annotations

import ast
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
    module: str, args: list[str], trip: str | None, tmp_path: Path
) -> subprocess.CompletedProcess[str]:
    paths = [str(ROOT)]
    if trip is not None:
        site = tmp_path / "site"
        site.mkdir()
        (site / "sitecustomize.py").write_text(_TRIP.format(module=trip))
        paths.insert(0, str(site))
    env = {
        **os.environ,
        "GOAGENT_HOME": str(tmp_path / "home"),
        "PYTHONPATH": os.pathsep.join(paths),
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
    ("module", "args", "trip"),
    [
        ("goagent_py.serve", ["--help"], "goagent_py.serve"),  # the subpackage's __init__
        ("goagent_py.serve", ["--help"], "goagent_py.serve.run"),  # __main__'s own import
        ("goagent_py.mcp", ["serve", "--help"], "goagent_py.mcp"),
        ("goagent_py.mcp", ["serve", "--help"], "goagent_py.cli._mcp"),
        ("goagent_py.coding", ["--help"], "goagent_py.coding.repl"),
        ("goagent_py", ["--help"], "goagent_py.cli.main"),
        ("goagent_py", ["chat"], "goagent_py.cli._common"),  # cli.main's own imports
    ],
)
def test_ctrl_c_while_a_python_m_entry_point_imports_ends_with_130_and_no_traceback(
    module: str, args: list[str], trip: str, tmp_path: Path
) -> None:
    done = _run_m(module, args, trip, tmp_path)
    # was, for goagent_py.serve and goagent_py.mcp: "Traceback ... KeyboardInterrupt", -2
    assert "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 130, (done.returncode, done.stderr)
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("goagent_py.serve", ["--help"]),
        ("goagent_py.mcp", ["serve", "--help"]),
        ("goagent_py", ["--help"]),
    ],
)
def test_the_entry_points_still_run_once_imported(
    module: str, args: list[str], tmp_path: Path
) -> None:
    done = _run_m(module, args, None, tmp_path)
    assert done.returncode == 0, done.stderr
    assert "usage" in done.stdout


@pytest.mark.parametrize("module", ["goagent_py", "goagent_py.serve"])
def test_the_command_gets_its_own_ctrl_c_back_once_it_runs(module: str, tmp_path: Path) -> None:
    """The guard ends as the command starts: SIGINT is Python's default handler again."""
    probe = tmp_path / "probe"
    probe.mkdir()
    (probe / "sitecustomize.py").write_text(
        "import atexit, signal, sys\n"
        "atexit.register(lambda: sys.stderr.write('handler default: %s\\n' % "
        "(signal.getsignal(signal.SIGINT) is signal.default_int_handler)))\n"
    )
    env = {
        **os.environ,
        "GOAGENT_HOME": str(tmp_path / "home"),
        "PYTHONPATH": os.pathsep.join([str(probe), str(ROOT)]),
    }
    done = subprocess.run(
        [sys.executable, "-m", module, "--help"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "handler default: True" in done.stderr, done.stderr


def _main_blocks(path: Path) -> list[ast.If]:
    tree = ast.parse(path.read_text())
    return [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Compare)
        and isinstance(node.test.left, ast.Name)
        and node.test.left.id == "__name__"
    ]


def test_every_runnable_module_of_the_package_hands_ctrl_c_back_through_the_guard() -> None:
    """One mechanism: each module ``python -m`` can run ends the guard as its command starts
    (else Ctrl-C would stay an exit without the command's own handling)."""
    missing = []
    for path in sorted((ROOT / "goagent_py").rglob("*.py")):
        for block in _main_blocks(path):
            source = ast.unparse(block)
            if "_main_guard" not in source and "run_command(" not in source:
                missing.append(str(path.relative_to(ROOT)))
    assert missing == []
