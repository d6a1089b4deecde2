"""A session's turns interleaved with other writers of its conversation (issue 36): whatever the
storage keeps derived from earlier reads, the model is sent exactly what storage holds, and the
session shows exactly what storage holds after each turn."""

from __future__ import annotations

import random
import sqlite3
from pathlib import Path

import pytest

from goagent_py import Agent, Message, Session
from goagent_py.memory import ShortTermMemory
from goagent_py.memory.short_term import COMPACTION_METADATA_KEY
from goagent_py.memory.storage import SQLiteStorage
from goagent_py.messages import assistant_message, messages_to_json, user_message
from goagent_py.testing import ScriptedProvider


def _row(message: Message) -> str:
    return messages_to_json([message])[1:-1].decode()


async def _outside_write(rng: random.Random, path: Path, other: SQLiteStorage, step: int) -> str:
    """One change by someone else: another storage of the same file in this process (the
    shared writer), or a connection of its own (what another process does)."""
    raw = sqlite3.connect(path, isolation_level=None)
    try:
        found = raw.execute("SELECT seq FROM goagent_messages WHERE session_id = 's'")
        seqs = [seq for (seq,) in found]
        kind = rng.choice(["append", "delete", "rewrite", "boundary", "clear", "raw-append"])
        if kind == "append":
            await other.append([user_message(f"outside {step}"), assistant_message(f"ok {step}")])
        elif kind == "raw-append":
            start = max(seqs, default=-1) + 1
            raw.execute(
                "INSERT INTO goagent_messages VALUES ('s', ?, ?, 0)",
                (start, _row(user_message(f"raw {step}"))),
            )
        elif kind == "delete" and seqs:
            raw.execute(
                "DELETE FROM goagent_messages WHERE session_id = 's' AND seq = ?",
                (rng.choice(seqs),),
            )
        elif kind == "rewrite" and seqs:
            raw.execute(
                "UPDATE goagent_messages SET message = ? WHERE session_id = 's' AND seq = ?",
                (_row(assistant_message(f"rewritten {step}")), rng.choice(seqs)),
            )
        elif kind == "boundary":
            summary = {"summary": f"summary {step}", "covers": rng.randint(0, len(seqs))}
            boundary = assistant_message(f"summary {step}")
            boundary.metadata[COMPACTION_METADATA_KEY] = summary
            await other.append([boundary])
        elif kind == "clear":
            await other.clear()
        return kind
    finally:
        raw.close()


async def _fresh(path: Path) -> tuple[list[Message], list[Message]]:
    """The model's view and the transcript, read by a storage that has read nothing before
    (no derived state)."""
    async with SQLiteStorage(path, session_id="s") as storage:
        memory = ShortTermMemory(storage)
        return await memory.messages(), await memory.transcript()


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
async def test_the_model_gets_what_storage_holds_whatever_others_write(
    tmp_path: Path, seed: int
) -> None:
    rng = random.Random(seed)
    path = tmp_path / "chat.db"
    turns = 12
    provider = ScriptedProvider(*[f"answer {i}" for i in range(turns)])
    async with (
        SQLiteStorage(path, session_id="s") as storage,
        SQLiteStorage(path, session_id="s") as other,
    ):
        session = Session(
            Agent(provider=provider, model="m", short_term_memory=ShortTermMemory(storage))
        )
        done = []
        for turn in range(turns):
            if rng.random() < 0.7:
                done.append(await _outside_write(rng, path, other, turn))
            expected, _ = await _fresh(path)
            await session.prompt(f"turn {turn}")
            sent = provider.requests[-1].messages
            assert sent == [*expected, user_message(f"turn {turn}")], (seed, turn, done)
            _, transcript = await _fresh(path)
            assert session.transcript == transcript, (seed, turn, done)
        assert len(provider.requests) == turns
