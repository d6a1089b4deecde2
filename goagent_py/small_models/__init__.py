"""The small-model kit: what makes a ~100M-parameter local model useful in a chat.

Each piece wraps a provider or filters the context, so it works with any model; the chat,
``serve`` and ``mcp serve`` turn them on for the embedded default.

- :mod:`.tool_selection`: offer only the tools relevant to the message (embedding similarity),
  and limit tool rounds.
- :mod:`.tool_answers`: answer directly from known tools' results and from the user's own
  recalled statements.
- :mod:`.context_filters`: ``transform_context`` helpers (failed exchanges out, memories said
  back in the second person).
- :mod:`.repeat_guard`: ask again when an answer copies an earlier one.
"""

from goagent_py.small_models.context_filters import (
    drop_earlier_tool_exchanges,
    drop_failed_tool_exchanges,
    inline_memories,
)
from goagent_py.small_models.repeat_guard import avoid_repeats
from goagent_py.small_models.tool_answers import answer_from_tools
from goagent_py.small_models.tool_selection import limit_tool_rounds, select_tools

__all__ = [
    "answer_from_tools",
    "avoid_repeats",
    "drop_earlier_tool_exchanges",
    "drop_failed_tool_exchanges",
    "inline_memories",
    "limit_tool_rounds",
    "select_tools",
]
