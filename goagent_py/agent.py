"""The Agent: a model, tools and memory around one ReAct loop."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from types import TracebackType
from typing import Any

from goagent_py._loop import Run
from goagent_py.dispatch import Dispatcher
from goagent_py.errors import ConfigurationError
from goagent_py.hooks import AgentEvent, RunResult
from goagent_py.messages import (
    ContentBlock,
    DocumentBlock,
    ImageBlock,
    TextBlock,
    ThinkingBlock,
)
from goagent_py.options import AgentOptions, Option, build_options
from goagent_py.tools import Tool

__all__ = ["Agent"]

_BLOCK_TYPES = (TextBlock, ImageBlock, DocumentBlock, ThinkingBlock)


def _check_blocks(blocks: tuple[Any, ...] | list[Any], where: str) -> list[ContentBlock]:
    if not blocks:
        raise ConfigurationError(
            f"{where} requires at least one content block, e.g. TextBlock('...')"
        )
    for block in blocks:
        if not isinstance(block, _BLOCK_TYPES):
            raise ConfigurationError(
                f"{where} takes content blocks (TextBlock, ImageBlock, DocumentBlock), "
                f"got {type(block).__name__}"
            )
        # Blocks validate themselves when built; re-check in case one was built around that.
        if isinstance(block, ImageBlock | DocumentBlock):
            type(block).__post_init__(block)  # type: ignore[arg-type]
    return list(blocks)


class Agent:
    """An agent: a model that calls tools in a loop until it answers.

    Configure it with ``with_*`` options or the same settings as keywords; both are validated
    here, so a bad setting fails at construction, never in the middle of a run::

        agent = Agent(with_provider(provider), with_model("claude-sonnet-4-6"), with_tool(add))
        answer = await agent.run("What is 2 + 3?")

    The agent keeps no per-run state: concurrent runs are safe when its memory is.
    """

    def __init__(self, *options: Option, **settings: Any) -> None:
        self._options: AgentOptions = build_options(options, settings)
        o = self._options
        self._tools: dict[str, Tool] = {t.definition.name: t for t in o.tools}
        self._connected = not o.mcp_connectors
        self._connect_lock = asyncio.Lock()
        self._closers: list[Callable[[], Awaitable[None]]] = []
        self._dispatcher = Dispatcher(
            self._tools,
            timeout=o.tool_timeout,
            circuit_breaker=o.circuit_breaker,
            retry=o.tool_retry,
            rate_limit=o.rate_limit,
            rate_limit_per_tool=o.rate_limit_per_tool,
            middlewares=o.dispatch_middlewares,
            hooks=o.hooks,
            logger=o.logger,
        )

    @property
    def options(self) -> AgentOptions:
        """The validated settings (read-only by convention)."""
        return self._options

    @property
    def name(self) -> str:
        """The agent's name ("" if none)."""
        return self._options.name

    @property
    def tools(self) -> list[Tool]:
        """The registered tools, in registration order (connector tools after local ones)."""
        return list(self._tools.values())

    async def _connect(self) -> None:
        if self._connected:
            return
        async with self._connect_lock:
            if self._connected:
                return
            added: list[Tool] = []
            try:
                for connector in self._options.mcp_connectors:
                    tools, close = await connector()
                    if close is not None:
                        self._closers.append(close)
                    added.extend(tools)
                AgentOptions.check_tools([*self._tools.values(), *added])
            except BaseException:
                await self.aclose()
                raise
            for t in added:
                self._tools[t.definition.name] = t
            self._connected = True

    async def _run(self, content: list[ContentBlock], *, streaming: bool) -> Run:
        await self._connect()
        defs = [t.definition for t in self._tools.values()]
        return Run(self._options, self._dispatcher, defs, content, streaming=streaming)

    async def run(self, prompt: str) -> str:
        """Run the agent on a text prompt and return its final answer.

        Raises:
            MaxIterationsError: the iteration budget ran out (the turn is still persisted).
            ProviderError: the model call failed.
            MemoryStoreError: memory could not be loaded.
        """
        return (await self.run_detailed(prompt)).text

    async def run_blocks(self, *blocks: ContentBlock) -> str:
        """Run the agent on content blocks (text, images, documents) and return its answer."""
        return (await self.run_blocks_detailed(*blocks)).text

    async def run_detailed(self, prompt: str) -> RunResult:
        """Like :meth:`run`, returning the whole :class:`RunResult` (answer, stop reason, usage).

        A failed run raises; the exception carries the run's result as ``exc.run_result``.
        """
        if not isinstance(prompt, str):
            raise ConfigurationError(
                f"run() takes a str prompt, got {type(prompt).__name__}; use run_blocks() "
                "for images and documents"
            )
        return await self._drain([TextBlock(prompt)])

    async def run_blocks_detailed(self, *blocks: ContentBlock) -> RunResult:
        """Like :meth:`run_blocks`, returning the whole :class:`RunResult`."""
        return await self._drain(_check_blocks(blocks, "run_blocks()"))

    async def _drain(self, content: list[ContentBlock]) -> RunResult:
        run = await self._run(content, streaming=False)
        async for _ in run.events():
            pass
        assert run.result is not None
        return run.result

    async def stream(self, prompt: str | list[ContentBlock]) -> AsyncIterator[AgentEvent]:
        """Run the agent and yield its events as they happen (text deltas when the provider
        streams). The last event is :class:`~goagent_py.AgentEnd`; failures raise as in run()."""
        content: list[ContentBlock] = (
            [TextBlock(prompt)] if isinstance(prompt, str) else _check_blocks(prompt, "stream()")
        )
        run = await self._run(content, streaming=True)
        # aclosing: a consumer that stops early still ends the run (on_run_end) right away.
        async with contextlib.aclosing(run.events()) as events:
            async for event in events:
                yield event

    def run_sync(self, prompt: str) -> str:
        """Blocking :meth:`run`, for scripts and notebooks without an event loop."""
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return asyncio.run(self.run(prompt))
        raise ConfigurationError(
            "run_sync() was called inside a running event loop: use 'await agent.run(...)'"
        )

    async def aclose(self) -> None:
        """Close what the agent's connectors opened. Idempotent."""
        closers, self._closers = self._closers, []
        for close in reversed(closers):
            try:
                await close()
            except Exception as exc:
                self._options.logger.warning("connector close failed: %s", exc)

    async def __aenter__(self) -> Agent:
        await self._connect()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        o = self._options
        return f"Agent(name={o.name!r}, model={o.model!r}, tools={list(self._tools)})"
