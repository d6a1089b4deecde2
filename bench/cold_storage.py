"""Cold storage: the first SQLite append of a new process (issue 36).

Run: python bench/cold_storage.py [--runs 9]

Each run starts a new interpreter that opens a ``SQLiteStorage`` on a new file and appends one
turn (a user message, an assistant message with a tool call, its result) twice. Prints the
median and minimum of the first append (it opens the connection and creates the table, then
writes) and of the second (the warm cost), in milliseconds, and whether pydantic was imported
by then (it should not be: the messages' JSON is written without it).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PROBE = """
import asyncio, json, sys, tempfile, time
from pathlib import Path
from goagent_py import Message, Role, TextBlock, ToolCall, user_message
from goagent_py.memory.storage.sqlite import SQLiteStorage

turn = [
    user_message("what is 2+3?"),
    Message(
        Role.ASSISTANT, [TextBlock("adding")], tool_calls=[ToolCall("c1", "add", {"a": 2, "b": 3})]
    ),
    Message(Role.TOOL, [TextBlock("5")], tool_call_id="c1"),
]

async def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        async with SQLiteStorage(Path(folder) / "chat.db", session_id="s") as storage:
            t0 = time.perf_counter()
            await storage.append(turn)
            t1 = time.perf_counter()
            await storage.append(turn)
            t2 = time.perf_counter()
    print(json.dumps({"first": t1 - t0, "second": t2 - t1, "pydantic": "pydantic" in sys.modules}))

asyncio.run(main())
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=9)
    args = parser.parse_args()
    rows = []
    for _ in range(args.runs):
        out = subprocess.run(
            [sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, cwd=ROOT
        )
        rows.append(json.loads(out.stdout))
    for key in ("first", "second"):
        ms = [r[key] * 1000 for r in rows]
        print(f"{key} append: median {statistics.median(ms):7.2f} ms   min {min(ms):7.2f} ms")
    print(f"pydantic imported by the appends: {any(r['pydantic'] for r in rows)}")


if __name__ == "__main__":
    main()
