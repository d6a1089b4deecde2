"""A run-wide budget: model calls, tokens and wall time shared by an agent and its sub-agents.

A :class:`Budget` is made active for a block of code (``with budget:``, or
``flow.run(input, budget=...)``); everything started inside draws from it: orchestration nodes,
agents called as tools (:func:`~goagent_py.agent_tool.as_tool`) at any depth, handoffs. Before
each model call the budget is checked, and a run past it ends with :class:`BudgetExceededError`,
so a delegation chain cannot run away::

    budget = Budget(max_iterations=20, max_tokens=50_000, max_seconds=120)
    lead = budget.guard(Agent(provider=p, tools=[researcher.as_tool(name=..., description=...)]))
    with budget:
        result = await lead.run("...")
    budget.iterations, budget.tokens          # what the lead and its sub-agents spent

Every model call of every agent run inside ``with budget:`` draws from it exactly once: the
loop checks the active budgets before each call and charges them after, whether the agent was
run by you at the top, as a tool, as a node or through a handoff. Budgets nest: one made active
inside another (a flow with its own budget inside a bigger run) does not hide it, and each call
counts once in each. :meth:`guard` makes an agent draw from a budget wherever it runs (and
makes it active around the agent's tool calls, so its sub-agents draw from it too). A
sub-agent that runs out is an error result its parent's model reads; the parent's next model
call then fails with the same error.

Concurrent branches (``Parallel``, parallel tool calls) check the budget before their calls and
are charged after them, so the token limit may be overshot by up to one call per branch running
at the same time; the iteration limit is exact.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any, Literal, Protocol, Self, TypeVar

from goagent_py._dispatch_types import DispatchFunc, DispatchMiddleware
from goagent_py.errors import ConfigurationError, GoAgentError
from goagent_py.hooks import Hooks
from goagent_py.messages import ContentBlock, ToolCall, Usage
from goagent_py.options import AgentOptions, PrepareTurn
from goagent_py.provider import CompletionRequest
from goagent_py.results import ModelResponse

__all__ = ["Budget", "BudgetExceededError", "active_budgets", "before_call", "current_budget"]


class _Guardable(Protocol):
    """What :meth:`Budget.guard` needs of an agent (an :class:`~goagent_py.Agent`)."""

    @property
    def options(self) -> AgentOptions: ...

    def replace(
        self,
        *,
        prepare_turn: PrepareTurn | None,
        hooks: list[Hooks],
        dispatch_middlewares: list[DispatchMiddleware],
    ) -> Self: ...


_A = TypeVar("_A", bound=_Guardable)

Kind = Literal["iterations", "tokens", "seconds"]


class BudgetExceededError(GoAgentError):
    """A run-wide budget ran out before a model call.

    Attributes:
        kind: "iterations", "tokens" or "seconds".
        limit: the budget's limit for that kind.
        spent: what was spent when the call was refused.
        partial: when an orchestration ran out, what it had done and spent (a
            :class:`~goagent_py.orchestration.FlowResult`, as ``StepFailedError.partial``:
            its usage and model calls include the agent that ran out, and every nested
            level's; for :class:`~goagent_py.orchestration.Handoffs`, ``messages`` holds the
            whole conversation, the part of the agent that ran out included); None otherwise.
            Not pickled.
    """

    # Typed Any: orchestration sits above this module (it imports the budget), so no FlowResult
    # here; set by the compositions the budget ran out in, each folding in the deeper one's.
    partial: Any = None

    def __init__(self, kind: Kind, limit: float, spent: float) -> None:
        self.kind = kind
        self.limit = limit
        self.spent = spent
        super().__init__(f"the run-wide budget is spent: {kind} {spent:g} of {limit:g}")

    def __reduce__(self) -> Any:
        fn, args, state = self._reduce_with(self.kind, self.limit, self.spent)
        if state is not None:  # like run_result, the partial result stays behind
            state = {k: v for k, v in state.items() if k != "partial"} or None
        return fn, args, state


# Every budget active in this task, outermost first: a budget entered inside another (a flow
# run with its own budget inside ``with budget:``) does not hide the one around it.
_active: ContextVar[tuple[Budget, ...]] = ContextVar("goagent_budgets", default=())
_entered: ContextVar[tuple[Token[tuple[Budget, ...]], ...]] = ContextVar(
    "goagent_budget_entered", default=()
)


def current_budget() -> Budget | None:
    """The innermost budget active in this task (None outside ``with budget:``)."""
    active = _active.get()
    return active[-1] if active else None


def active_budgets() -> tuple[Budget, ...]:
    """Every budget active in this task, outermost first (each once)."""
    return _active.get()


def before_call(budgets: tuple[Budget, ...]) -> None:
    """Check every budget of ``budgets``, then count one model call in each (what runs do
    before each call): a call one of them refuses is counted in none."""
    for budget in budgets:
        budget.check()
    for budget in budgets:
        budget.iterations += 1


def _limit(value: float | None, name: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0:
        raise ConfigurationError(f"Budget {name} must be a positive number or None, got {value!r}")
    return value


class Budget:
    """Limits shared by every agent run while the budget is active (see the module docstring).

    Args:
        max_iterations: the most model calls in all.
        max_tokens: the most tokens (``Usage.total_tokens``) in all.
        max_seconds: the most wall-clock seconds since the budget was first made active.
        clock: the monotonic clock (inject one in tests).

    Attributes:
        iterations: model calls made so far.
        tokens: tokens spent so far.
    """

    def __init__(
        self,
        *,
        max_iterations: int | None = None,
        max_tokens: int | None = None,
        max_seconds: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_iterations = _limit(max_iterations, "max_iterations")
        self.max_tokens = _limit(max_tokens, "max_tokens")
        self.max_seconds = _limit(max_seconds, "max_seconds")
        self._clock = clock
        self._started: float | None = None
        self.iterations = 0
        self.tokens = 0

    # -- activation --------------------------------------------------------------------------

    def __enter__(self) -> Budget:
        if self._started is None:
            self._started = self._clock()
        # The token stack lives in the context, not on the budget: tasks that enter the same
        # budget concurrently (parallel tool calls, a task group) exit in any order.
        active = _active.get()
        _entered.set((*_entered.get(), _active.set(active if self in active else (*active, self))))
        return self

    def __exit__(self, *exc: object) -> None:
        *rest, token = _entered.get()
        _entered.set(tuple(rest))
        _active.reset(token)

    @property
    def elapsed(self) -> float:
        """Seconds since the budget was first made active (0 before)."""
        return 0.0 if self._started is None else self._clock() - self._started

    def remaining_seconds(self) -> float | None:
        """Seconds left of ``max_seconds`` (None: no wall-time limit); flows bound each node
        by it, so a node still running when the time is up is stopped."""
        if self.max_seconds is None:
            return None
        return max(0.0, self.max_seconds - self.elapsed)

    # -- accounting --------------------------------------------------------------------------

    def check(self) -> None:
        """Raise :class:`BudgetExceededError` if any limit is reached."""
        if self.max_iterations is not None and self.iterations >= self.max_iterations:
            raise BudgetExceededError("iterations", self.max_iterations, self.iterations)
        if self.max_tokens is not None and self.tokens >= self.max_tokens:
            raise BudgetExceededError("tokens", self.max_tokens, self.tokens)
        if self.max_seconds is not None and self.elapsed >= self.max_seconds:
            raise BudgetExceededError("seconds", self.max_seconds, round(self.elapsed, 3))

    def before_call(self) -> None:
        """Check the budget, then count one model call (what runs do before each call)."""
        self.check()
        self.iterations += 1

    def charge(self, usage: Usage) -> None:
        """Count the tokens of a model call."""
        self.tokens += usage.total_tokens

    # -- agents run at the top ---------------------------------------------------------------

    def guard(self, agent: _A) -> _A:
        """A copy of ``agent`` that also draws from this budget, besides the budgets active
        where it runs (once per call: a guarded agent run inside ``with budget:`` of the same
        budget is counted once).

        The guarded agent also makes this budget active around each of its tool calls, so the
        agents it calls as tools (and their own sub-agents) draw from it too."""
        own = agent.options.prepare_turn

        def activate(next_call: DispatchFunc) -> DispatchFunc:
            async def call(tool_call: ToolCall) -> list[ContentBlock]:
                if self in active_budgets():
                    return await next_call(tool_call)
                with self:  # each call's own context: calls of one turn run concurrently
                    return await next_call(tool_call)

            return call

        async def prepare(request: CompletionRequest) -> CompletionRequest:
            if self not in active_budgets():
                self.before_call()
            if own is None:
                return request
            shaped: Any = own(request)
            if not isinstance(shaped, CompletionRequest):
                shaped = await shaped
            return shaped  # type: ignore[no-any-return]

        def charge(iteration: int, response: ModelResponse) -> None:
            if response.error is None and self not in active_budgets():
                self.charge(response.usage)

        return agent.replace(
            prepare_turn=prepare,
            hooks=[*agent.options.hook_sets, Hooks(on_provider_response=charge)],
            dispatch_middlewares=[*agent.options.dispatch_middlewares, activate],
        )
