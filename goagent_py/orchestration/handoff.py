"""Handoffs: the model passes the conversation to another agent.

Each agent of a :class:`Handoffs` group gets a ``transfer_to_<name>`` tool per agent it may
hand off to. When its model calls one, the run stops after that turn's tool batch (the call has
its tool result, so the transcript stays valid for every provider) and the named agent carries
on from the conversation so far, with its own tools and its own system prompt::

    desk = Handoffs([triage, billing, tech], start="triage")
    result = await desk.run("I was charged twice")
    result.state["active"]      # "billing"
    result.messages             # the whole conversation, every agent's turns in order

Rules: at most one handoff per turn (the first transfer call of a response wins; the others
get error results saying so); thinking blocks never cross to another agent; ``input_filter``
decides what history the next agent sees (its answer is repaired into a valid transcript).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from goagent_py._transcript import repair_transcript, strip_thinking
from goagent_py.budget import BudgetExceededError
from goagent_py.errors import ConfigurationError, ToolError
from goagent_py.messages import ContentBlock, Message, Role, TextBlock
from goagent_py.options import TurnState
from goagent_py.orchestration._core import (
    Flow,
    FlowResult,
    MaxStepsError,
    NodeEnd,
    NodeStart,
    Scope,
    Step,
    StepFailedError,
    agent_prompt,
    attach_partial,
    combine,
    failed_run,
    flow_deps,
    still_waiting,
)
from goagent_py.results import RunResult
from goagent_py.tool_context import current_tool_context
from goagent_py.tools import ToolDefinition

if TYPE_CHECKING:
    from goagent_py.agent import Agent

__all__ = ["HandoffRefusedError", "Handoffs", "transfer_tool_name"]

_PREFIX = "transfer_to_"


def transfer_tool_name(agent_name: str) -> str:
    """The name of the tool that hands off to ``agent_name``."""
    return _PREFIX + agent_name


class HandoffRefusedError(ToolError):
    """A transfer call was refused: another transfer of the same response came first."""

    def __init__(self, tool_name: str, reason: str) -> None:
        self.tool_name = tool_name
        self.reason = reason
        super().__init__(f"{tool_name}: {reason}")

    def __reduce__(self) -> Any:
        return self._reduce_with(self.tool_name, self.reason)


class _Transfer:
    """The ``transfer_to_<target>`` tool; records the request for the group to act on."""

    def __init__(self, target: str, description: str, requests: dict[str, str]) -> None:
        self.target = target
        self._requests = requests
        self.siblings: frozenset[str] = frozenset()  # the transfer tools of the same agent
        self._definition = ToolDefinition(
            transfer_tool_name(target),
            description,
            {
                "type": "object",
                "properties": {
                    "reason": {"type": "string", "description": "Why this agent should take over."}
                },
            },
        )

    @property
    def definition(self) -> ToolDefinition:
        return self._definition

    async def execute(self, args: dict[str, Any]) -> list[ContentBlock]:
        ctx = current_tool_context()
        if ctx is None:
            raise ConfigurationError("a transfer tool only works inside a Handoffs run")
        transcript = ctx.transcript()
        calls = transcript[-1].tool_calls if transcript else [ctx.call]
        # The first call to a transfer this agent has: one to an agent it cannot reach (a
        # made-up name) fails on its own and does not block a valid one (issue 28).
        own = self.siblings or {self._definition.name}
        first = next((c for c in calls if c.name in own), ctx.call)
        if first.id != ctx.call.id:
            raise HandoffRefusedError(
                self._definition.name,
                f"only one handoff per turn; this response already hands off with {first.name}",
            )
        self._requests[ctx.run_id] = self.target
        return [TextBlock(f"Transferred to {self.target}; it takes over from here.")]


InputFilter = Callable[[list[Message]], Sequence[Message] | Awaitable[Sequence[Message]]]


class Handoffs(Flow):
    """A group of agents that hand the conversation to one another (see the module docstring).

    Args:
        agents: the agents (each needs a unique name).
        start: the agent that answers first (default: the first one).
        routes: ``{agent: [agents it may hand off to]}`` (default: every other agent).
        descriptions: what each transfer tool tells the model about its target (default: the
            first line of the target's system prompt).
        input_filter: ``messages -> messages`` the next agent sees (default: all of them).
        max_handoffs: the most handoffs in one run; past it the run fails with
            :class:`MaxStepsError` carrying the agents visited.
        name: the group's name in paths.

    Raises:
        ConfigurationError: no agents, an unnamed or repeated agent, an unknown start or route,
            or a transfer tool name that clashes with an agent's own tool.
    """

    def __init__(
        self,
        agents: Sequence[Agent],
        *,
        start: str | None = None,
        routes: Mapping[str, Sequence[str]] | None = None,
        descriptions: Mapping[str, str] | None = None,
        input_filter: InputFilter | None = None,
        max_handoffs: int = 5,
        name: str = "handoffs",
    ) -> None:
        from goagent_py.agent import Agent

        if not agents:
            raise ConfigurationError(f"Handoffs {name!r} needs at least one agent")
        by_name: dict[str, Agent] = {}
        for a in agents:
            if not isinstance(a, Agent) or not a.name:
                raise ConfigurationError(
                    f"Handoffs {name!r}: every member must be an Agent with a name"
                )
            if a.name in by_name:
                raise ConfigurationError(f"Handoffs {name!r}: two agents are named {a.name!r}")
            by_name[a.name] = a
        start = start or next(iter(by_name))
        if start not in by_name:
            raise ConfigurationError(f"Handoffs {name!r}: start {start!r} is not an agent")
        if routes is None:
            routes = {n: [m for m in by_name if m != n] for n in by_name}
        for source, targets in routes.items():
            for t in (source, *targets):
                if t not in by_name:
                    raise ConfigurationError(
                        f"Handoffs {name!r}: route {source!r} -> {t!r} names an unknown agent "
                        f"({', '.join(by_name)})"
                    )
            if source in targets:  # a transfer that restarts the same agent only loops
                raise ConfigurationError(
                    f"Handoffs {name!r}: route {source!r} -> {source!r}: an agent cannot hand "
                    "off to itself"
                )
        if isinstance(max_handoffs, bool) or not isinstance(max_handoffs, int) or max_handoffs < 0:
            raise ConfigurationError(f"Handoffs {name!r}: max_handoffs must be an int >= 0")
        descriptions = dict(descriptions or {})
        self._requests: dict[str, str] = {}
        self.agents: dict[str, Agent] = {}
        for n, a in by_name.items():
            transfers = [
                _Transfer(t, descriptions.get(t) or _describe(by_name[t]), self._requests)
                for t in routes.get(n, [])
            ]
            names = {tr.definition.name for tr in transfers}
            for tr in transfers:
                tr.siblings = frozenset(names)
            own = a.options.should_stop
            self.agents[n] = (
                a.replace(
                    tools=[*a.tools, *transfers],
                    should_stop=_stop_on_transfer(names, own),
                )
                if transfers
                else a
            )
        self.start = start
        self.input_filter = input_filter
        self.max_handoffs = max_handoffs
        self.name = name

    async def _history(self, transcript: list[Message], agent: Agent) -> list[Message]:
        """What ``agent`` starts from: the filtered history, repaired, opening on a user
        message, without tool blocks for an agent that has no tools (Anthropic and Bedrock
        refuse a request that carries them but defines none)."""
        chosen: Any = list(transcript)
        if self.input_filter is not None:
            chosen = self.input_filter(list(transcript))
            if not isinstance(chosen, Sequence):
                chosen = await chosen
        history = repair_transcript(strip_thinking(list(chosen)), "not shown to this agent")
        if not agent.tools:
            history = _without_tool_blocks(history)
        first_user = next((i for i, m in enumerate(history) if m.role is Role.USER), None)
        if first_user is None:
            raise ConfigurationError(
                f"Handoffs {self.name!r}: input_filter left {agent.name!r} no user message to "
                "answer; return at least the last user message"
            )
        return history[first_user:]

    async def _invoke(self, input: str, scope: Scope) -> FlowResult:
        start = time.perf_counter()
        transcript: list[Message] = []
        parts: list[tuple[str, FlowResult]] = []
        active = self.start
        handoffs: list[list[str]] = []
        held: list[list[Any]] = []  # [memory, how much of the transcript it holds]
        while True:
            agent = self.agents[active]
            here = scope.child(active)
            if parts:
                try:
                    history = await self._history(transcript, agent)
                    await self._keep(agent, history, transcript, held)
                except Exception as exc:  # the input_filter's error (or its misuse), a memory's
                    attach_partial(exc, self._result(start, parts, transcript, active, handoffs))
                    raise
                run = await agent.start_run(
                    None,
                    streaming=scope.emit is not None,
                    history=history,
                    path=here.path,
                    deps=flow_deps(),
                )
            else:
                run = await agent.start_run(
                    agent_prompt(input),
                    streaming=scope.emit is not None,
                    path=here.path,
                    deps=flow_deps(),
                )
            if here.emit is not None:
                here.emit(NodeStart(input if not parts else "", path=here.path))
            try:
                async with contextlib.aclosing(run.events()) as events:
                    async for event in events:
                        if here.emit is not None:
                            here.emit(event)
            except BudgetExceededError as exc:
                # The whole run is out of budget: raised as it is, carrying the conversation so
                # far, every agent's part, the one that ran out included (budget8).
                failed = getattr(exc, "run_result", None)
                transcript.extend(getattr(failed, "messages", None) or [])
                exc.partial = self._result(
                    start, parts, transcript, active, handoffs, self._spent(here, failed, exc)
                )
                raise
            except Exception as exc:
                if here.emit is not None:
                    here.emit(NodeEnd(None, exc, path=here.path))
                # What the failed run did is kept (its finished calls and results, closed):
                # a tool that ran before the failure stays in the record (review7a).
                failed = getattr(exc, "run_result", None)
                transcript.extend(getattr(failed, "messages", None) or [])
                error = StepFailedError(here.path, exc)
                error.partial = self._result(
                    start, parts, transcript, active, handoffs, self._spent(here, failed, exc)
                )
                raise error from exc
            finally:
                target = self._requests.pop(run.run_id, None)
            r = run.result
            assert r is not None
            transcript.extend(r.messages)
            waiting = still_waiting(active, r)
            if waiting is not None:  # its calls wait for a person: the desk stops (approve14)
                if here.emit is not None:
                    here.emit(NodeEnd(None, waiting, path=here.path))
                error = StepFailedError(here.path, waiting)
                error.partial = self._result(
                    start, parts, transcript, active, handoffs, self._spent(here, r, waiting)
                )
                raise error
            memory = agent.options.short_term_memory
            if memory is not None:  # it stored its part: it holds the conversation this far
                held[:] = [h for h in held if h[0] is not memory] + [[memory, len(transcript)]]
            step = Step(here.path, r.text, r.usage, r.iterations, r.duration)
            segment = FlowResult(r.text, r.usage, r.iterations, r.duration, (step,))
            parts.append((active, segment))
            if here.emit is not None:
                here.emit(NodeEnd(segment, path=here.path))
            if target is None:
                return self._result(start, parts, transcript, active, handoffs)
            if len(handoffs) >= self.max_handoffs:
                error2 = MaxStepsError(self.max_handoffs, (*(n for n, _ in parts), target))
                error2.partial = self._result(start, parts, transcript, active, handoffs)
                raise error2
            handoffs.append([active, target])
            active = target

    async def _keep(
        self,
        agent: Agent,
        history: list[Message],
        transcript: list[Message],
        held: list[list[Any]],
    ) -> None:
        """Store in ``agent``'s own short-term memory what it takes over: a run stores only its
        new messages, so its record would open on its own tool call (no user message), or,
        taking over again, miss the other agents' turns since its last one."""
        memory = agent.options.short_term_memory
        if memory is None:
            return
        at = next((n for m, n in held if m is memory), None)
        if at is None:
            await memory.append(*history)  # what it was handed, as it saw it
        elif self.input_filter is None and at < len(transcript):
            # The turns since (an input_filter may hide them: then they stay out).
            missed = repair_transcript(strip_thinking(transcript[at:]), "not shown to this agent")
            if not agent.tools:
                missed = _without_tool_blocks(missed)
            if missed:
                await memory.append(*missed)

    @staticmethod
    def _spent(here: Scope, failed: Any, error: BaseException) -> FlowResult | None:
        """What the agent that failed with ``error`` had spent (its run), or None."""
        return failed_run(here.path, failed, error) if isinstance(failed, RunResult) else None

    def _result(
        self,
        start: float,
        parts: list[tuple[str, FlowResult]],
        transcript: list[Message],
        active: str,
        handoffs: list[list[str]],
        failed: FlowResult | None = None,
    ) -> FlowResult:
        text = parts[-1][1].text if parts else ""
        state = {"active": active, "handoffs": handoffs}
        spent = () if failed is None else (failed,)
        out = combine(text, parts, start, state=state, failed=spent)
        return FlowResult(
            out.text,
            out.usage,
            out.iterations,
            out.duration,
            out.steps,
            out.trace,
            out.outputs,
            out.errors,
            out.state,
            tuple(transcript),
        )


def _without_tool_blocks(messages: list[Message]) -> list[Message]:
    """``messages`` without tool calls and tool results (an assistant message left empty goes
    too): the history of an agent that defines no tools."""
    out = []
    for m in messages:
        if m.role is Role.TOOL:
            continue
        if m.tool_calls:
            m = replace(m, tool_calls=[])
            if not m.content:
                continue
        out.append(m)
    return out


def _describe(agent: Agent) -> str:
    lines = (agent.options.system_prompt or "").strip().splitlines()
    about = lines[0] if lines else ""
    return f"Hand the conversation over to {agent.name}. {about}".strip()


def _stop_on_transfer(
    names: set[str], own: Callable[[TurnState], Any] | None
) -> Callable[[TurnState], Any]:
    async def stop(state: TurnState) -> bool:
        if any(r.call.name in names and not r.is_error for r in state.tool_results):
            return True
        if own is None:
            return False
        verdict = own(state)
        if not isinstance(verdict, bool):
            verdict = await verdict
        return bool(verdict)

    return stop
