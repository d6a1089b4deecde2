"""``goagent-py serve`` stopped by a signal in its first seconds: the real process, signalled.

The signal goes when serve says where it listens, the moment uvicorn starts (its lifespan, then
the socket) while the embedder still loads in the background: the two places where a Ctrl-C
used to end in a traceback (uvicorn's lifespan, cancelled) or an abort ("terminate called
without an active exception" from the embedder's native code at interpreter exit).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
_SERVE = ("--provider", "local", "--memory", "none", "--port", "0")


def _signal_when_announced(home: Path, sig: int) -> tuple[int, str]:
    env = {**os.environ, "GOAGENT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(key, None)
    with subprocess.Popen(
        [sys.executable, "-m", "goagent_py", "serve", *_SERVE],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=home,
        # A child of a shell's background job would inherit SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    ) as process:
        assert process.stderr is not None
        lines = []
        try:
            for line in process.stderr:
                lines.append(line)
                if line.startswith("open http://"):
                    process.send_signal(sig)
                    break
            rest = process.stderr.read()
            code = process.wait(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
    return code, "".join(lines) + rest


@pytest.mark.slow
@pytest.mark.needs_extra("local", "serve")
@pytest.mark.parametrize("attempt", range(3))
def test_ctrl_c_as_serve_starts_exits_130_without_a_traceback(tmp_path: Path, attempt: int) -> None:
    code, stderr = _signal_when_announced(tmp_path, signal.SIGINT)
    assert "Traceback" not in stderr
    assert "terminate called" not in stderr
    assert code == 130, stderr


@pytest.mark.slow
@pytest.mark.needs_extra("local", "serve")
def test_sigterm_as_serve_starts_exits_143_without_a_traceback(tmp_path: Path) -> None:
    code, stderr = _signal_when_announced(tmp_path, signal.SIGTERM)
    assert "Traceback" not in stderr
    assert code == 128 + signal.SIGTERM, stderr
