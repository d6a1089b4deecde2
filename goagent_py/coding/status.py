"""The coding agent's status line: model, tokens used, cost where a price is known, context fill.

:class:`Status` is fed the run's events (:meth:`Status.see`) and renders one line
(:meth:`Status.line`), e.g. ``claude-x · 12.3k tokens (10.1k in, 2.2k out) · $0.041 ·
context 8.2k/200k (4%)``. The figures come from the providers' usage reports only: nothing is
estimated. The cost is shown only when a price was given (the library ships no price list, and
prices change); otherwise it is ``cost —``. The context fill is the size of the last top-level
model call (its input and output tokens) over the model's context window, when that is known.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from goagent_py.coding._terminal import printable
from goagent_py.events import MessageEnd, ToolExecutionUpdate
from goagent_py.messages import Role, Usage

__all__ = ["Price", "Status", "tokens_text"]


@dataclass(frozen=True, slots=True)
class Price:
    """What a model costs, in US dollars per million tokens."""

    input: float
    output: float

    def of(self, usage: Usage) -> float:
        """The cost of ``usage`` (cache tokens at the input price: a ceiling, not a guess)."""
        inputs = (
            usage.input_tokens + usage.cache_creation_input_tokens + usage.cache_read_input_tokens
        )
        return (inputs * self.input + usage.output_tokens * self.output) / 1_000_000


def tokens_text(n: int) -> str:
    """``n`` tokens, short: ``950``, ``12.3k``, ``1.2M``."""
    if n < 1000:
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.1f}k".replace(".0k", "k")
    return f"{n / 1_000_000:.1f}M".replace(".0M", "M")


@dataclass
class Status:
    """What the status line shows, kept up to date from the run's events.

    Args:
        model: the model's name (changed by ``/model``).
        context_window: the model's window in tokens; None when unknown (the fill is then
            shown as a count only).
        price: the model's price; None when unknown (the cost is shown as ``—``).
    """

    model: str = ""
    context_window: int | None = None
    price: Price | None = None
    used: Usage = field(default_factory=Usage)
    """Every model call's usage this session, sub-agents' included."""
    in_context: int | None = None
    """The tokens of the last top-level model call (its prompt and its answer)."""
    state: str = "idle"
    """What the agent is doing: ``idle``, ``working``, ``waiting for you``, ``aborting``."""

    def see(self, event: object) -> None:
        """Count the usage a finished assistant message reports (a sub-agent's too: its events
        arrive inside the ``ToolExecutionUpdate`` of the call that runs it)."""
        while isinstance(event, ToolExecutionUpdate):
            event = event.update
        if not isinstance(event, MessageEnd) or event.usage is None:
            return
        if event.message.role is not Role.ASSISTANT:
            return
        self.used = self.used + event.usage
        if not event.path:  # the sub-agents' calls have contexts of their own
            size = event.usage.total_tokens
            if size:
                self.in_context = size

    def reset_context(self) -> None:
        """The conversation was cleared or compacted: the fill is unknown until the next call."""
        self.in_context = None

    def line(self) -> str:
        """The status line."""
        u = self.used
        parts = [printable(self.model) if self.model else "model ?"]
        if u.total_tokens:
            ins = u.input_tokens + u.cache_creation_input_tokens + u.cache_read_input_tokens
            parts.append(
                f"{tokens_text(u.total_tokens)} tokens "
                f"({tokens_text(ins)} in, {tokens_text(u.output_tokens)} out)"
            )
        else:
            parts.append("0 tokens")
        parts.append("cost —" if self.price is None else f"${self.price.of(u):.3f}")
        fill = "—" if self.in_context is None else tokens_text(self.in_context)
        if self.context_window:
            fill += f"/{tokens_text(self.context_window)}"
            if self.in_context is not None:
                fill += f" ({100 * self.in_context // self.context_window}%)"
        parts.append(f"context {fill}")
        parts.append(self.state)
        return " · ".join(parts)
