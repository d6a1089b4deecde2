"""A served database restored from a backup while the server runs, whatever storage object the
agent factory gave the thread's agent: the thread goes on with the restored file through the
storage's own ``SQLiteStorage.reopen()`` (the rule the chat CLI and the coding session follow,
docs/sessions.md "Session ids and the file under the record"; docs/serve.md "Restoring the
database from a backup")."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from goagent_py import Agent
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.messages import Role
from goagent_py.serve import ThreadContext, create_app
from goagent_py.testing import FunctionProvider, text_response


def _echo(request: Any) -> Any:
    last = [m for m in request.messages if m.role is Role.USER][-1]
    return text_response(f"echo: {last.text}")


def _backup(path: str, to: Path) -> None:
    source, target = sqlite3.connect(path), sqlite3.connect(to)
    try:
        source.backup(target)
    finally:
        target.close()
        source.close()


def _restore(path: str, backup: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    os.replace(backup, path)


def _given(ctx: ThreadContext) -> ShortTermMemory:
    return ctx.short_term_memory


def _own_storage(ctx: ThreadContext) -> ShortTermMemory:
    # The thread's conversation (same file, same session id) on a storage of the factory's own.
    given = ctx.short_term_memory.storage
    assert isinstance(given, SQLiteStorage)
    return ShortTermMemory(SQLiteStorage(given.path, session_id=given.session_id, timeout=10))


@pytest.mark.parametrize("memory_of", [_given, _own_storage], ids=["given", "own-storage"])
async def test_a_restored_file_is_followed_by_the_storage_the_agent_uses(
    db: str, tmp_path: Path, helpers: Any, memory_of: Any
) -> None:
    provider = FunctionProvider(_echo)

    def factory(ctx: ThreadContext) -> Agent:
        return Agent(provider=provider, model="scripted", short_term_memory=memory_of(ctx))

    app = create_app(factory, storage_path=db)
    try:
        async with helpers.client_for(app) as client:
            kept = (await client.post("/api/threads", json={"title": "kept"})).json()["id"]
            r = await client.post(f"/api/threads/{kept}/runs", json={"message": "one"})
            assert helpers.sse_events(r.text)[-1]["type"] == "RUN_FINISHED", r.text
            backup = tmp_path / "backup.db"
            _backup(db, backup)
            later = (await client.post("/api/threads", json={"title": "later"})).json()["id"]
            r = await client.post(f"/api/threads/{kept}/runs", json={"message": "two"})
            assert helpers.sse_events(r.text)[-1]["type"] == "RUN_FINISHED", r.text
            _restore(db, backup)

            listed = (await client.get("/api/threads")).json()["threads"]
            assert [(t["id"], t["title"], t["running"]) for t in listed] == [(kept, "kept", False)]
            r = await client.post(f"/api/threads/{kept}/runs", json={"message": "three"})
            events = helpers.sse_events(r.text)
            assert events[-1]["type"] == "RUN_FINISHED", events[-1]
            shown = (await client.get(f"/api/threads/{kept}/messages")).json()["messages"]
            assert [m["text"] for m in shown] == ["one", "echo: one", "three", "echo: three"]
            # What the model read for turn three: the restored conversation, not turn two.
            seen = [m.text for m in provider.requests[-1].messages if m.role is Role.USER]
            assert seen == ["one", "three"]
            assert (await client.get(f"/api/threads/{later}")).status_code == 404
            listed = (await client.get("/api/threads")).json()["threads"]
            assert [t["id"] for t in listed] == [kept]
    finally:
        await app.aclose()
