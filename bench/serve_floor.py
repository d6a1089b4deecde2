"""The floor under ``bench/serve_load.py``: what uvicorn alone costs a served turn on this machine.

Run with ``python bench/serve_floor.py [--users 50] [--turns 20] [--workers 1]`` (never collected
as a test). The server is uvicorn as ``goagent-py serve`` runs it (uvloop and httptools when
installed, a real localhost port, its own process), with a bare ASGI app instead of ours: it
answers ``POST /api/threads`` with an id and ``POST /api/threads/{id}/runs`` with the very bytes
a served turn of ``serve_load.py`` sends (27 AG-UI events in one chunk, ``RUN_FINISHED`` in the
last), with no agent, no storage and no auth beyond reading the header. The users are
``serve_load.py``'s raw HTTP/1.1 client, 50 closed-loop users with no think time.

What it tells: the server CPU a turn below which no change to goagent-py can go with uvicorn,
and the latency the load generator and the machine allow on their own. Issue 36's served target
(p95 < 100 ms at 50 users) is a throughput target in disguise: with 50 users in a closed loop,
a turn's mean latency is 50 / turns-per-second. ``--workers N`` serves the floor from N processes
sharing the socket, as uvicorn's own ``--workers`` does.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
import serve_load  # the raw client and the CPU readers, one copy


def _turn_bytes(thread_id: str, run_id: str) -> tuple[bytes, bytes]:
    message_id = uuid.uuid4().hex
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id},
        {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
    ]
    words = serve_load.ANSWER.split(" ")
    events += [
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": (" " if i else "") + w}
        for i, w in enumerate(words)
    ]
    events.append({"type": "TEXT_MESSAGE_END", "messageId": message_id})
    last = {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id}
    frame = lambda e: b"data: " + json.dumps(e, separators=(",", ":")).encode() + b"\n\n"  # noqa: E731
    return b"".join(frame(e) for e in events), frame(last)


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    body = b""
    while True:
        message = await receive()
        body += message.get("body", b"")
        if not message.get("more_body"):
            break
    json.loads(body)
    dict(scope["headers"]).get(b"authorization")
    if scope["path"] == "/api/threads":
        out = json.dumps({"id": uuid.uuid4().hex}).encode()
        headers = [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(out))]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": out})
        return
    chunk, last = _turn_bytes(scope["path"].split("/")[3], uuid.uuid4().hex)
    headers = [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": chunk, "more_body": True})
    await asyncio.sleep(0)  # the run's end comes in a later step of the loop, as ours does
    await send({"type": "http.response.body", "body": last, "more_body": False})


def _serve(port_file: str, workers: int) -> None:
    import uvicorn

    from goagent_py.serve.run import event_loop_factory

    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    sock.set_inheritable(True)
    for _ in range(workers - 1):  # the others share the socket (fork: the app is this module's)
        if os.fork() == 0:
            break
    else:
        Path(port_file).write_text(str(sock.getsockname()[1]))
    server = uvicorn.Server(uvicorn.Config(_app, log_level="warning", lifespan="off"))
    with asyncio.Runner(loop_factory=event_loop_factory("auto")) as runner:
        runner.run(server.serve(sockets=[sock]))


async def _user(base: str, token: str, turns: int, out: list[float]) -> None:
    async with serve_load._RawClient(base, headers={"authorization": f"Bearer {token}"}) as client:
        thread = (await client.post("/api/threads", json={"title": token})).json()["id"]
        for _ in range(turns):
            start = time.perf_counter()
            async with client.stream(
                "POST", f"/api/threads/{thread}/runs", json={"message": "hi"}
            ) as response:
                async for events in response.event_lists():
                    for event in events:  # every event is looked at, as serve_load's users do
                        event["type"]
            out.append(time.perf_counter() - start)


def _group_cpu(pid: int) -> float:
    """CPU of the server and its forked workers (children of the first process)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return serve_load._cpu_seconds(pid) + sum(serve_load._cpu_seconds(int(c)) for c in children)


def main(users: int, turns: int, workers: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        port_file = Path(tmp) / "port"
        command = [sys.executable, __file__, "--serve", str(port_file), "--workers", str(workers)]
        process = subprocess.Popen(command)
        try:
            port = serve_load._wait_for_port(port_file, process)
            out: list[float] = []
            server_before, client_before = _group_cpu(process.pid), serve_load._own_cpu_seconds()
            wall = time.perf_counter()

            async def load() -> None:
                base = f"http://127.0.0.1:{port}"
                await asyncio.gather(*(_user(base, f"t{i}", turns, out) for i in range(users)))

            asyncio.run(load())
            wall = time.perf_counter() - wall
            server = _group_cpu(process.pid) - server_before
            client = serve_load._own_cpu_seconds() - client_before
        finally:
            process.terminate()
            process.wait(30)
    out.sort()
    n = len(out)
    print(
        f"floor ({workers} worker{'s' * (workers > 1)}): {n} turns, {n / wall:.1f} turns/s, "
        f"p50 {out[n // 2] * 1000:.1f} ms, p95 {out[int(n * 0.95)] * 1000:.1f} ms, "
        f"server CPU a turn {server / n * 1000:.3f} ms, load generator {client / n * 1000:.3f} ms"
        f" (load average {os.getloadavg()[0]:.1f})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--serve", metavar="PORT_FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.serve, args.workers)
    else:
        main(args.users, args.turns, args.workers)
