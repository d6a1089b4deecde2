"""A served database restored from a backup while the server runs: the server goes on with
the restored file (docs/serve.md "Restoring the database from a backup"). Each live thread
holds a conversation storage opened on the old file, which refuses to write once the file at
the path is another one; the server rebuilds such a thread from the file now at the path
instead of failing its every turn until a restart."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

from goagent_py.messages import Role
from goagent_py.serve import create_app
from goagent_py.testing import FunctionProvider, text_response


def _backup(path: str, to: Path) -> None:
    """SQLite's online backup of ``path`` into ``to`` (a file of its own, checkpointed)."""
    source, target = sqlite3.connect(path), sqlite3.connect(to)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def _restore(path: str, backup: Path) -> None:
    """``backup`` put in place of ``path`` while the server has it open, the old WAL files
    removed: what restoring a backup does."""
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(backup, path)


def _echo(request: Any) -> Any:
    last = [m for m in request.messages if m.role is Role.USER][-1]
    return text_response(f"echo: {last.text}")


async def _turn(client: Any, helpers: Any, tid: str, text: str) -> list[str]:
    r = await client.post(f"/api/threads/{tid}/runs", json={"message": text})
    assert r.status_code == 200, r.text
    return [e["type"] for e in helpers.sse_events(r.text)]


async def _texts(client: Any, tid: str) -> list[str]:
    r = await client.get(f"/api/threads/{tid}/messages")
    assert r.status_code == 200, r.text
    return [m["text"] for m in r.json()["messages"]]


async def test_a_live_thread_goes_on_with_the_restored_database(
    db: str, tmp_path: Path, helpers: Any
) -> None:
    app = create_app(helpers.factory_for(FunctionProvider(_echo)), storage_path=db)
    try:
        async with helpers.client_for(app) as client:
            tid = (await client.post("/api/threads", json={})).json()["id"]
            assert (await _turn(client, helpers, tid, "one"))[-1] == "RUN_FINISHED"
            backup = tmp_path / "backup.db"
            _backup(db, backup)
            assert (await _turn(client, helpers, tid, "two"))[-1] == "RUN_FINISHED"
            _restore(db, backup)
            # The thread is live (its session and storage kept from the turns before): its
            # next turn runs on the restored file, which does not hold turn two.
            types = await _turn(client, helpers, tid, "three")
            assert types[-1] == "RUN_FINISHED", types
            assert await _texts(client, tid) == ["one", "echo: one", "three", "echo: three"]
            assert (await _turn(client, helpers, tid, "four"))[-1] == "RUN_FINISHED"
    finally:
        await app.aclose()
    check = sqlite3.connect(db)
    try:
        stored = check.execute("SELECT COUNT(*) FROM goagent_messages").fetchone()[0]
    finally:
        check.close()
    assert stored == 6  # one, three and four with their answers: nothing lost, nothing of two


async def test_a_thread_restored_away_is_gone_and_others_go_on(
    db: str, tmp_path: Path, helpers: Any
) -> None:
    """A thread made after the backup is not in the restored file: the server answers for it
    as for any thread it does not hold, and the threads the backup holds go on."""
    app = create_app(helpers.factory_for(FunctionProvider(_echo)), storage_path=db)
    try:
        async with helpers.client_for(app) as client:
            kept = (await client.post("/api/threads", json={})).json()["id"]
            await _turn(client, helpers, kept, "kept")
            backup = tmp_path / "backup.db"
            _backup(db, backup)
            later = (await client.post("/api/threads", json={})).json()["id"]
            await _turn(client, helpers, later, "later")
            _restore(db, backup)
            r = await client.post(f"/api/threads/{later}/runs", json={"message": "again"})
            assert r.status_code == 404, r.text
            assert (await _turn(client, helpers, kept, "again"))[-1] == "RUN_FINISHED"
            assert await _texts(client, kept) == ["kept", "echo: kept", "again", "echo: again"]
    finally:
        await app.aclose()
