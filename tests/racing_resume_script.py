"""A process that resumes a waiting conversation on a SQLite record when told to.

Run as ``python racing_resume_script.py PATH TOKEN LOG``: it builds its agent, prints
``ready``, waits for a line on stdin, then approves the waiting call ``c1`` (under
``TOKEN``) and prints the outcome as JSON. The tool appends this process's id to LOG when it
runs. Used by tests/test_approve15_racing_resumes.py; not a test module.
"""

import asyncio
import json
import os
import sys

from goagent_py import Agent, Approve, tool
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.testing import ScriptedProvider

path, token, log = sys.argv[1], sys.argv[2], sys.argv[3]


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay.

    Args:
        amount: how much.
    """
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\n")
    return f"paid {amount}"


async def main() -> None:
    agent = Agent(
        provider=ScriptedProvider("paid it"),
        tools=[pay],
        short_term_memory=ShortTermMemory(storage=SQLiteStorage(path, session_id="s")),
    )
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
    try:
        result = await agent.resume({"c1": Approve(token=token)})
    except Exception as exc:
        print(json.dumps({"error": type(exc).__name__}), flush=True)
        return
    out = {"text": result.text, "iterations": result.iterations, "ran": result.tool_calls}
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
