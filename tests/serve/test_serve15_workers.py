"""``serve --workers N``, the parent's side (docs/serve.md, "Several worker processes"): a
worker that keeps ending as soon as it serves is started again after a growing wait, and the
server stops (exit 1) when they keep ending; the server's private folder in the temporary
folder is removed on every end, also when the parent is killed.

Real processes (``tests/serve/workers14_app.py``); nothing waits on time: a test reads the
parent's output until the line it waits for, or waits for processes to end.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from goagent_py.serve import _supervise

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]


def _parent(tmp_path: Path, *more: str, workers: int = 2) -> subprocess.Popen[str]:
    ports = tmp_path / "ports"
    ports.mkdir(exist_ok=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    return subprocess.Popen(
        [
            sys.executable,
            str(HERE / "workers14_app.py"),
            str(tmp_path / "serve.db"),
            str(ports),
            str(workers),
            *more,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _folders_of(pid: int) -> list[Path]:
    return sorted(Path(tempfile.gettempdir()).glob(f"goagent-serve-{pid}-*"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone(pids: list[int]) -> None:
    """Wait until every one of ``pids`` has ended (a bound only against a hang)."""
    deadline = time.monotonic() + 300
    while any(_alive(p) for p in pids):
        assert time.monotonic() < deadline, "a worker outlived its parent"
        time.sleep(0.05)


def _ready(process: subprocess.Popen[str]) -> list[int]:
    assert process.stdout is not None
    assert process.stdout.readline().startswith("listening ")
    line = process.stdout.readline()
    assert line.startswith("ready "), line
    return [int(p) for p in line.split()[1:]]


@pytest.mark.slow
def test_workers_that_keep_ending_are_started_after_a_growing_wait_then_the_server_stops(
    tmp_path: Path,
) -> None:
    settings = '{"_CRASH_WINDOW": 3600, "_CRASH_LIMIT": 4, "_BACKOFF_FIRST": 0.01}'
    process = _parent(tmp_path, "crash", settings)
    assert process.stderr is not None
    lines: list[str] = []
    try:
        for line in process.stderr:
            lines.append(line)
            # Without a limit the parent starts workers for ever: a bound for the test.
            assert len(lines) < 40, "".join(lines)
        code = process.wait(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        for stream in (process.stdout, process.stderr):
            assert stream is not None
            stream.close()
    said = "".join(lines)
    assert code == 1, said
    again = [line for line in lines if "ended (exit code 3)" in line]
    assert len(again) == 4, said
    # At once the first time, then after 0.01 s, 0.02 s: the wait doubles.
    assert again[0].rstrip().endswith("its threads' runs are over; starting another")
    assert again[1].rstrip().endswith("starting another in 0.01 s")
    assert again[2].rstrip().endswith("starting another in 0.02 s")
    assert (
        "4 workers ended within 3600 s, each soon after it started: stopping the server"
        in (again[3])
    )
    assert "Traceback" not in said
    assert _folders_of(process.pid) == []


@pytest.mark.slow
def test_the_folder_of_a_killed_parent_goes_with_its_last_worker(tmp_path: Path) -> None:
    process = _parent(tmp_path)
    try:
        pids = _ready(process)
        (folder,) = _folders_of(process.pid)
        assert oct(folder.stat().st_mode & 0o777) == "0o700"
        process.kill()  # nothing of the parent runs to remove its folder
        process.wait()
        _gone(pids)  # the kernel's SIGTERM (PR_SET_PDEATHSIG) ends them cleanly
        assert not folder.exists()
    finally:
        if process.poll() is None:
            process.kill()
        process.communicate()


@pytest.mark.slow
def test_the_next_server_removes_the_folder_of_a_server_killed_whole(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    first = _parent(tmp_path / "a")
    second: subprocess.Popen[str] | None = None
    try:
        pids = _ready(first)
        (folder,) = _folders_of(first.pid)
        for pid in pids:  # the workers first: none of them lives on to remove it
            os.kill(pid, signal.SIGSTOP)
        first.kill()
        first.wait()
        for pid in pids:
            os.kill(pid, signal.SIGKILL)
        _gone(pids)
        assert folder.exists()
        (tmp_path / "b").mkdir()
        second = _parent(tmp_path / "b")
        _ready(second)
        assert not folder.exists()
        (own,) = _folders_of(second.pid)
        second.send_signal(signal.SIGINT)
        assert second.wait(timeout=120) == 128 + signal.SIGINT
        assert not own.exists()
    finally:
        for process in (first, second):
            if process is not None:
                if process.poll() is None:
                    process.kill()
                process.communicate()


def test_sweep_removes_only_folders_of_parents_that_are_gone(tmp_path: Path) -> None:
    me = os.getpid()
    started = _supervise._start_time(me)
    assert started is not None
    ended = subprocess.Popen(["true"])
    ended.wait()
    live = tmp_path / f"goagent-serve-{me}-{started}-live0001"
    reused = tmp_path / f"goagent-serve-{me}-{int(started) + 1}-reused01"  # another process
    dead = tmp_path / f"goagent-serve-{ended.pid}-12345-dead0001"
    for folder in (live, reused, dead):
        folder.mkdir()
        (folder / "threads.lock").write_bytes(b"")
    other = tmp_path / "elsewhere"
    other.mkdir()
    link = tmp_path / f"goagent-serve-{ended.pid}-12345-link0001"
    link.symlink_to(other)  # never followed nor removed
    afile = tmp_path / f"goagent-serve-{ended.pid}-12345-file0001"
    afile.write_text("")
    unrelated = tmp_path / "goagent-serve-notes"
    unrelated.mkdir()

    removed = _supervise.sweep(str(tmp_path))

    assert sorted(removed) == sorted([str(reused), str(dead)])
    for kept in (live, other, afile, unrelated):
        assert kept.exists()
    assert link.is_symlink()
    for gone in (reused, dead):
        assert not gone.exists()


def test_a_parent_that_cannot_start_leaves_no_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import socket
    import threading

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    listening = socket.socket()
    errors: list[BaseException] = []

    def outside_the_main_thread() -> None:
        try:  # signal handlers can only be set in the main thread: it fails at once
            _supervise.supervise("nowhere:nothing", None, listening=listening, workers=1)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=outside_the_main_thread)
    thread.start()
    thread.join()
    listening.close()
    assert [type(e) for e in errors] == [ValueError]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_run_followed_from_the_other_worker_goes_on_when_its_starter_leaves(
    tmp_path: Path,
) -> None:
    import httpx

    from tests.serve.test_workers14_processes import (
        _events,
        _headers,
        _release,
        _start,
        _stop,
        _texts,
        _thread,
    )

    served = _start(tmp_path)
    try:
        first, second = served.url(0), served.url(1)
        thread = _thread(first)
        fifo = tmp_path / "held"
        os.mkfifo(fifo)
        with httpx.stream(
            "POST",
            f"{first}/api/threads/{thread}/runs",
            headers=_headers(),
            json={"message": f"hold {fifo}"},
            timeout=120,
        ) as owner:
            mine = _events(owner.iter_lines())  # kept: a generator dropped closes the stream
            assert next(mine)["type"] == "RUN_STARTED"
            # Followed through the other worker (the request is forwarded to the run's).
            with httpx.stream(
                "GET", f"{second}/api/threads/{thread}/follow", headers=_headers(), timeout=120
            ) as followed:
                assert followed.status_code == 200, followed.read()
                events = _events(followed.iter_lines())
                assert next(events)["type"] == "RUN_STARTED"
                owner.close()  # the tab that started it is closed
                shown = httpx.get(
                    f"{second}/api/threads/{thread}", headers=_headers(), timeout=120
                ).json()
                assert shown["running"] is True
                _release(fifo)
                rest = list(events)
        assert rest[-1]["type"] == "RUN_FINISHED"
        assert rest[-1]["result"]["stopReason"] == "end_turn"
        assert _texts(rest) == [f"pid={served.pids[0]} n=1 held"]
    finally:
        _stop(served)
    assert _folders_of(served.process.pid) == []


def test_sweep_keeps_a_folder_whose_worker_answers(tmp_path: Path) -> None:
    """A parent this process cannot see (another pid namespace sharing the folder): its
    workers' sockets answer, and its folder stays."""
    import socket

    ended = subprocess.Popen(["true"])
    ended.wait()
    folder = tmp_path / f"goagent-serve-{ended.pid}-12345-other001"
    folder.mkdir()
    (folder / "1.sock").touch()  # a socket file nobody listens on (a plain file here)
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listening.bind(str(folder / "2.sock"))
    listening.listen(1)
    try:
        assert _supervise.sweep(str(tmp_path)) == []
        assert folder.exists()
    finally:
        listening.close()
    assert _supervise.sweep(str(tmp_path)) == [str(folder)]  # nobody answers now
    assert not folder.exists()
