"""An exception that escapes the command while the embedder loads ends the process cleanly.

The embedder loads in a daemon thread (``goagent_py.cli._setup.load_in_background``). An
exception escaping ``main()`` (a failing import, a bug) skipped the quick exit that ends the
process while the load runs, so the interpreter finalised with the load inside ONNX Runtime:
"terminate called without an active exception" and exit 134 about one time in three. These run
the real command as its console script does, with the real embedder; the failure is injected
once ONNX Runtime is being imported by the load, and a last exit handler reports whether the
load thread was still running when the interpreter went on to finalise.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PROGRAM = """
import atexit, sys, threading, time

def _last():  # registered first: runs after every other exit handler
    if any(t.name == "goagent-embedder-load" and t.is_alive() for t in threading.enumerate()):
        sys.stderr.write("LOAD STILL RUNNING AT FINALISATION\\n")
        sys.stderr.flush()

atexit.register(_last)
import goagent_py.cli._input as _input

def _failing(*args, **kwargs):
    while "onnxruntime" not in sys.modules:  # the load is under way
        time.sleep(0.005)
    raise RuntimeError("injected failure")

_input.line_source = _failing
from goagent_py.cli.main import main
{call}
"""


def _run(call: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GOAGENT_HOME": str(tmp_path / "home"), "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-c", _PROGRAM.format(call=call)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
    )


def _clean(done: subprocess.CompletedProcess[str]) -> None:
    for crash in ("terminate called", "LOAD STILL RUNNING", "ptrace", "Aborted"):
        assert crash not in done.stderr, done.stderr[-3000:]
    assert done.returncode == 1, (done.returncode, done.stderr[-3000:])
    assert "RuntimeError: injected failure" in done.stderr


@pytest.mark.slow
@pytest.mark.needs_extra("local", "vector")
def test_an_exception_escaping_the_command_while_the_embedder_loads_exits_cleanly(
    tmp_path: Path,
) -> None:
    # As the console script calls it: main() with no arguments reads sys.argv.
    _clean(_run("sys.argv[1:] = ['chat', '--provider', 'local']\nsys.exit(main())", tmp_path))


@pytest.mark.slow
@pytest.mark.needs_extra("local", "vector")
def test_a_program_calling_main_in_process_exits_cleanly_after_its_exception(
    tmp_path: Path,
) -> None:
    # main(argv) never ends the process itself; the program's own exit must still be clean.
    _clean(_run("main(['chat', '--provider', 'local'])", tmp_path))
