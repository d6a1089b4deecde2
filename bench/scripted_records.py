"""What the bench server's ScriptedProvider pays to record every request (issue 36).

Run with ``python bench/scripted_records.py [--users 50] [--turns 5 20 100]`` (never collected
as a test). ``goagent_py.testing.ScriptedProvider`` keeps a snapshot of every request it gets
(a test double's promise: ``provider.requests``), and a served chat's request carries the whole
conversation, so a user's turn ``t`` records ``2t + 1`` messages and the records of one
conversation grow with the square of its turns. This measures, for conversations shaped like
``bench/serve_load.py``'s (a short user line, the 24-word answer), the CPU of the snapshots a
turn (``time.process_time``, best of 5) and the memory they hold at the end (``tracemalloc``),
for the load's ``users x turns``; then the provider's whole call (``complete``) with every
record kept (the default) and with ``keep_requests=0`` (what the bench server passes).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import tracemalloc

from goagent_py._deepcopy import snapshot_request
from goagent_py.messages import Message, assistant_message, user_message
from goagent_py.provider import CompletionRequest
from goagent_py.testing import ScriptedProvider

ANSWER = " ".join(f"word{i}" for i in range(24))


def _requests(user: int, turns: int) -> list[CompletionRequest]:
    """The requests one user's conversation sends, turn by turn (each a new list, as the
    loop builds them; the messages are the storage's copies, new each turn)."""
    out: list[CompletionRequest] = []
    history: list[Message] = []
    for turn in range(turns):
        history = [*history, user_message(f"user{user} turn {turn}")]
        messages = [Message(m.role, list(m.content)) for m in history]
        out.append(CompletionRequest(model="scripted", messages=messages))
        history.append(assistant_message(ANSWER))
    return out


def measure(users: int, turns: int) -> tuple[float, int]:
    """(µs of CPU a turn for the snapshots, bytes the records hold at the end)."""
    requests = [r for u in range(users) for r in _requests(u, turns)]
    best = float("inf")
    for _ in range(5):
        start = time.process_time()
        for request in requests:
            snapshot_request(request, {})
        best = min(best, time.process_time() - start)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    recorded = [snapshot_request(r, {}) for r in requests]
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del recorded
    return best / len(requests) * 1e6, held


def measure_provider(users: int, turns: int, keep: int | None) -> tuple[float, int]:
    """(µs of CPU a call of ``ScriptedProvider.complete``, bytes its records hold at the end)
    with ``keep_requests=keep``."""
    requests = [r for u in range(users) for r in _requests(u, turns)]

    async def calls(provider: ScriptedProvider) -> None:
        for request in requests:
            await provider.complete(request)

    best = float("inf")
    for _ in range(5):
        provider = ScriptedProvider(*([ANSWER] * len(requests)), keep_requests=keep)
        start = time.process_time()
        asyncio.run(calls(provider))
        best = min(best, time.process_time() - start)
    provider = ScriptedProvider(*([ANSWER] * len(requests)), keep_requests=keep)
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    asyncio.run(calls(provider))
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return best / len(requests) * 1e6, held


def main(users: int, turns: list[int]) -> None:
    print(f"load average {os.getloadavg()[0]:.2f}")
    for t in turns:
        cpu, held = measure(users, t)
        n = users * t
        print(
            f"{users} x {t}: {cpu:.1f} µs of CPU a turn for the snapshot, records hold "
            f"{held / 1e6:.1f} MB at the end ({held / n / 1e3:.1f} kB a turn)"
        )
        for keep in (None, 0):
            cpu, held = measure_provider(users, t, keep)
            print(
                f"  ScriptedProvider(keep_requests={keep}).complete: {cpu:.1f} µs of CPU a "
                f"call, {held / 1e6:.2f} MB held at the end"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--turns", type=int, nargs="+", default=[5, 20, 100])
    ns = parser.parse_args()
    main(ns.users, ns.turns)
