"""A process killed (SIGKILL) in the middle of appending to a SQLite conversation, at whatever
moment it is in (serialising, queued in the shared writer, inside the group commit, syncing):
every append it was told had succeeded is stored, and every append stored is whole."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import textwrap
from pathlib import Path

import pytest

from goagent_py.memory.storage import SQLiteStorage

# Two storages of one conversation (one file, one shared writer: group commits), each writing
# batches of BATCH messages tagged "writer:batch:index", printing "writer:batch" once stored.
_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from goagent_py.memory.storage import SQLiteStorage
    from goagent_py.messages import user_message

    BATCH = 7

    async def writer(name: str, path: str) -> None:
        async with SQLiteStorage(path, session_id="s") as storage:
            for batch in range(10_000):
                await storage.load()
                await storage.append(
                    [user_message(f"{name}:{batch}:{i}" + "x" * 300) for i in range(BATCH)]
                )
                print(f"{name}:{batch}", flush=True)

    async def main(path: str) -> None:
        round_ = sys.argv[2]  # names unique across the rounds
        await asyncio.gather(writer(f"a{round_}", path), writer(f"b{round_}", path))

    asyncio.run(main(sys.argv[1]))
    """
)


@pytest.mark.slow
async def test_a_process_killed_mid_append_leaves_every_acknowledged_turn_whole(
    tmp_path: Path,
) -> None:
    path = tmp_path / "chat.db"
    acknowledged: set[str] = set()
    for round_ in range(3):  # each kill lands at another point of the append
        child = await asyncio.create_subprocess_exec(
            sys.executable,
            "-c",
            _CHILD,
            str(path),
            str(round_),
            stdout=asyncio.subprocess.PIPE,
        )
        assert child.stdout is not None
        for _ in range(5 + 7 * round_):  # wait for acknowledged appends, not for time
            line = await child.stdout.readline()
            assert line, "the writer process ended early"
            acknowledged.add(line.decode().strip())
        child.kill()
        await child.wait()
        while line := await child.stdout.readline():  # acknowledged before the kill landed
            acknowledged.add(line.decode().strip())

    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    finally:
        conn.close()
    async with SQLiteStorage(path, session_id="s") as storage:
        stored = [m.text.rstrip("x") for m in await storage.load()]
    batches: dict[str, list[int]] = {}
    for text in stored:
        writer, batch, index = text.split(":")
        batches.setdefault(f"{writer}:{batch}", []).append(int(index))
    assert acknowledged <= set(batches)  # no acknowledged turn lost
    for key, indexes in batches.items():  # and every stored one whole, in order
        assert indexes == list(range(7)), key
