"""A run dropped unclosed, its event loop gone, is finalized by the garbage collector away from
that loop: each frame of its loop (and of a sub-agent's run inside a tool) is closed on its own
there, and none awaits, closes a generator mid-step, restores a context or reports anything
(goagent_py/_closing.py; docs/scaling-out.md, "Tracing durable runs"). This is what a durable
worker's dropped workflow goes through; here a thread's event loop stops with the run mid-call.
Before, ``sys.unraisablehook`` printed "aclose(): asynchronous generator is already running"
and "async generator ignored GeneratorExit" (durotel17)."""

from __future__ import annotations

import asyncio
import gc
import logging
import sys
import threading
from typing import Any

import pytest

from goagent_py import Agent, Hooks, ToolCall
from goagent_py.provider import CompletionRequest
from goagent_py.testing import FunctionProvider, text_response, tool_call_response
from goagent_py.tools import tool


def _plan(name: str, args: dict[str, Any]) -> Any:
    def plan(request: CompletionRequest) -> Any:
        if len(request.messages) == 1:
            return tool_call_response(ToolCall("c1", name, args))
        return text_response("done")

    return plan


@pytest.mark.parametrize("stalled", ["tool", "hook", "flow"])
@pytest.mark.parametrize(
    "streamed", [False, True, "Agent.stream"], ids=["run", "stream", "agent_stream"]
)
def test_a_run_dropped_with_its_loop_is_finalized_silently(
    streamed: bool | str, stalled: str, caplog: pytest.LogCaptureFixture
) -> None:
    """Dropped mid-call in a sub-agent's tool, or in the parent's async hook."""
    entered = threading.Event()

    async def stall_hook(iteration: int, request: CompletionRequest) -> None:
        if stalled == "hook" and iteration == 1:  # after the sub-agent's answer
            entered.set()
            await asyncio.Event().wait()

    depth: list[int] = []

    @tool
    async def stall() -> str:
        """Wait for ever."""
        if stalled == "hook":
            return "done"
        if stalled == "flow" and not depth:
            depth.append(1)
            from goagent_py.orchestration import Pipeline

            # A flow inside the tool: its agents' runs, its state, deps and tallies.
            inner = Agent(provider=FunctionProvider(_plan("stall", {})), model="m", tools=[stall])
            return (await Pipeline(inner).run("again")).text
        entered.set()
        await asyncio.Event().wait()  # referenced only by this frame: dropped with it
        return "never"

    ended: list[str] = []
    child = Agent(provider=FunctionProvider(_plan("stall", {})), model="m", tools=[stall])
    parent = Agent(
        provider=FunctionProvider(_plan("helper", {"prompt": "go"})),
        model="m",
        tools=[child.as_tool(name="helper", description="Helps.")],
        hooks=Hooks(on_run_end=lambda result: ended.append("end"), on_provider_request=stall_hook),
    )

    async def drive() -> None:
        # A loop that finalizes nothing itself (as a Temporal workflow's): the garbage
        # collector closes each generator on its own.
        sys.set_asyncgen_hooks(firstiter=None, finalizer=None)
        if streamed == "Agent.stream":  # the public stream's own frame around the run's
            async for _ in parent.stream("hi"):
                pass
            return
        run = await parent.start_run("hi", streaming=bool(streamed))
        async for _ in run.events():
            pass

    loop = asyncio.new_event_loop()

    def run_loop(loop: asyncio.AbstractEventLoop) -> None:
        task = loop.create_task(drive())
        task._log_destroy_pending = False  # type: ignore[attr-defined]  # asyncio's own noise
        loop.call_soon(lambda: None)
        loop.run_forever()  # until stopped with the run mid-call; the task is dropped

    thread = threading.Thread(target=run_loop, args=(loop,))
    unraisable: list[Any] = []
    hook, sys.unraisablehook = sys.unraisablehook, unraisable.append
    try:
        thread.start()
        assert entered.wait(60)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(60)
        assert not thread.is_alive()
        loop.close()
        del loop
        gc.collect()
    finally:
        sys.unraisablehook = hook
    assert [
        f"{type(u.exc_value).__name__}: {u.exc_value} ({u.object!r:.80})" for u in unraisable
    ] == []
    noisy = [  # (asyncio's own "Task was destroyed but it is pending!" is the dropped loop's)
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.WARNING and r.name.startswith("goagent_py")
    ]
    assert noisy == []
    assert ended == []  # the dropped run's hooks see no end: it did not end there
