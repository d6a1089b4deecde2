"""Two A2A server workers on one storage (two processes on one SQLite file, two servers on one
PostgreSQL) sent the same message (the same context and ``messageId``: a client's retry landing
on another worker) run it once: the worker that got it second sees the first one's claim where
the records are kept and waits for its answer; a claim of a killed worker holds nothing
(docs/a2a.md, "A message sent again"). Before, the claim was the process's own: the second
worker ran the message again (or refused it, the context being busy) and its answer differed.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a_helpers import free_socket, send_message, serving

pytestmark = pytest.mark.slow

_WORKER = str(Path(__file__).with_name("a2a_worker.py"))
_PATIENCE = 300  # seconds before a hang fails the test (never reached when it passes)


class _Worker:
    """A worker process (tests/a2a/a2a_worker.py) and the lines it says."""

    def __init__(self, process: asyncio.subprocess.Process, url: str) -> None:
        self.process = process
        self.url = url
        self.said: list[str] = []

    async def next_line(self) -> str:
        assert self.process.stdout is not None
        line = (await self.process.stdout.readline()).decode().strip()
        self.said.append(line)
        return line

    def answer(self) -> None:
        """Let its model answer (the model waits for a line)."""
        assert self.process.stdin is not None
        self.process.stdin.write(b"go\n")


@asynccontextmanager
async def _workers(path: Path, count: int) -> AsyncIterator[list[_Worker]]:
    started: list[_Worker] = []
    try:
        for _ in range(count):
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                _WORKER,
                str(path),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                env={**os.environ, "PYTHONPATH": os.getcwd()},
            )
            worker = _Worker(process, "")
            started.append(worker)
            said = await worker.next_line()
            assert said.startswith("port "), said
            worker.url = f"http://127.0.0.1:{said.split()[1]}/"
        yield started
    finally:
        for worker in started:
            if worker.process.returncode is None:
                worker.process.kill()
            await worker.process.wait()


async def _send(http: httpx.AsyncClient, url: str, body: Any) -> Any:
    answer = (await http.post(url, json=body, headers={"A2A-Version": "1.0"})).json()
    assert "result" in answer, answer
    return answer["result"]["task"]


def _answer_of(task: Any) -> str:
    return "".join(p["text"] for a in task.get("artifacts", []) for p in a["parts"])


async def _first_of(*waits: Any) -> None:
    """Wait until one of ``waits`` (coroutines or tasks) is done; cancel the others (tasks
    given are left running)."""
    tasks = [w if isinstance(w, asyncio.Task) else asyncio.ensure_future(w) for w in waits]
    _, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in pending:
        if task not in waits:
            task.cancel()


async def test_a_copy_sent_to_a_second_worker_while_the_first_runs_it_gets_its_answer(
    tmp_path: Path,
) -> None:
    body = send_message("hello", "m-1", "ctx-1")
    async with (
        asyncio.timeout(_PATIENCE),
        _workers(tmp_path / "a2a.db", 2) as (first, second),
        httpx.AsyncClient(timeout=_PATIENCE) as http,
    ):
        sent_first = asyncio.create_task(_send(http, first.url, body))
        assert await first.next_line() == "started"  # the first worker's model is asked
        sent_second = asyncio.create_task(_send(http, second.url, body))
        # The second worker says it waits (or, before, ran it or answered on its own).
        await _first_of(second.next_line(), sent_second)
        first.answer()
        tasks = [await sent_first, await sent_second]
    assert first.said[1:] == ["started"]
    assert second.said[1:] == ["waiting"]  # its model was never asked
    assert tasks[1]["id"] == tasks[0]["id"]
    assert [t["status"]["state"] for t in tasks] == ["TASK_STATE_COMPLETED"] * 2
    assert _answer_of(tasks[1]) == _answer_of(tasks[0]) == f"answer from {first.process.pid}"


async def test_two_workers_sent_one_message_at_the_same_moment_run_it_once(
    tmp_path: Path,
) -> None:
    # Without a context: both workers name the same one from the message (docs/a2a.md).
    body = send_message("hello", "m-1", "")
    del body["params"]["message"]["contextId"]
    async with (
        asyncio.timeout(_PATIENCE),
        _workers(tmp_path / "a2a.db", 2) as workers,
        httpx.AsyncClient(timeout=_PATIENCE) as http,
    ):
        # Both requests go out together (the gate: both tasks made before either is sent).
        gate = asyncio.Event()

        async def at_the_gate(worker: _Worker) -> Any:
            await gate.wait()
            return await _send(http, worker.url, body)

        sent = [asyncio.create_task(at_the_gate(w)) for w in workers]
        gate.set()
        # Each worker says something: one is asked ("started"), the other waits for it (before:
        # both were asked, or one refused the message as its context was busy).
        for worker, request in zip(workers, sent, strict=True):
            await _first_of(worker.next_line(), request)
        for worker in workers:
            worker.answer()
        tasks = [await request for request in sent]
    heard = sorted(w.said[1] for w in workers if len(w.said) > 1)
    assert heard == ["started", "waiting"]
    assert tasks[1]["id"] == tasks[0]["id"]
    assert tasks[1]["contextId"] == tasks[0]["contextId"]
    assert [t["status"]["state"] for t in tasks] == ["TASK_STATE_COMPLETED"] * 2
    assert _answer_of(tasks[0]) == _answer_of(tasks[1])


async def test_a_message_claimed_by_a_killed_worker_is_answered_by_the_next(
    tmp_path: Path,
) -> None:
    body = send_message("hello", "m-1", "ctx-1")
    async with (
        asyncio.timeout(_PATIENCE),
        _workers(tmp_path / "a2a.db", 2) as (first, second),
        httpx.AsyncClient(timeout=_PATIENCE) as http,
    ):
        sent_first = asyncio.create_task(_send(http, first.url, body))
        assert await first.next_line() == "started"
        sent_second = asyncio.create_task(_send(http, second.url, body))
        await _first_of(second.next_line(), sent_second)
        if second.said[1:] != ["waiting"]:  # before: answered at once, on its own
            pytest.fail(f"the second worker did not wait: {await sent_second}")
        first.process.send_signal(signal.SIGKILL)  # its claim goes with it (the kernel's lock)
        await first.process.wait()
        with pytest.raises(httpx.HTTPError):
            await sent_first
        assert await second.next_line() == "started"  # the message runs, once, here
        second.answer()
        task = await sent_second
        # And a copy sent after is answered from its record, not run again.
        again = await _send(http, second.url, body)
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert _answer_of(task) == f"answer from {second.process.pid}"
    assert again["id"] == task["id"]
    assert _answer_of(again) == _answer_of(task)
    assert second.said[1:] == ["waiting", "started"]


@pytest.mark.needs_extra("postgres")
async def test_two_servers_on_one_postgres_answer_a_copy_once(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uuid

    from goagent_py import Agent
    from goagent_py.a2a import _sent, a2a_app
    from goagent_py.memory import ShortTermMemory
    from goagent_py.memory.storage import PostgresStorage
    from goagent_py.testing import FunctionProvider

    asked, go, waiting = asyncio.Event(), asyncio.Event(), asyncio.Event()
    runs: list[str] = []

    def server_model(name: str) -> Any:
        async def model(request: Any) -> str:
            runs.append(name)
            asked.set()
            await go.wait()
            return f"answer from {name}"

        return FunctionProvider(model)

    original = getattr(_sent, "claim_wait", None)

    async def claim_wait(attempt: int) -> None:  # the second server waits for the first
        waiting.set()
        if original is not None:
            await original(attempt)

    monkeypatch.setattr(_sent, "claim_wait", claim_wait, raising=False)
    table = f"t_{uuid.uuid4().hex[:12]}"
    # Two servers sharing only the database: each its own pool, as two processes have.
    async with (
        PostgresStorage(pg_dsn, table=table, session_id="served") as one,
        PostgresStorage(pg_dsn, table=table, session_id="served") as two,
    ):
        socks = [free_socket(), free_socket()]
        apps = [
            a2a_app(
                Agent(provider=server_model(name), model="m", short_term_memory=memory),
                url=f"http://127.0.0.1:{sock.getsockname()[1]}",
            )
            for name, memory, sock in (
                ("one", ShortTermMemory(one), socks[0]),
                ("two", ShortTermMemory(two), socks[1]),
            )
        ]
        body = send_message("hello", "m-1", "ctx-1")
        async with (
            asyncio.timeout(_PATIENCE),
            serving(apps[0], socks[0]) as first_url,
            serving(apps[1], socks[1]) as second_url,
            httpx.AsyncClient(timeout=_PATIENCE) as http,
        ):
            sent_first = asyncio.create_task(_send(http, first_url + "/", body))
            await asked.wait()
            sent_second = asyncio.create_task(_send(http, second_url + "/", body))
            await _first_of(waiting.wait(), sent_second)
            go.set()
            tasks = [await sent_first, await sent_second]
    assert runs == ["one"]
    assert tasks[1]["id"] == tasks[0]["id"]
    assert [t["status"]["state"] for t in tasks] == ["TASK_STATE_COMPLETED"] * 2
    assert _answer_of(tasks[1]) == "answer from one"


_PG_CLAIMER = """
import asyncio, sys
from goagent_py import Agent
from goagent_py.a2a import _sent
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.storage import PostgresStorage
from goagent_py.testing import ScriptedProvider

_sent._LEASE_TTL = 10.0  # a killed worker's claim outlives it this long

async def main() -> None:
    storage = PostgresStorage(sys.argv[1], table=sys.argv[2], session_id="served")
    agent = Agent(provider=ScriptedProvider(), short_term_memory=ShortTermMemory(storage))
    await _sent.SentMessages(agent).claim("ctx-1", "m-1")
    print("claimed", flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


@pytest.mark.needs_extra("postgres")
async def test_a_postgres_claim_of_a_killed_worker_lets_the_message_run(
    pg_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uuid

    from goagent_py import Agent
    from goagent_py.a2a import _sent, a2a_app
    from goagent_py.memory import ShortTermMemory
    from goagent_py.memory.storage import PostgresStorage
    from goagent_py.testing import ScriptedProvider

    waiting = asyncio.Event()
    original = _sent.claim_wait

    async def claim_wait(attempt: int) -> None:
        waiting.set()
        await original(attempt)

    monkeypatch.setattr(_sent, "claim_wait", claim_wait)
    table = f"t_{uuid.uuid4().hex[:12]}"
    claimer = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _PG_CLAIMER,
        pg_dsn,
        table,
        stdout=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    provider = ScriptedProvider("answered here")
    try:
        assert claimer.stdout is not None
        assert (await claimer.stdout.readline()).strip() == b"claimed"
        async with PostgresStorage(pg_dsn, table=table, session_id="served") as storage:
            sock = free_socket()
            app = a2a_app(
                Agent(provider=provider, model="m", short_term_memory=ShortTermMemory(storage)),
                url=f"http://127.0.0.1:{sock.getsockname()[1]}",
            )
            async with (
                asyncio.timeout(_PATIENCE),
                serving(app, sock) as url,
                httpx.AsyncClient(timeout=_PATIENCE) as http,
            ):
                sent = asyncio.create_task(
                    _send(http, url + "/", send_message("hello", "m-1", "ctx-1"))
                )
                await _first_of(waiting.wait(), sent)
                assert waiting.is_set()  # the other worker's claim is seen
                claimer.kill()  # killed holding it: its lease is renewed no more, and expires
                await claimer.wait()
                task = await sent
    finally:
        if claimer.returncode is None:
            claimer.kill()
            await claimer.wait()
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert _answer_of(task) == "answered here"
    assert len(provider.requests) == 1
