"""The agent of ``goagent-py chat``, ``serve`` and ``mcp serve``, built in one place.

Each command picks a provider (:func:`~goagent_py.cli._common.pick_provider`), makes one
:class:`AgentKit` for the process (the small-model kit is applied to the provider once), and
builds its agents with :func:`build_agent`: one per chat, one per ``serve`` thread, one behind
``mcp serve``'s ``ask`` tool. So the three answer alike: ``ask("What is 12 * 12?")`` gets the
chat's "12 * 12 = 144", not the clock.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from goagent_py.cli._common import SMALL_MODEL_PROMPT, SYSTEM_PROMPT
from goagent_py.errors import GoAgentError

if TYPE_CHECKING:
    from goagent_py.agent import Agent
    from goagent_py.cli._common import Picked
    from goagent_py.events import CompactionEvent
    from goagent_py.memory.compactor import Compactor
    from goagent_py.memory.policies import TokenWindow
    from goagent_py.memory.tokens import TokenEstimator
    from goagent_py.messages import Message, ScoredMessage

__all__ = [
    "AgentKit",
    "CountingModel",
    "MessageTooLongError",
    "agent_kit",
    "build_agent",
    "context_fit",
    "system_prompt",
    "within_context",
]

MAX_ITERATIONS = 6
TOOL_TIMEOUT = 30.0
REQUEST_RESERVE = 768
"""Tokens of a model's context window kept for what the conversation window does not hold:
the system prompt, the tool definitions (about 400 for the chat's two tools in the default
model's template) and the recalled facts."""


@runtime_checkable
class CountingModel(Protocol):
    """A provider that knows its context window and counts with its own tokenizer
    (:class:`~goagent_py.providers.llama_cpp.LlamaCppProvider`)."""

    @property
    def context_window(self) -> int: ...

    @property
    def max_tokens(self) -> int: ...

    def token_estimator(self) -> TokenEstimator: ...


def context_fit(provider: Any) -> TokenWindow | None:
    """A window that keeps the conversation inside ``provider``'s context window, counted with
    its own tokenizer (None for a provider that cannot count): the window less the answer's
    ``max_tokens`` and :data:`REQUEST_RESERVE`."""
    from goagent_py.memory.policies import TokenWindow

    if not isinstance(provider, CountingModel):
        return None
    budget = provider.context_window - provider.max_tokens - REQUEST_RESERVE
    return TokenWindow(max(budget, 256), estimator=provider.token_estimator())


class MessageTooLongError(GoAgentError):
    """The turn being answered is longer than all the model can read: nothing was sent.

    Attributes:
        tokens: the turn's size, counted by the model's own tokenizer.
        budget: what the model reads of a conversation (its context window less the room kept
            for the answer, the instructions and the tools).
    """

    def __init__(self, tokens: int, budget: int, *, with_results: bool = False) -> None:
        self.tokens = tokens
        self.budget = budget
        self.with_results = with_results
        what = (
            "this turn (your message and its tool results) is"
            if with_results
            else ("your message is")
        )
        super().__init__(
            f"{what} {tokens:,} tokens and this model reads at most {budget:,} (its context "
            "window less room for the answer and its instructions), so it was not sent to the "
            "model. Shorten the message or send it in parts, or choose a model with a larger "
            "context window (--provider)"
        )

    def __reduce__(self) -> Any:
        return self._reduce_with(self.tokens, self.budget, with_results=self.with_results)


class _Within:
    """``transform`` (the chat's own context transform, or none), then ``fit``: every request,
    the new message included, cut to what the model can read. A window on the stored history
    alone let a pasted text push the request past the model's context window: the history is
    windowed before the new message joins it.

    The turn being answered (from its user message on) is never cut: a turn longer than the
    window raises :class:`MessageTooLongError` before the model is called (llama.cpp's own
    "Requested tokens (...) exceed context window" told the user nothing to do, and a turn cut
    at its start would send the model tool results without the question)."""

    def __init__(self, transform: Callable[[list[Message]], Any] | None, fit: TokenWindow) -> None:
        self.transform = transform
        self.fit = fit

    async def __call__(self, messages: list[Message]) -> list[Message]:
        turn = messages[_turn_start(messages) :]
        tokens = sum(self.fit.estimator.count(m) for m in turn)
        if tokens > self.fit.max_tokens:  # checked first: no summary is made for nothing
            raise MessageTooLongError(tokens, self.fit.max_tokens, with_results=len(turn) > 1)
        if self.transform is not None:
            done = self.transform(messages)
            messages = list(await done if inspect.isawaitable(done) else done)
        return self.fit.apply(messages)


class _WithinCompactor(_Within):
    """:class:`_Within` around a :class:`~goagent_py.memory.Compactor`, which ``/compact``
    (:meth:`goagent_py.Session.compact_now`) finds through it."""

    transform: Compactor
    # The run hands it the record's messages: the compactor copies them for its strategy, and
    # ``fit`` only picks (see Compactor._keeps_messages).
    _keeps_messages = True

    async def compact_now(self, messages: list[Message], *, focus: str = "") -> list[Message]:
        """The compactor's :meth:`~goagent_py.memory.Compactor.compact_now`."""
        return await self.transform.compact_now(messages, focus=focus)

    @property
    def events(self) -> Sequence[CompactionEvent]:
        """The compactor's events (the last one is what ``/compact`` reports)."""
        return self.transform.events


def _turn_start(messages: Sequence[Message]) -> int:
    """The index of the last user message (where the turn being answered starts); 0 if none."""
    from goagent_py.messages import Role

    for i in range(len(messages) - 1, -1, -1):
        if messages[i].role == Role.USER:
            return i
    return 0


def within_context(transform: Any, fit: TokenWindow) -> _Within:
    """``transform`` then ``fit`` (see :class:`_Within`); a compactor stays reachable by
    ``/compact``."""
    from goagent_py.memory.compactor import Compactor

    if isinstance(transform, Compactor):
        return _WithinCompactor(transform, fit)
    return _Within(transform, fit)


def system_prompt(given: str | None, *, small: bool) -> str:
    """The user's own prompt, else the default: a short one for a small model (a long one is
    copied, or answered, instead of the user's message)."""
    if given:
        return given
    return SMALL_MODEL_PROMPT if small else SYSTEM_PROMPT


@dataclass(slots=True, frozen=True)
class AgentKit:
    """What every agent of a process shares.

    Attributes:
        provider: the picked provider, wrapped in the small-model kit when ``small``.
        model: the model name.
        system_prompt: the system prompt.
        small: whether the small-model kit applies (wrapped provider, short window, recalled
            facts quoted next to the question).
        selector: the tool selector inside the kit (its ``last_selection`` is what ``/tools``
            shows), or None.
        fit: the window that keeps a conversation inside the model's context window, counted
            with the model's own tokenizer (:func:`context_fit`), or None when the provider
            cannot count.
    """

    provider: Any
    model: str
    system_prompt: str
    small: bool
    selector: Any = None
    fit: TokenWindow | None = None


def agent_kit(
    picked: Picked, *, small: bool | None = None, embedder: Any = None, system: str | None = None
) -> AgentKit:
    """The kit for ``picked``: ``small`` (default: ``picked.small``) wraps its provider in the
    small-model kit, with ``embedder`` for tool selection; ``system`` replaces the default
    system prompt."""
    from goagent_py.cli._setup import small_model_provider

    small = picked.small if small is None else small
    provider = picked.provider
    selector = None
    if small:
        provider = small_model_provider(provider, embedder)
        # answer_from_tools(avoid_repeats(select_tools(...))) when there is an embedder
        inner = provider.provider.provider
        selector = inner if hasattr(inner, "last_selection") else None
    prompt = system_prompt(system, small=small)
    fit = context_fit(picked.provider)
    return AgentKit(provider, picked.model, prompt, small, selector, fit)


def build_agent(
    kit: AgentKit,
    *,
    name: str,
    short_term_memory: Any = None,
    long_term_memory: Any = None,
    write_policy: Any = None,
    recalled: list[ScoredMessage] | None = None,
    transform_context: Any = None,
    hooks: Sequence[Any] = (),
    **settings: Any,
) -> Agent:
    """An agent of ``kit``: the built-in tools, the kit's provider and prompt, the memories.

    Args:
        kit: the process's :class:`AgentKit`.
        name: the agent's name (long-term memory is scoped by it).
        short_term_memory: the conversation; with a small model its window becomes the last 4
            messages (the model imitates what it reads, and long prompts are slow on a CPU).
        long_term_memory: recall across sessions, stored with ``write_policy``.
        recalled: a list the agent keeps filled with what long-term memory recalled for the
            turn (``/memory`` shows it); the small-model kit quotes the best of it to the model.
        transform_context: replaces the kit's own context transform (``--compact``). The
            kit's own one cuts every request, the new message included, to what fits in the
            model's context window (with the kit's ``fit``, counted by the model's tokenizer: a
            pasted Chinese text is ~3x what the ``bytes / 4`` heuristic says).
        hooks: more hooks.
        **settings: further :class:`~goagent_py.Agent` settings (``mcp_servers``, ``logger``...).
    """
    from goagent_py.agent import Agent
    from goagent_py.cli._setup import small_model_context
    from goagent_py.cli._tools import calculator, current_time
    from goagent_py.hooks import Hooks
    from goagent_py.memory.policies import FixedWindow

    log: list[ScoredMessage] = [] if recalled is None else recalled

    def remember(results: list[ScoredMessage], duration: float, error: Any) -> None:
        log[:] = results

    if short_term_memory is not None:
        settings["short_term_memory"] = short_term_memory
        if kit.small:
            short_term_memory.policy = FixedWindow(4)
    if long_term_memory is not None:
        settings["long_term_memory"] = long_term_memory
        if write_policy is not None:
            settings["write_policy"] = write_policy
    if transform_context is None and kit.small:
        transform_context = small_model_context(lambda: log)
    if kit.fit is not None:
        transform_context = within_context(transform_context, kit.fit)
    if transform_context is not None:
        settings["transform_context"] = transform_context
    return Agent(
        provider=kit.provider,
        model=kit.model,
        name=name,
        system_prompt=kit.system_prompt,
        tools=[current_time, calculator],
        max_iterations=MAX_ITERATIONS,
        tool_timeout=TOOL_TIMEOUT,
        hooks=[Hooks(on_long_term_retrieve=remember), *hooks],
        **settings,
    )
