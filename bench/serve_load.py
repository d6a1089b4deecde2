"""Load on ``goagent-py serve``: 50 concurrent users x 5 turns against one uvicorn server.

Run with ``python bench/serve_load.py [--users 50] [--turns 5] [--peer] [--rounds N]
[--py-spy server.raw] [--raw-client]`` (never collected as a test). ``--peer`` measures
pydantic-ai's AG-UI server on the same scripted answer after ours, in the same run (``bench/peers/
serve_pydantic_ai.py``, in its own virtualenv under ``$PEERBENCH_VENVS``, default
``/tmp/peerbench-venvs``, created on first use); ``--rounds`` alternates the two N times.
The server runs in a process of its own (uvicorn on a real localhost
port), the load generator in this one, so the two never share an interpreter lock. The server
has bearer-token auth (one token per user) and a real SQLite file; the model is a
ScriptedProvider (a fixed 24-word answer streamed word by word), so the figures are the server's
own cost: auth, thread lookup, session, SQLite writes (synced group commits), SSE framing. With
``--py-spy FILE`` the server runs under ``py-spy record`` (raw collapsed stacks in FILE; add
``--gil`` to sample only the thread holding the GIL, i.e. where the CPU goes).

The users speak through httpx, or with ``--raw-client`` through a minimal HTTP/1.1 client on
asyncio streams: httpx costs more CPU per turn than the server, and the two share the machine.

Reported: errors, cross-user rows (a user's thread holding another user's message, via the API
and directly in the database), and latency of a turn: time to first text delta and to the end
of the stream (p50/p95/max), plus turns per second, and the server's resident memory after
the load (its ScriptedProvider keeps no request records, ``keep_requests=0``: keeping them all, the
default for tests, costs memory that grows with the square of the turns; see
bench/scripted_records.py).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from goagent_py import Agent
from goagent_py.serve import ThreadContext, TokenAuth, create_app
from goagent_py.serve.run import event_loop_factory
from goagent_py.testing import ScriptedProvider

ANSWER = " ".join(f"word{i}" for i in range(24))


class _RawResponse:
    def __init__(self, status: int, reader: asyncio.StreamReader, length: int | None) -> None:
        self.status_code = status
        self._reader = reader
        self._length = length  # None: chunked
        self._body = b""
        self._done = False

    def raise_for_status(self) -> None:
        if self.status_code >= 400:
            raise RuntimeError(f"HTTP {self.status_code}: {self._body[:200]!r}")

    def json(self) -> Any:
        return json.loads(self._body)

    async def _chunks(self) -> Any:
        if self._done:
            return
        if self._length is not None:
            self._done = True
            yield await self._reader.readexactly(self._length)
            return
        while True:
            size = int((await self._reader.readline()).split(b";")[0], 16)
            data = await self._reader.readexactly(size + 2)
            if size == 0:
                self._done = True
                return
            yield data[:-2]

    async def event_lists(self) -> Any:
        """The SSE events' data parsed, a list per chunk received: every ``data:`` line of the
        chunk in one ``json.loads`` (a line split across chunks waits for its end)."""
        rest = b""
        async for chunk in self._chunks():
            *lines, rest = (rest + chunk).split(b"\n")
            data = [line[5:] for line in lines if line[:5] == b"data:"]
            if data:
                yield json.loads(b"[%s]" % b",".join(data))
        if rest[:5] == b"data:":
            yield [json.loads(rest[5:])]


class _RawClient:
    """The part of ``httpx.AsyncClient`` the users use, on one keep-alive HTTP/1.1 connection
    of asyncio streams (``--raw-client``): httpx costs the load generator ~10 ms of CPU a turn,
    more than the server, on the same two cores."""

    def __init__(self, base_url: str, headers: dict[str, str] | None = None, **_: Any) -> None:
        self._host, port = base_url.removeprefix("http://").split(":")
        self._port = int(port)
        self._headers = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        self._streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def __aenter__(self) -> _RawClient:
        self._streams = await asyncio.open_connection(self._host, self._port)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._streams is not None:
            self._streams[1].close()

    async def _send(
        self, path: str, body: Any, headers: dict[str, str] | None = None
    ) -> _RawResponse:
        assert self._streams is not None
        reader, writer = self._streams
        data = json.dumps(body).encode()
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        head = (
            f"POST {path} HTTP/1.1\r\nhost: {self._host}:{self._port}\r\n{self._headers}{extra}"
            f"content-type: application/json\r\ncontent-length: {len(data)}\r\n\r\n"
        )
        writer.write(head.encode() + data)
        status = int((await reader.readline()).split()[1])
        length: int | None = None
        while (line := await reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            if name.lower() == "content-length":
                length = int(value)
        return _RawResponse(status, reader, length)

    async def post(self, path: str, json: Any) -> _RawResponse:
        response = await self._send(path, json)
        response._body = b"".join([c async for c in response._chunks()])
        return response

    @contextlib.asynccontextmanager
    async def stream(
        self, method: str, path: str, json: Any, headers: dict[str, str] | None = None
    ) -> Any:
        response = await self._send(path, json, headers)
        yield response
        async for _ in response._chunks():  # the rest of the body, if any
            pass


_CLIENT: Any = httpx.AsyncClient
_CALLGRIND = ""  # --callgrind FILE: the server under valgrind's callgrind
_STRACE = ""  # --strace FILE: strace -c -f attached to the server for the turns
_LOOP = "auto"  # --loop: the server's event loop, chosen as ``goagent-py serve --loop`` does
_WORKERS = 1  # --workers: worker processes, as ``goagent-py serve --workers``


def _app(db: str, users: int, turns: int) -> Any:
    tokens = _tokens(users)
    # No request records: the test double's default keeps a snapshot of every request (the
    # whole conversation each turn), CPU and memory that are the bench's, not the server's.
    provider = ScriptedProvider(*([ANSWER] * (users * turns)), keep_requests=0)

    def factory(ctx: ThreadContext) -> Agent:
        return Agent(provider=provider, model="scripted", short_term_memory=ctx.short_term_memory)

    return create_app(factory, storage_path=db, auth=TokenAuth(tokens))


def _serve(port_file: str, db: str, users: int, turns: int) -> None:
    """The server process: bind a free port, write it to ``port_file``, serve until killed
    (with ``--workers N`` above 1, as ``goagent-py serve --workers N``: N worker processes
    on the socket, the port written once they all serve)."""
    if _WORKERS > 1:
        from goagent_py.serve._supervise import supervise

        sock = socket.create_server(("127.0.0.1", 0), backlog=1024)
        payload = {"db": db, "users": users, "turns": turns, "loop": _LOOP}

        def announce(pids: list[int]) -> None:
            Path(port_file).write_text(str(sock.getsockname()[1]))

        supervise(
            "serve_load:_worker", payload, listening=sock, workers=_WORKERS, announce=announce
        )
        return
    app = _app(db, users, turns)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    Path(port_file).write_text(str(sock.getsockname()[1]))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    with asyncio.Runner(loop_factory=event_loop_factory(_LOOP)) as runner:  # as the CLI runs it
        runner.run(server.serve(sockets=[sock]))


def _worker(payload: dict[str, Any]) -> int:
    """One worker of ``--workers N`` (``goagent_py.serve._supervise`` calls it)."""
    from goagent_py.serve.run import serve_in_worker

    app = _app(payload["db"], payload["users"], payload["turns"])
    config = uvicorn.Config(app, log_level="warning")
    with asyncio.Runner(loop_factory=event_loop_factory(payload["loop"])) as runner:
        return runner.run(serve_in_worker(app, config))


def _tree_cpu_seconds(pid: int) -> float:
    """:func:`_cpu_seconds` of ``pid`` and of its children (the workers of ``--workers N``)."""
    total = _cpu_seconds(pid)
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process (Linux ``/proc``; py-spy's own under --py-spy)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    """User plus system CPU time of this process (the load generator), all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _attach_strace(pid: int) -> subprocess.Popen[bytes] | None:
    """With --strace: ``strace -c -f`` attached to the server (all its threads) for the turns;
    returns once it is attached."""
    if not _STRACE:
        return None
    tasks = len(list(Path(f"/proc/{pid}/task").iterdir()))
    command = ["strace", "-c", "-f", "-o", _STRACE, "-p", str(pid)]
    tracer = subprocess.Popen(command, stderr=subprocess.PIPE)
    assert tracer.stderr is not None
    for _ in range(tasks):  # one "attached" line per thread
        if b"attached" not in tracer.stderr.readline():
            break
    return tracer


def _detach_strace(tracer: subprocess.Popen[bytes]) -> dict[str, int]:
    """Stop strace and read its counts: calls per system call."""
    tracer.send_signal(signal.SIGINT)
    tracer.wait(60)
    calls: dict[str, int] = {}
    for line in Path(_STRACE).read_text().splitlines():
        fields = line.split()
        if len(fields) >= 5 and fields[0][0].isdigit() and fields[-1] != "total":
            calls[fields[-1]] = int(fields[3])
    return calls


def _memory_mb(pid: int) -> tuple[float, float]:
    """Resident memory of a process and its peak (Linux ``/proc``), in MB."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


def _tokens(users: int) -> dict[str, str]:
    return {f"token-{i:04d}-{'x' * 12}": f"user{i}" for i in range(users)}


def _wait_for_port(port_file: Path, process: subprocess.Popen[bytes]) -> int:
    for _ in range(36000 if _CALLGRIND else 600):  # valgrind starts slowly on a busy machine
        if process.poll() is not None:
            raise RuntimeError(f"the server exited with {process.returncode}")
        if port_file.exists() and port_file.read_text():
            return int(port_file.read_text())
        time.sleep(0.1)
    raise RuntimeError("the server did not start in time")


async def _event_lists(response: Any) -> Any:
    """A stream's SSE events, parsed: the raw client's lists, or httpx's lines one by one."""
    if isinstance(response, _RawResponse):
        async for events in response.event_lists():
            yield events
        return
    async for line in response.aiter_lines():
        if line.startswith("data:"):
            yield [json.loads(line[5:])]


async def _user(base: str, user: str, token: str, turns: int, out: dict[str, Any]) -> None:
    headers = {"authorization": f"Bearer {token}"}
    async with _CLIENT(base_url=base, headers=headers, timeout=60) as client:
        try:
            r = await client.post("/api/threads", json={"title": user})
            r.raise_for_status()
            tid = r.json()["id"]
            out["threads"][user] = tid
            for turn in range(turns):
                start = time.perf_counter()
                first = None
                finished = False
                async with client.stream(
                    "POST", f"/api/threads/{tid}/runs", json={"message": f"{user} turn {turn}"}
                ) as response:
                    response.raise_for_status()
                    async for events in _event_lists(response):
                        for event in events:  # every event is looked at
                            kind = event["type"]
                            if kind == "TEXT_MESSAGE_CONTENT" and first is None:
                                first = time.perf_counter() - start
                            elif kind == "RUN_FINISHED":
                                finished = True
                            elif kind == "RUN_ERROR":
                                raise RuntimeError(event["message"])
                if not finished or first is None:
                    raise RuntimeError("stream ended without RUN_FINISHED")
                out["ttft"].append(first)
                out["total"].append(time.perf_counter() - start)
        except Exception as exc:
            out["errors"].append(f"{user}: {type(exc).__name__}: {exc}")


async def _check(base: str, tokens: dict[str, str], out: dict[str, Any], turns: int) -> int:
    """Rows that belong to another user, seen through the API (every user lists every
    thread id)."""
    cross = 0
    async with httpx.AsyncClient(base_url=base, timeout=60) as client:
        for token, user in tokens.items():
            headers = {"authorization": f"Bearer {token}"}
            listed = (await client.get("/api/threads", headers=headers)).json()["threads"]
            cross += sum(1 for t in listed if t["id"] != out["threads"].get(user))
            tid = out["threads"].get(user)
            msgs = (await client.get(f"/api/threads/{tid}/messages", headers=headers)).json()
            for m in msgs["messages"]:
                if m["role"] == "user" and not m["text"].startswith(f"{user} turn"):
                    cross += 1
            if len(msgs["messages"]) != 2 * turns:
                out["errors"].append(f"{user}: {len(msgs['messages'])} messages stored")
            # Another user's thread must be a 404.
            other = next(t for u, t in out["threads"].items() if u != user)
            if (await client.get(f"/api/threads/{other}", headers=headers)).status_code != 404:
                cross += 1
    return cross


def _db_cross(path: Path) -> int:
    conn = sqlite3.connect(path)
    cross = 0
    for session_id, message in conn.execute("SELECT session_id, message FROM goagent_messages"):
        user = session_id.split(":")[1]
        data = json.loads(message)
        if data["role"] == "user" and user + " turn" not in json.dumps(data):
            cross += 1
    conn.close()
    return cross


def _figures(name: str, samples: list[float]) -> str:
    if not samples:
        return f"{name}: no samples"
    ordered = sorted(samples)
    p95 = ordered[max(0, int(len(ordered) * 0.95) - 1)]
    return (
        f"{name}: p50 {statistics.median(ordered) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, "
        f"max {ordered[-1] * 1000:.1f} ms"
    )


async def _load(
    base: str, tokens: dict[str, str], turns: int, pid: int
) -> tuple[dict[str, Any], float, int]:
    out: dict[str, Any] = {"errors": [], "ttft": [], "total": [], "threads": {}}
    tracer = await asyncio.to_thread(_attach_strace, pid)
    before = _tree_cpu_seconds(pid)
    client_before = _own_cpu_seconds()
    start = time.perf_counter()
    await asyncio.gather(*(_user(base, user, token, turns, out) for token, user in tokens.items()))
    wall = time.perf_counter() - start
    out["turns_cpu"] = _tree_cpu_seconds(pid) - before  # the users' threads and turns, no checks
    out["client_cpu"] = _own_cpu_seconds() - client_before  # the load generator's, the same
    if tracer is not None:
        out["syscalls"] = await asyncio.to_thread(_detach_strace, tracer)
    if _CALLGRIND:  # the instructions since the zeroing after start-up, dumped now
        dump = ["callgrind_control", "-d", str(pid)]
        await asyncio.to_thread(subprocess.run, dump, check=True, capture_output=True)
        dump_file = Path(_CALLGRIND + ".1")
        for _ in range(600):  # callgrind_control returns before the dump is written out
            text = await asyncio.to_thread(lambda: dump_file.exists() and dump_file.read_text())
            if text and "\ntotals:" in text:
                break
            await asyncio.sleep(0.1)
        for line in (text or "").splitlines():
            if line.startswith("summary:"):
                out["turns_instructions"] = int(line.split()[1])
    return out, wall, await _check(base, tokens, out, turns)


async def _peer_user(base: str, user: str, turns: int, out: dict[str, Any]) -> None:
    """One user of the peer: AG-UI's RunAgentInput with the whole conversation each turn (the
    peer keeps none)."""
    messages: list[dict[str, Any]] = []
    async with _CLIENT(base_url=base, timeout=60) as client:
        try:
            for turn in range(turns):
                said = f"{user} turn {turn}"
                messages.append({"id": f"u{turn}", "role": "user", "content": said})
                body = {
                    "threadId": user,
                    "runId": f"{user}-{turn}",
                    "state": {},
                    "messages": messages,
                    "tools": [],
                    "context": [],
                    "forwardedProps": {},
                }
                start = time.perf_counter()
                first = None
                text = ""
                finished = False
                headers = {"accept": "text/event-stream"}
                async with client.stream("POST", "/", json=body, headers=headers) as response:
                    response.raise_for_status()
                    async for events in _event_lists(response):
                        for event in events:
                            kind = event["type"]
                            if kind == "TEXT_MESSAGE_CONTENT":
                                if first is None:
                                    first = time.perf_counter() - start
                                text += event["delta"]
                            elif kind == "RUN_FINISHED":
                                finished = True
                            elif kind == "RUN_ERROR":
                                raise RuntimeError(event["message"])
                if not finished or first is None or text != ANSWER:
                    raise RuntimeError(f"stream ended without RUN_FINISHED or the answer: {text!r}")
                messages.append({"id": f"a{turn}", "role": "assistant", "content": text})
                out["ttft"].append(first)
                out["total"].append(time.perf_counter() - start)
        except Exception as exc:
            out["errors"].append(f"{user}: {type(exc).__name__}: {exc}")


async def _peer_load(base: str, users: int, turns: int) -> tuple[dict[str, Any], float]:
    out: dict[str, Any] = {"errors": [], "ttft": [], "total": []}
    start = time.perf_counter()
    await asyncio.gather(*(_peer_user(base, f"user{i}", turns, out) for i in range(users)))
    return out, time.perf_counter() - start


def _report(title: str, out: dict[str, Any], wall: float, server_cpu: float) -> None:
    print(title)
    print(f"  errors: {len(out['errors'])}")
    for line in out["errors"][:5]:
        print("    ", line)
    print("  " + _figures("time to first token", out["ttft"]))
    print("  " + _figures("turn (whole stream)", out["total"]))
    n = max(len(out["total"]), 1)
    print(f"  {len(out['total'])} turns in {wall:.2f} s: {len(out['total']) / wall:.1f} turns/s")
    print(f"  server CPU under load: {server_cpu:.2f} s, {server_cpu / n * 1000:.2f} ms per turn")
    if "turns_cpu" in out:  # without the checks after the load (API reads of every thread)
        turns_cpu = out["turns_cpu"]
        print(f"  of which the turns: {turns_cpu:.2f} s, {turns_cpu / n * 1000:.2f} ms per turn")
    if "client_cpu" in out:
        client = out["client_cpu"]
        print(f"  load generator CPU: {client:.2f} s, {client / n * 1000:.2f} ms per turn")
    if "syscalls" in out:
        calls = out["syscalls"]
        top = sorted(calls.items(), key=lambda kv: -kv[1])[:8]
        print(
            "  server system calls per turn (strace): "
            + ", ".join(f"{name} {count / n:.2f}" for name, count in top)
        )
    if "turns_instructions" in out:
        ir = out["turns_instructions"]
        print(f"  instructions of the turns (callgrind): {ir:,}, {ir / n:,.0f} per turn")


def _ours(users: int, turns: int, py_spy: str | None, gil: bool) -> int:
    tokens = _tokens(users)
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "serve.db"
        port_file = Path(tmp) / "port"
        command = [sys.executable, __file__, "--serve", str(port_file), str(db)]
        command += ["--users", str(users), "--turns", str(turns), "--loop", _LOOP]
        command += ["--workers", str(_WORKERS)]
        if _CALLGRIND:
            stale = Path(_CALLGRIND).parent.glob(Path(_CALLGRIND).name + ".*")
            for old in [Path(_CALLGRIND), *stale]:  # the dump read is the fresh ".1"
                old.unlink(missing_ok=True)
            valgrind = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={_CALLGRIND}"]
            command = [*valgrind, *command]
        if py_spy:
            spy = Path(sys.executable).with_name("py-spy")
            record = [str(spy), "record", "-r", "200", "-f", "raw", "-o", py_spy]
            command = [*record, *(["--gil"] if gil else []), "--", *command]
        process = subprocess.Popen(command, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            port = _wait_for_port(port_file, process)
            if _CALLGRIND:  # count from here: start-up and imports left out
                zero = ["callgrind_control", "-z", str(process.pid)]
                subprocess.run(zero, check=True, capture_output=True)
            before = _tree_cpu_seconds(process.pid)
            out, wall, cross = asyncio.run(
                _load(f"http://127.0.0.1:{port}", tokens, turns, process.pid)
            )
            server_cpu = _tree_cpu_seconds(process.pid) - before
            # The server's own memory (not valgrind's or py-spy's), after the load and checks.
            memory = None if _CALLGRIND or py_spy else _memory_mb(process.pid)
        finally:
            process.send_signal(signal.SIGINT)  # py-spy writes its file when its child ends
            process.wait(60)
        cross_db = _db_cross(db)
    loop = "uvloop" if event_loop_factory(_LOOP) else "asyncio"
    workers = f", {_WORKERS} workers" if _WORKERS > 1 else ""
    title = f"goagent-py serve (uvicorn on {loop}{workers}, SQLite, token auth)"
    _report(title, out, wall, server_cpu)
    print(f"  cross-user rows: {cross} via the API, {cross_db} in the database")
    if memory is not None:
        rss, peak = memory
        print(f"  server memory after the load: {rss:.1f} MB resident, peak {peak:.1f} MB")
    return 1 if out["errors"] or cross or cross_db else 0


def _peer(users: int, turns: int) -> int:
    venvs = Path(os.environ.get("PEERBENCH_VENVS", "/tmp/peerbench-venvs"))
    python = venvs / "pydantic_ai_agui" / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(python.parent.parent)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "pydantic-ai-slim[ag-ui]", "uvicorn"]
        subprocess.run([*pip, "httptools", "uvloop"], check=True)
    version = subprocess.run(
        [str(python), "-c", "import importlib.metadata as m; print(m.version('pydantic-ai-slim'))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    script = Path(__file__).with_name("peers") / "serve_pydantic_ai.py"
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        # -P: not bench/peers/ first on the path (its pydantic_ai.py would shadow the package)
        process = subprocess.Popen([str(python), "-P", str(script), str(port_file)])
        try:
            port = _wait_for_port(port_file, process)
            before = _cpu_seconds(process.pid)
            out, wall = asyncio.run(_peer_load(f"http://127.0.0.1:{port}", users, turns))
            server_cpu = _cpu_seconds(process.pid) - before
        finally:
            process.send_signal(signal.SIGINT)
            process.wait(60)
    title = f"pydantic-ai {version} AG-UI (uvicorn on uvloop, no storage, no auth)"
    _report(title, out, wall, server_cpu)
    return 1 if out["errors"] else 0


def main(users: int, turns: int, py_spy: str | None, gil: bool, peer: bool, rounds: int) -> int:
    print(f"{users} users x {turns} turns; load average {os.getloadavg()[0]:.2f} at the start")
    failed = 0
    for _ in range(rounds):
        failed |= _ours(users, turns, py_spy, gil)
        if peer:
            failed |= _peer(users, turns)
    print(f"load average {os.getloadavg()[0]:.2f} at the end")
    client = resource.getrusage(resource.RUSAGE_SELF)
    print(f"load generator CPU: {client.ru_utime + client.ru_stime:.1f} s in all")
    return failed


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--py-spy", help="record the server with py-spy into this file")
    parser.add_argument(
        "--gil", action="store_true", help="with --py-spy: only the thread holding the GIL (CPU)"
    )
    parser.add_argument(
        "--peer",
        action="store_true",
        help="also measure pydantic-ai's AG-UI server (bench/peers/serve_pydantic_ai.py)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="ours (then the peer) N times")
    parser.add_argument(
        "--raw-client",
        action="store_true",
        help="the users speak HTTP/1.1 on asyncio streams instead of httpx (a lighter client)",
    )
    parser.add_argument(
        "--callgrind",
        default="",
        help="run the server under callgrind (out file prefix); prints the instructions of the "
        "turns (counted from the end of start-up to the end of the last turn)",
    )
    parser.add_argument(
        "--strace",
        default="",
        help="attach strace -c -f to the server for the turns (its summary file); prints the "
        "system calls per turn",
    )
    parser.add_argument(
        "--loop",
        choices=("auto", "uvloop", "asyncio"),
        default="auto",
        help="our server's event loop, as goagent-py serve --loop (auto: uvloop when installed)",
    )
    parser.add_argument(
        "--workers",
        type=int,
        default=1,
        help="our server's worker processes, as goagent-py serve --workers N (CPU summed)",
    )
    parser.add_argument("--serve", nargs=2, metavar=("PORT_FILE", "DB"), help=argparse.SUPPRESS)
    ns = parser.parse_args()
    if ns.raw_client:
        _CLIENT = _RawClient
    _CALLGRIND = ns.callgrind
    _STRACE = ns.strace
    _LOOP = ns.loop
    _WORKERS = ns.workers
    if ns.serve:
        with contextlib.suppress(KeyboardInterrupt):
            _serve(*ns.serve, ns.users, ns.turns)
        raise SystemExit(0)
    raise SystemExit(main(ns.users, ns.turns, ns.py_spy, ns.gil, ns.peer, ns.rounds))
