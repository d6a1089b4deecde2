"""Every example runs and prints what its docstring promises."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def run(script: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, str(ROOT / "examples" / script), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
        cwd=ROOT,
    )
    return out.stdout


def test_calculator_reads_the_tool_error_and_answers() -> None:
    out = run("calculator.py")
    assert "[error] Error: tool 'calculate' raised ZeroDivisionError" in out
    assert "-> [ok] 42.0" in out
    assert "answer: 10 / 0 is undefined, but 7 x 6 = 42." in out


def test_chatbot_remembers_earlier_turns() -> None:
    out = run("chatbot.py")
    assert "Before that you said: 'I like chess.'" in out
    assert "(memory holds 6 messages)" in out


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "examples").glob("*.py")))
def test_every_example_has_a_docstring_saying_how_to_run_it(script: str) -> None:
    text = (ROOT / "examples" / script).read_text()
    assert text.startswith('"""')
    assert f"python examples/{script}" in text.split('"""')[1]
