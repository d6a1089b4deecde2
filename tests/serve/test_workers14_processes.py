"""``serve --workers N``: real worker processes on one socket, one SQLite file (docs/serve.md,
"Several worker processes").

The server is ``tests/serve/workers14_app.py`` run as a process (its parent and two workers);
each worker also serves a port of its own, so a test sends a request to the worker it names.
Nothing waits on time: a held model waits on a named pipe the test writes to, and the tests
read the streams until the event they wait for.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789ab"}


@dataclass
class Served:
    process: subprocess.Popen[str]
    ports: Path
    pids: list[int]
    port: int
    stderr: list[str] = field(default_factory=list)
    reader: threading.Thread | None = None

    def close(self) -> int:
        """Wait for the parent to end (it was signalled or killed); its exit code."""
        code = self.process.wait(timeout=120)
        if self.reader is not None:
            self.reader.join()
        assert self.process.stdout is not None
        assert self.process.stderr is not None
        self.process.stdout.close()
        self.process.stderr.close()
        return code

    def port_of(self, pid: int) -> int:
        return int((self.ports / str(pid)).read_text())

    def url(self, worker: int) -> str:
        return f"http://127.0.0.1:{self.port_of(self.pids[worker])}"


def _start(tmp_path: Path, workers: int = 2) -> Served:
    ports = tmp_path / "ports"
    ports.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(HERE)])}
    process = subprocess.Popen(
        [
            sys.executable,
            str(HERE / "workers14_app.py"),
            str(tmp_path / "serve.db"),
            str(ports),
            str(workers),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # A child of a shell's background job would inherit SIGINT ignored.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert process.stdout is not None
    assert process.stderr is not None
    served = Served(process, ports, [], 0)
    served.reader = threading.Thread(target=lambda: served.stderr.extend(process.stderr))  # type: ignore[arg-type]
    served.reader.start()
    served.port = int(process.stdout.readline().split()[1])
    ready = process.stdout.readline()
    assert ready.startswith("ready "), "".join(served.stderr)
    served.pids = [int(p) for p in ready.split()[1:]]
    return served


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _stop(served: Served) -> int:
    if served.process.poll() is None:
        served.process.send_signal(signal.SIGINT)
    return served.close()


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    found = _start(tmp_path)
    try:
        yield found
    finally:
        _stop(found)


def _headers(user: str = "alice") -> dict[str, str]:
    return {"authorization": f"Bearer {TOKENS[user]}"}


def _call(base: str, method: str, path: str, user: str = "alice", **kw: Any) -> httpx.Response:
    return httpx.request(method, base + path, headers=_headers(user), timeout=120, **kw)


def _thread(base: str, user: str = "alice") -> str:
    made = _call(base, "POST", "/api/threads", user, json={})
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


def _events(lines: Iterator[str]) -> Iterator[dict[str, Any]]:
    for line in lines:
        if line.startswith("data:"):
            yield json.loads(line[5:])


def _turn(base: str, thread: str, message: str, user: str = "alice") -> list[dict[str, Any]]:
    with httpx.stream(
        "POST",
        f"{base}/api/threads/{thread}/runs",
        headers=_headers(user),
        json={"message": message},
        timeout=120,
    ) as response:
        assert response.status_code == 200, response.read()
        return list(_events(response.iter_lines()))


def _answer(events: list[dict[str, Any]]) -> str:
    finished = [e for e in events if e["type"] == "RUN_FINISHED"]
    assert finished, events
    return str(finished[-1]["result"]["text"])


def _texts(events: list[dict[str, Any]]) -> list[str]:
    deltas: dict[str, str] = {}
    for e in events:
        if e["type"] == "TEXT_MESSAGE_CONTENT":
            deltas[e["messageId"]] = deltas.get(e["messageId"], "") + e["delta"]
    return list(deltas.values())


@contextlib.contextmanager
def _held_run(base: str, thread: str, fifo: Path) -> Iterator[tuple[str, Iterator[dict[str, Any]]]]:
    """A run whose model waits on ``fifo``; yields its id and its further events once the run
    has started."""
    os.mkfifo(fifo)
    with httpx.stream(
        "POST",
        f"{base}/api/threads/{thread}/runs",
        headers=_headers(),
        json={"message": f"hold {fifo}"},
        timeout=120,
    ) as response:
        assert response.status_code == 200
        events = _events(response.iter_lines())
        started = next(events)
        assert started["type"] == "RUN_STARTED"
        yield str(started["runId"]), events


def _release(fifo: Path) -> None:
    with open(fifo, "wb") as f:
        f.write(b"go")


def test_two_users_turns_on_two_workers_never_cross(served: Served) -> None:
    first, second = served.url(0), served.url(1)
    threads = {"alice": _thread(first, "alice"), "bob": _thread(second, "bob")}
    answers: dict[str, list[str]] = {"alice": [], "bob": []}

    def talk(user: str, turns: int) -> None:
        for i in range(turns):
            base = (first, second)[(i + (user == "bob")) % 2]  # each turn in the other worker
            answers[user].append(_answer(_turn(base, threads[user], f"{user} {i}", user)))

    talkers = [threading.Thread(target=talk, args=(u, 4)) for u in answers]
    for t in talkers:
        t.start()
    for t in talkers:
        t.join()
    pids = {str(p) for p in served.pids}
    for user, got in answers.items():
        assert len(got) == 4
        for i, text in enumerate(got):
            # The model saw the user's own history, whole, in whichever worker ran the turn.
            assert text.endswith(f"n={2 * i + 1} saw: {user} {i}"), got
        assert {t.split()[0][4:] for t in got} == pids  # both workers ran turns of each
        stored = _call(first, "GET", f"/api/threads/{threads[user]}/messages", user).json()
        said = [m for m in stored["messages"] if m["role"] == "user"]
        assert [m["text"] for m in said] == [f"{user} {i}" for i in range(4)]
    # Neither sees the other's thread, from either worker.
    for base in (first, second):
        listed = _call(base, "GET", "/api/threads", "bob").json()["threads"]
        assert [t["id"] for t in listed] == [threads["bob"]]
        assert _call(base, "GET", f"/api/threads/{threads['alice']}", "bob").status_code == 404


def test_steer_stop_and_busy_reach_the_run_in_the_other_worker(
    served: Served, tmp_path: Path
) -> None:
    first, second = served.url(0), served.url(1)
    thread = _thread(first)
    with _held_run(first, thread, tmp_path / "a") as (_, events):
        steered = _call(second, "POST", f"/api/threads/{thread}/steer", json={"message": "more"})
        assert steered.status_code == 200
        assert steered.json()["steered"] is True
        busy = _call(second, "POST", f"/api/threads/{thread}/runs", json={"message": "x"})
        assert busy.status_code == 409
        assert busy.json() == {"error": "a run is in progress in this thread; stop or steer it"}
        shown = _call(second, "GET", f"/api/threads/{thread}").json()
        assert shown["running"] is True
        _release(tmp_path / "a")
        rest = list(events)
    pid = served.pids[0]
    assert _texts(rest) == [f"pid={pid} n=1 held", f"pid={pid} n=3 saw: more"]
    # Stop, by thread and by run id, each sent to the worker that does not run it.
    for how in ("thread", "run"):
        fifo = tmp_path / f"stop-{how}"
        with _held_run(first, thread, fifo) as (run_id, events):
            if how == "thread":
                stopped = _call(second, "POST", f"/api/threads/{thread}/stop", json={})
            else:
                stopped = _call(second, "POST", f"/api/runs/{run_id}/stop", json={})
            assert stopped.status_code == 200
            assert stopped.json() == {"stopped": True}
            rest = list(events)
            _release(fifo)  # the model's thread in the worker
        assert rest[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
        assert not any("held" in t for t in _texts(rest))
    assert _call(second, "GET", f"/api/threads/{thread}").json()["running"] is False
    after = _answer(_turn(second, thread, "after"))
    assert after.startswith(f"pid={served.pids[1]} ")


def test_following_a_run_in_the_other_worker_streams_it(served: Served, tmp_path: Path) -> None:
    first, second = served.url(0), served.url(1)
    thread = _thread(first)
    fifo = tmp_path / "held"
    with (
        _held_run(first, thread, fifo) as (run_id, _),
        httpx.stream(
            "GET", f"{second}/api/threads/{thread}/follow", headers=_headers(), timeout=120
        ) as followed,
    ):
        assert followed.status_code == 200
        events = _events(followed.iter_lines())
        assert next(events)["runId"] == run_id
        _release(fifo)
        rest = list(events)
    assert _texts(rest) == [f"pid={served.pids[0]} n=1 held"]


def test_deleting_a_thread_whose_run_is_in_the_other_worker_ends_the_run_first(
    served: Served, tmp_path: Path
) -> None:
    first, second = served.url(0), served.url(1)
    thread = _thread(first)
    fifo = tmp_path / "held"
    with _held_run(first, thread, fifo) as (_, events):
        deleted = _call(second, "DELETE", f"/api/threads/{thread}")
        assert deleted.status_code == 200, deleted.text
        rest = list(events)  # the run was ended before the thread went
        _release(fifo)
    assert rest[-1]["type"] in ("RUN_FINISHED", "RUN_ERROR")
    for base in (first, second):
        assert _call(base, "GET", f"/api/threads/{thread}").status_code == 404
    # Nothing of the run was written after the delete: a new thread of that id has no rows.
    conn = sqlite3.connect(tmp_path / "serve.db")
    rows = conn.execute(
        "SELECT COUNT(*) FROM goagent_messages WHERE session_id LIKE ?", (f"%{thread}%",)
    ).fetchone()[0]
    conn.close()
    assert rows == 0


def test_an_approval_decided_in_the_other_worker_resumes_and_the_first_goes_on(
    served: Served,
) -> None:
    first, second = served.url(0), served.url(1)
    thread = _thread(first)
    events = _turn(first, thread, "approve")
    assert events[-1]["type"] == "RUN_FINISHED"
    assert events[-1]["outcome"]["type"] == "interrupt"
    pending = _call(second, "GET", f"/api/threads/{thread}/messages").json()["pending"]
    assert len(pending) == 1
    call_id = pending[0]["id"]
    decided = httpx.post(
        f"{second}/api/threads/{thread}/decisions",
        headers=_headers(),
        json={"decisions": {call_id: {"decision": "approve"}}},
        timeout=120,
    )
    assert decided.status_code == 200, decided.text
    assert _answer(list(_events(iter(decided.text.splitlines())))).startswith(
        f"pid={served.pids[1]} "
    )
    # The first worker read this thread before the other decided: its next turn starts from
    # the record (no second result for the decided call, no error).
    again = _answer(_turn(first, thread, "and now"))
    assert again.startswith(f"pid={served.pids[0]} ")
    assert again.endswith("saw: and now")
    stored = _call(first, "GET", f"/api/threads/{thread}/messages").json()["messages"]
    results = json.dumps(stored).count(f"guarded ran in {served.pids[1]}")
    assert results == 1, stored


def test_an_openai_clients_tool_results_reach_the_run_parked_in_the_other_worker(
    served: Served,
) -> None:
    first, second = served.url(0), served.url(1)
    lookup = {"type": "function", "function": {"name": "lookup", "parameters": {}}}
    asked = [{"role": "user", "content": "client tool"}]
    body = {"model": "m", "messages": asked, "tools": [lookup], "user": "parked"}
    called = _call(first, "POST", "/v1/chat/completions", json=body)
    assert called.status_code == 200, called.text
    message = called.json()["choices"][0]["message"]
    (call,) = message["tool_calls"]
    assert call["function"]["name"] == "lookup"
    # The run waits in the first worker for the client's result; the second sends it there.
    assert _call(second, "GET", "/api/threads/openai-parked").json()["running"] is True
    answered = [*asked, message, {"role": "tool", "tool_call_id": call["id"], "content": "42"}]
    body = {"model": "m", "messages": answered, "tools": [lookup], "user": "parked"}
    done = _call(second, "POST", "/v1/chat/completions", json=body)
    assert done.status_code == 200, done.text
    content = done.json()["choices"][0]["message"]["content"]
    assert content == f"pid={served.pids[0]} n=3 after the tool"


def test_change_events_reach_a_stream_in_the_other_worker(served: Served) -> None:
    first, second = served.url(0), served.url(1)
    seen: list[dict[str, Any]] = []
    with httpx.stream("GET", f"{second}/api/events", headers=_headers(), timeout=120) as stream:
        events = _events(stream.iter_lines())
        assert next(events)["type"] == "hello"
        thread = _thread(first)
        _turn(first, thread, "hello there")
        for event in events:
            seen.append(event)
            if event["type"] == "ran" and event["threadId"] == thread:
                break
    kinds = [e["type"] for e in seen if e["threadId"] == thread]
    assert kinds == ["created", "renamed", "running", "ran"], seen
    # "ran" is relayed once the turn's record is written: the list shows its time.
    listed = _call(second, "GET", "/api/threads").json()["threads"]
    assert listed[0]["id"] == thread
    assert listed[0]["title"] == "hello there"
    assert listed[0]["updated_at"] > listed[0]["created_at"]


def test_no_change_is_lost_while_the_other_worker_is_busy(served: Served) -> None:
    """The relay holds what a worker has not read yet: a Unix datagram queue holds 10
    (``net.unix.max_dgram_qlen``) and dropped the rest while the receiver was busy."""
    first, second = served.url(0), served.url(1)
    with httpx.stream("GET", f"{second}/api/events", headers=_headers(), timeout=120) as stream:
        events = _events(stream.iter_lines())
        assert next(events)["type"] == "hello"
        os.kill(served.pids[1], signal.SIGSTOP)  # the second worker reads nothing meanwhile
        try:
            made = [_thread(first) for _ in range(30)]
        finally:
            os.kill(served.pids[1], signal.SIGCONT)
        # One more from the same worker once the second reads again: the relay keeps order,
        # so when it comes every one before it has come (or was lost).
        last = _thread(first)
        seen: list[str] = []
        for event in events:
            if event["type"] == "created":
                seen.append(event["threadId"])
                if event["threadId"] == last:
                    break
    assert seen == [*made, last]


def test_a_login_cookie_from_one_worker_is_valid_in_the_other(served: Served) -> None:
    first, second = served.url(0), served.url(1)
    login = httpx.post(f"{first}/api/login", json={"token": TOKENS["bob"]}, timeout=120)
    assert login.status_code == 200, login.text
    cookie = login.cookies["goagent_session"]
    me = httpx.get(f"{second}/api/me", cookies={"goagent_session": cookie}, timeout=120)
    assert me.json()["user"] == "bob"
    out = httpx.post(
        f"{second}/api/logout", json={}, cookies={"goagent_session": cookie}, timeout=120
    )
    assert out.status_code == 200
    me = httpx.get(f"{first}/api/me", cookies={"goagent_session": cookie}, timeout=120)
    assert me.json()["authenticated"] is False


def test_the_private_socket_answers_only_the_servers_workers(served: Served) -> None:
    run_dirs = [p for p in Path("/tmp").glob("goagent-serve-*") if p.is_dir()]
    socks = [s for d in run_dirs for s in d.glob(f"{served.pids[0]}.sock")]
    assert len(socks) == 1
    assert oct(socks[0].parent.stat().st_mode & 0o777) == "0o700"
    transport = httpx.HTTPTransport(uds=str(socks[0]))
    with httpx.Client(transport=transport, base_url="http://localhost") as client:
        forged = client.get(
            "/api/threads",
            headers={**_headers(), "x-goagent-forward": "guess", "host": "localhost"},
        )
        assert forged.status_code == 403
        plain = client.get("/api/threads", headers=_headers())
        assert plain.status_code == 403


def test_a_worker_killed_mid_run_frees_its_thread(served: Served, tmp_path: Path) -> None:
    first, second = served.url(0), served.url(1)
    thread = _thread(first)
    killed = served.pids[0]
    fifo = tmp_path / "held"
    with _held_run(first, thread, fifo) as (_, events):
        assert _call(second, "GET", f"/api/threads/{thread}").json()["running"] is True
        os.kill(killed, signal.SIGKILL)
        with pytest.raises(httpx.HTTPError):
            list(events)  # the stream breaks when the worker dies
    # The kernel let go of its lease: the other worker takes the thread at once.
    assert _call(second, "GET", f"/api/threads/{thread}").json()["running"] is False
    answer = _answer(_turn(second, thread, "next"))
    assert answer == f"pid={served.pids[1]} n=2 saw: next"
    stored = _call(second, "GET", f"/api/threads/{thread}/messages").json()["messages"]
    assert [(m["role"], m["text"]) for m in stored] == [
        ("user", f"hold {fifo}"),
        ("user", "next"),
        ("assistant", answer),
    ]
    # The parent starts another worker in its place (it writes its test port once it runs).
    while len(list(served.ports.iterdir())) < 3:
        assert served.process.poll() is None
        time.sleep(0.05)
    assert "ended (killed by SIGKILL)" in "".join(served.stderr)


def test_ctrl_c_stops_every_worker(tmp_path: Path) -> None:
    served = _start(tmp_path)
    thread = _thread(served.url(1))
    _turn(served.url(1), thread, "hi")
    assert _stop(served) == 128 + signal.SIGINT
    assert not [pid for pid in served.pids if _alive(pid)]
    assert "Traceback" not in "".join(served.stderr), "".join(served.stderr)


def test_workers_end_with_a_killed_parent(tmp_path: Path) -> None:
    served = _start(tmp_path)
    served.process.kill()
    served.close()
    # The kernel sends each worker SIGTERM when its parent dies (PR_SET_PDEATHSIG).
    deadline = time.monotonic() + 120
    while any(_alive(pid) for pid in served.pids):
        assert time.monotonic() < deadline, "a worker outlived its killed parent"
        time.sleep(0.05)
