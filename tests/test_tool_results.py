"""Tool results that are not text: serialised to JSON with a bound, in the worker thread for sync
tools, so an endless iterator or a huge value cannot block the loop or exhaust memory."""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import itertools
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic_core import to_json

from goagent_py import Agent, TextBlock, ToolCall, tool
from goagent_py._results import DEFAULT_RESULT_CHARS, bounded_json, to_blocks
from goagent_py.testing import ScriptedProvider, tool_call_response
from goagent_py.tool_context import ToolContext, _current, current_tool_context
from goagent_py.tools import run_in_thread

MARKER = "[truncated: the result was cut at"


@dataclasses.dataclass
class Row:
    id: int
    tags: list[str]


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1, "b": [1.5, None, True], "c": {"d": 'é\n"x"'}},
        [1, 2, 3],
        (1, "two"),
        {1: "int key", None: "none key"},
        Row(1, ["x"]),
        {"rows": [Row(2, [])], "set": {3}},
        b"bytes",
        12345678901234567890123,
    ],
)
def test_small_values_serialise_as_pydantic_does(value: Any) -> None:
    assert bounded_json(value, 1000) == to_json(value, fallback=str).decode()


def test_an_endless_iterator_is_cut_at_the_budget() -> None:
    text = bounded_json(itertools.count(), 1000)
    assert len(text) <= 1000
    assert text.startswith("[0,1,2,3,")
    assert MARKER in text


def test_iterators_inside_containers_are_bounded_too() -> None:
    consumed = 0

    def numbers() -> Iterator[int]:
        nonlocal consumed
        for i in itertools.count():
            consumed += 1
            yield i

    text = bounded_json({"head": "x", "items": numbers(), "pairs": map(str, range(3))}, 500)
    assert text.startswith('{"head":"x","items":[0,1,2,')
    assert MARKER in text
    assert consumed < 500  # each item costs at least one character


def test_huge_plain_values_are_cut_without_writing_them_whole() -> None:
    text = bounded_json({"blob": "y" * 10_000_000}, 2000)
    assert len(text) <= 2000
    assert MARKER in text
    text = bounded_json(list(range(1_000_000)), 2000)
    assert len(text) <= 2000
    assert text.startswith("[0,1,2")


def test_a_container_holding_itself_is_an_error_not_a_crash() -> None:
    loop: list[Any] = []
    loop.append(loop)
    with pytest.raises(ValueError, match="deeper than"):
        bounded_json(loop, 100_000)


def test_the_budget_comes_from_the_call_context() -> None:
    assert to_blocks(itertools.count())[0].text.count(",") > 1000  # type: ignore[union-attr]
    token = _current.set(ToolContext(call=ToolCall("c", "t", {}), max_result_chars=300))
    try:
        [block] = to_blocks(itertools.count())
    finally:
        _current.reset(token)
    assert isinstance(block, TextBlock)
    assert len(block.text) <= 300
    [block] = to_blocks(itertools.count())
    assert isinstance(block, TextBlock)
    assert len(block.text) >= DEFAULT_RESULT_CHARS // 2


async def test_a_sync_tool_result_is_serialised_in_its_worker_thread() -> None:
    threads: list[str] = []

    def rows() -> Iterator[int]:
        threads.append(threading.current_thread().name)
        yield 1

    @tool
    def listing() -> Any:
        """Rows."""
        return {"rows": rows()}

    assert await listing.execute({}) == [TextBlock('{"rows":[1]}')]
    assert threads == ["goagent-tool-listing"]


async def test_an_agent_survives_a_tool_that_returns_an_endless_iterator() -> None:
    @tool
    def numbers() -> Any:
        """All the numbers."""
        return itertools.count()

    @tool
    async def more_numbers() -> Any:
        """All the numbers, from an async tool."""
        return (i for i in itertools.count())

    provider = ScriptedProvider(
        tool_call_response(ToolCall("c1", "numbers", {}), ToolCall("c2", "more_numbers", {})),
        "done",
    )
    agent = Agent(provider=provider, tools=[numbers, more_numbers], max_tool_result_chars=5000)
    assert (await agent.run("count")).text == "done"
    results = provider.requests[1].messages[2:]
    assert len(results) == 2
    for message in results:
        text = message.text
        assert text.startswith("[0,1,2,3")
        assert "truncated" in text
        assert len(text) <= DEFAULT_RESULT_CHARS + 200


def test_the_process_survives_an_endless_iterator_under_a_memory_limit() -> None:
    # The reproduction of the report: before, this aborted the interpreter (rc -6) after the
    # generator filled the 2 GiB address space.
    script = textwrap.dedent(
        """
        import asyncio, itertools, resource
        resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))
        from goagent_py import Agent, ToolCall, tool
        from goagent_py.testing import ScriptedProvider, tool_call_response

        @tool
        def numbers() -> object:
            '''All the numbers.'''
            return itertools.count()

        provider = ScriptedProvider(tool_call_response(ToolCall("c1", "numbers", {})), "done")
        print(asyncio.run(Agent(provider=provider, tools=[numbers]).run("count")))
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "done"


async def test_run_in_thread_reuses_daemon_threads_and_carries_the_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    var.set("from the caller")

    def probe() -> tuple[str, bool, int, ToolContext | None]:
        t = threading.current_thread()
        return var.get(), t.daemon, t.ident or 0, current_tool_context()

    token = _current.set(ToolContext(call=ToolCall("c9", "probe", {})))
    before = set(threading.enumerate())
    try:
        seen = [await run_in_thread(probe) for _ in range(5)]
    finally:
        _current.reset(token)
    started = set(threading.enumerate()) - before
    assert {s[0] for s in seen} == {"from the caller"}
    assert all(s[1] for s in seen)  # daemons: a hung tool never blocks interpreter exit
    # Sequential calls reuse an idle worker: at most one thread is started for all five (any
    # idle worker left by an earlier test may take a call, so the idents may differ).
    assert len(started) <= 1
    assert len({s[2] for s in seen}) < 5 or not started
    assert all(s[3] is not None and s[3].call.id == "c9" for s in seen)


async def test_a_hung_call_does_not_hold_up_the_next_one() -> None:
    release = threading.Event()
    try:
        hung = asyncio.ensure_future(run_in_thread(release.wait))
        assert await run_in_thread(lambda: "next") == "next"
        assert not hung.done()
    finally:
        release.set()
    assert await hung is True


@pytest.mark.parametrize("value", [0, -7, 5, 10**40, True, 1.5])
@pytest.mark.parametrize("limit", [None, 1, 2, 1000])
def test_numbers_are_their_json_text_cut_as_anything_else(value: Any, limit: int | None) -> None:
    text = to_json(value).decode()
    budget = limit or DEFAULT_RESULT_CHARS
    expected = text if len(text) <= budget else bounded_json(value, budget)
    assert to_blocks(value, limit) == [TextBlock(expected)]
