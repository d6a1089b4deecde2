"""Benchmark: tokens sent per turn over a 500-turn conversation, with and without compaction.

Run it from the repository root (it is a script, never a test)::

    PYTHONPATH=. .venv/bin/python bench/compaction.py [turns] [window]

Each turn is a user question, one tool call (a ~1.6 kB result) and an answer, run by a real
:class:`~goagent_py.Agent` in a :class:`~goagent_py.session.Session` against a scripted model.
It prints the context size of the requests (heuristic tokens) at some turns, the total sent,
the largest request, and for compaction the summary calls and what they cost (their input is
counted in the total, so the comparison is fair).
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from goagent_py import Agent
from goagent_py.memory.compaction import ClampParts, ClearToolResults, Summarize, Tiered
from goagent_py.memory.compactor import CompactionEvent, Compactor
from goagent_py.memory.tokens import HeuristicEstimator
from goagent_py.messages import Role, Usage
from goagent_py.provider import CompletionRequest, CompletionResponse
from goagent_py.session import Session
from goagent_py.testing import text_response, tool_call_response
from goagent_py.tools import tool

ESTIMATOR = HeuristicEstimator()


def size(request: CompletionRequest) -> int:
    """Heuristic tokens of the request's messages and system prompt."""
    return sum(ESTIMATOR.count(m) for m in request.messages) + ESTIMATOR.count_text(
        request.system_prompt
    )


@tool
def search(query: str) -> str:
    """Search the docs.

    Args:
        query: what to look for.
    """
    return f"results for {query}: " + "relevant passage about the topic. " * 45


class Model:
    """One tool call per question, then an answer; records the size of every request."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.sizes.append(size(request))
        if request.messages[-1].role is Role.TOOL:
            return text_response("Here is what I found: " + "a clear explanation. " * 12)
        return tool_call_response(("search", {"query": request.messages[-1].text[:40]}))


class Summariser:
    """A summary model that answers with a ~1 kB structured summary."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def complete(self, request: CompletionRequest) -> CompletionResponse:
        self.sizes.append(size(request))
        body = "## Goal\nAnswer the user's questions.\n## Decisions\n" + "- a decision\n" * 40
        return text_response(body, usage=Usage(self.sizes[-1], 250))


async def run(turns: int, compactor: Compactor | None) -> tuple[Model, float]:
    model = Model()
    options: dict[str, Any] = {"transform_context": compactor} if compactor else {}
    session = Session(Agent(provider=model, tools=[search], **options))
    start = time.perf_counter()
    for i in range(turns):
        await session.prompt(f"question {i}: how does feature {i % 37} interact with the rest?")
    return model, time.perf_counter() - start


def report(name: str, model: Model, seconds: float, extra: int = 0) -> None:
    per_turn = [model.sizes[i] + model.sizes[i + 1] for i in range(0, len(model.sizes), 2)]
    marks = [t for t in (1, 10, 50, 100, 250, 500) if t <= len(per_turn)]
    at = "  ".join(f"t{t}={per_turn[t - 1]:,}" for t in marks)
    total = sum(model.sizes) + extra
    print(f"{name:<18} tokens sent per turn: {at}")
    print(
        f"{'':<18} total {total:,}  largest request {max(model.sizes):,}  "
        f"mean per turn {total / len(per_turn):,.0f}  ({seconds:.1f} s)"
    )


async def main() -> None:
    turns = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    window = int(sys.argv[2]) if len(sys.argv) > 2 else 16_000
    plain, plain_s = await run(turns, None)
    summariser = Summariser()
    events: list[CompactionEvent] = []
    compactor = Compactor(
        Tiered([ClampParts(8000), ClearToolResults(4), Summarize(summariser, keep_last_groups=8)]),
        context_window=window,
        on_event=events.append,
    )
    compacted, compacted_s = await run(turns, compactor)
    print(f"{turns} turns, one tool call each; window {window:,} tokens (heuristic count)\n")
    report("no compaction", plain, plain_s)
    report("with compaction", compacted, compacted_s, extra=sum(summariser.sizes))
    print(
        f"{'':<18} {len(events)} compactions, {len(summariser.sizes)} summaries "
        f"({sum(summariser.sizes):,} summary input tokens, counted in the total); "
        f"over the window: {sum(s > window for s in compacted.sizes)} requests"
    )
    print(
        f"\ntotal sent: {sum(compacted.sizes) + sum(summariser.sizes):,} vs "
        f"{sum(plain.sizes):,} tokens "
        f"({(sum(compacted.sizes) + sum(summariser.sizes)) / sum(plain.sizes):.1%})"
    )


if __name__ == "__main__":
    asyncio.run(main())
