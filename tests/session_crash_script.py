"""A process that runs session turns on a SQLite record and kills itself at a chosen point.

Run as ``python session_crash_script.py PATH WHERE AT BASE TURNS``: it kills itself with
SIGKILL at the AT-th ``WHERE`` event (``model`` call, ``tool`` run or ``stream`` delta). BASE
makes its tool-call ids unique across processes sharing the file, as a vendor's are. Used by
tests/test_session_record.py and tests/test_session_stateful.py; not a test module.
"""

import asyncio
import os
import signal
import sys
from collections.abc import AsyncIterator

from goagent_py import Agent, Session, ToolCall, tool
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage.sqlite import SQLiteStorage
from goagent_py.provider import CompletionRequest, StreamDone, StreamEvent, TextDelta
from goagent_py.testing import ScriptedProvider, text_response, tool_call_response

path, where, at, base, turns = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:6])
counts = {"model": 0, "tool": 0, "stream": 0}


def tick(kind: str) -> None:
    counts[kind] += 1
    if kind == where and counts[kind] == at:
        os.kill(os.getpid(), signal.SIGKILL)


@tool
def fast(n: int) -> str:
    """Answer at once."""
    tick("tool")
    return f"fast {n}"


class Model(ScriptedProvider):
    async def stream(self, request: CompletionRequest) -> AsyncIterator[StreamEvent]:
        tick("model")
        self.requests.append(request)
        n = base + len(self.requests)
        if request.messages[-1].role.value == "user":
            response = tool_call_response(
                ToolCall(f"crash_{n}_a", "fast", {"n": n}),
                ToolCall(f"crash_{n}_b", "fast", {"n": -n}),
            )
        else:
            response = text_response(f"crash answer {n} is here")
        for word in response.message.text.split(" ") if response.message.text else []:
            yield TextDelta(word + " ")
            tick("stream")
        yield StreamDone(response)


async def main() -> None:
    async with SQLiteStorage(path, session_id="s") as storage:
        agent = Agent(provider=Model(), tools=[fast], short_term_memory=ShortTermMemory(storage))
        session = Session(agent)
        await session.load()
        for i in range(turns):
            await session.prompt(f"crash question {base} {i}")


asyncio.run(main())
