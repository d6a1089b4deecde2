"""A served turn without sockets: ``bench/serve_load.py``'s app called as uvicorn calls it.

Run with ``python bench/serve_inprocess.py [--users 50] [--turns 5] [--callgrind]`` (never
collected as a test). Each user creates a thread (``POST /api/threads``) and sends its turns
(``POST /api/threads/{id}/runs``, the whole SSE body read), all users at once, after two users'
warm-up. Prints the CPU a turn; with ``--callgrind``, run under ``valgrind --tool=callgrind``,
the counts are zeroed before the load and dumped after it (``callgrind_control``), so the dump's
``summary`` is the turns' instructions: no HTTP parser and no socket, so it moves less than
``serve_load.py --callgrind`` between runs (docs/notes/perf15.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import serve_load


async def _call(app: Any, path: str, token: str, body: dict[str, Any]) -> bytes:
    data = json.dumps(body).encode()
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1:8000"),
            (b"authorization", f"Bearer {token}".encode()),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(data)).encode()),
        ],
        "client": ("127.0.0.1", 5555),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }
    sent = False
    done = asyncio.Event()

    async def receive() -> dict[str, Any]:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": data, "more_body": False}
        await done.wait()
        return {"type": "http.disconnect"}

    out: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.body":
            out.append(message.get("body", b""))

    await app(scope, receive, send)
    done.set()
    return b"".join(out)


async def _user(app: Any, name: str, token: str, turns: int) -> int:
    thread = json.loads(await _call(app, "/api/threads", token, {"title": name}))["id"]
    for turn in range(turns):
        body = await _call(app, f"/api/threads/{thread}/runs", token, {"message": f"{turn}"})
        if b"RUN_FINISHED" not in body:
            raise RuntimeError(body[:300].decode(errors="replace"))
    return turns


def _callgrind(what: str) -> None:
    subprocess.run(["callgrind_control", what, str(os.getpid())], check=True, capture_output=True)


async def _main(users: int, turns: int, callgrind: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        app = serve_load._app(str(Path(tmp) / "serve.db"), users + 2, turns)
        tokens = list(serve_load._tokens(users + 2).items())
        await asyncio.gather(*(_user(app, name, token, turns) for token, name in tokens[users:]))
        if callgrind:
            _callgrind("-z")
        start = time.process_time()
        done = await asyncio.gather(
            *(_user(app, name, token, turns) for token, name in tokens[:users])
        )
        cpu = time.process_time() - start
        if callgrind:
            _callgrind("-d")
        print(f"{sum(done)} turns, {cpu / sum(done) * 1000:.3f} ms of CPU a turn")
        await app.aclose()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--callgrind", action="store_true", help="zero and dump callgrind")
    ns = parser.parse_args()
    asyncio.run(_main(ns.users, ns.turns, ns.callgrind))
