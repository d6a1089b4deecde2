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

_FIRST_PERSON = frozenset(
    {"i", "i'm", "i've", "i'd", "i'll", "me", "my", "mine", "myself", "we", "our", "us"}
)


def is_statement(text: str, *, min_words: int = 3, about_user: bool = False) -> bool:
    """Whether ``text`` reads as a statement: not a question, at least ``min_words`` words,
    and, with ``about_user``, in the first person ("I", "my", "we"...).
    """
    stripped = text.strip()
    if not stripped or stripped.endswith("?"):
        return False
    words = stripped.split()
    if len(words) < min_words:
        return False
    if about_user:
        return any(w.strip(".,;:!\"'()").casefold() in _FIRST_PERSON for w in words)
    return True


def user_statements(
    *, min_words: int = 3, questions: bool = False, about_user: bool = False
) -> WritePolicy:
    """A write policy storing the user's message of a turn, never the model's answer.

    Args:
        min_words: a message with fewer words is not stored ("thanks", "hi there").
        questions: store questions too (by default a message ending in "?" is not stored).
        about_user: store only first-person statements ("My dog is called Biscuit."), not
            requests ("Calculate 250 - 37"), which recalled later read as facts.

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
            keep = len(text.split()) >= min_words and (
                not about_user or is_statement(text.rstrip("?"), min_words=0, about_user=True)
            )
        else:
            keep = is_statement(text, min_words=min_words, about_user=about_user)
        return [user] if keep else None

    return policy
