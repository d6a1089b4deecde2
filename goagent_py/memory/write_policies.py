"""Long-term write policies that keep what the user said, not what the model made of it.

The agent's ``store_always`` keeps both sides of every turn. With a small or careless model
that poisons the memory: an invented answer ("You live in Paris.") is stored, recalled later as
if it were a fact, and repeated. :func:`user_statements` stores only the user's own statements
(questions and short remarks carry no fact worth recalling)::

    agent = Agent(provider=..., long_term_memory=memory, write_policy=user_statements())
"""

from __future__ import annotations

from goagent_py.errors import ConfigurationError
from goagent_py.memory.base import WritePolicy
from goagent_py.messages import Message

__all__ = ["is_statement", "user_statements"]


def is_statement(text: str, *, min_words: int = 3) -> bool:
    """Whether ``text`` reads as a statement: not a question, at least ``min_words`` words."""
    stripped = text.strip()
    if not stripped or stripped.endswith("?"):
        return False
    return len(stripped.split()) >= min_words


def user_statements(*, min_words: int = 3, questions: bool = False) -> WritePolicy:
    """A write policy storing the user's message of a turn, never the model's answer.

    Args:
        min_words: a message with fewer words is not stored ("thanks", "hi there").
        questions: store questions too (by default a message ending in "?" is not stored).

    Raises:
        ConfigurationError: ``min_words`` < 0.
    """
    if min_words < 0:
        raise ConfigurationError(f"user_statements(min_words={min_words}): must be >= 0")

    def policy(user: Message, assistant: Message) -> list[Message] | None:
        text = user.text.strip()
        if not text:
            return None
        if questions:
            keep = len(text.split()) >= min_words
        else:
            keep = is_statement(text, min_words=min_words)
        return [user] if keep else None

    return policy
