"""``goagent-py serve --workers N``, the command itself: started, used, stopped with Ctrl-C; a
worker that cannot start stops the server (docs/serve.md, "Several worker processes")."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from goagent_py.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
# An OpenAI-compatible server that is never called: the workers start without a model call.
_SERVE = ("--memory", "none", "--port", "0", "--base-url", "http://127.0.0.1:9/v1")


def _serve(home: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "GOAGENT_HOME": str(home), "PYTHONPATH": str(ROOT)}
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        env.pop(key, None)
    return subprocess.Popen(
        [sys.executable, "-m", "goagent_py", "serve", "--workers", "2", *_SERVE, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=home,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


@pytest.mark.slow
def test_serve_with_two_workers_answers_and_ctrl_c_stops_them_all(tmp_path: Path) -> None:
    with _serve(tmp_path, "--provider", "openai:some-model") as process:
        assert process.stderr is not None
        lines: list[str] = []
        try:
            for line in process.stderr:
                lines.append(line)
                if line.startswith("open http://"):
                    break
            url = lines[-1].split()[1].rstrip("/")
            pids = [int(p) for p in lines[-2].split("(")[1].rstrip(")\n").split(", ")]
            assert len(pids) == 2
            assert httpx.get(f"{url}/api/me", timeout=60).json()["user"] == "local"
            made = httpx.post(f"{url}/api/threads", json={}, timeout=60)
            assert made.status_code == 201
            process.send_signal(signal.SIGINT)
            rest = process.stderr.read()
            code = process.wait(timeout=120)
        finally:
            if process.poll() is None:
                process.kill()
    assert code == 130, "".join(lines) + rest
    assert "Traceback" not in rest
    for pid in pids:  # no worker left behind
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


@pytest.mark.slow
def test_a_worker_that_cannot_start_stops_the_server(tmp_path: Path) -> None:
    with _serve(tmp_path, "--provider", "nonsense:model") as process:
        assert process.stderr is not None
        stderr = process.stderr.read()
        code = process.wait(timeout=120)
    assert code == 1, stderr
    assert "ended while starting (exit code 2); stopping the server" in stderr
    assert "nonsense" in stderr  # the worker's own message says what was wrong


def test_workers_must_be_a_whole_number_from_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["serve", "--workers", "0"]) == 2
    assert "'0' is not a number of worker processes from 1" in capsys.readouterr().err
