"""Load on ``goagent-py serve``: 50 concurrent users x 5 turns against one uvicorn server.

Run with ``python bench/serve_load.py [--users 50] [--turns 5]`` (never collected as a test).
The server runs in its own thread and event loop, on a real localhost port, with bearer-token
auth (one token per user) and a real SQLite file; the model is a ScriptedProvider (a fixed
24-word answer streamed word by word), so the figures are the server's own cost: auth, thread
lookup, session, SQLite writes (fsync per turn), SSE framing.

Reported: errors, cross-user rows (a user's thread holding another user's message, via the API
and directly in the database), and latency of a turn: time to first text delta and to the end
of the stream (p50/p95/max), plus turns per second.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import sqlite3
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import uvicorn

from goagent_py import Agent
from goagent_py.serve import ThreadContext, TokenAuth, create_app
from goagent_py.testing import ScriptedProvider

ANSWER = " ".join(f"word{i}" for i in range(24))


def _start_server(app: Any) -> tuple[uvicorn.Server, threading.Thread, int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(1024)
    port = int(sock.getsockname()[1])
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])))
    thread.start()
    return server, thread, port


async def _user(base: str, user: str, token: str, turns: int, out: dict[str, Any]) -> None:
    headers = {"authorization": f"Bearer {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=60) as client:
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
                    async for line in response.aiter_lines():
                        if not line.startswith("data:"):
                            continue
                        event = json.loads(line[5:])
                        if event["type"] == "TEXT_MESSAGE_CONTENT" and first is None:
                            first = time.perf_counter() - start
                        elif event["type"] == "RUN_FINISHED":
                            finished = True
                        elif event["type"] == "RUN_ERROR":
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


async def main(users: int, turns: int) -> int:
    tokens = {f"token-{i:04d}-{'x' * 12}": f"user{i}" for i in range(users)}
    provider = ScriptedProvider(*([ANSWER] * (users * turns)))

    def factory(ctx: ThreadContext) -> Agent:
        return Agent(provider=provider, model="scripted", short_term_memory=ctx.short_term_memory)

    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "serve.db"
        app = create_app(factory, storage_path=str(db), auth=TokenAuth(tokens))
        server, thread, port = _start_server(app)
        base = f"http://127.0.0.1:{port}"
        out: dict[str, Any] = {"errors": [], "ttft": [], "total": [], "threads": {}}
        start = time.perf_counter()
        await asyncio.gather(
            *(_user(base, user, token, turns, out) for token, user in tokens.items())
        )
        wall = time.perf_counter() - start
        cross = await _check(base, tokens, out, turns)
        server.should_exit = True
        thread.join()
        cross_db = _db_cross(db)
    print(f"{users} users x {turns} turns, one server (uvicorn, SQLite {db.name}, token auth)")
    print(f"errors: {len(out['errors'])}")
    for line in out["errors"][:5]:
        print("  ", line)
    print(f"cross-user rows: {cross} via the API, {cross_db} in the database")
    print(_figures("time to first token", out["ttft"]))
    print(_figures("turn (whole stream)", out["total"]))
    print(f"{len(out['total'])} turns in {wall:.2f} s: {len(out['total']) / wall:.1f} turns/s")
    return 1 if out["errors"] or cross or cross_db else 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--turns", type=int, default=5)
    ns = parser.parse_args()
    raise SystemExit(asyncio.run(main(ns.users, ns.turns)))
