"""What the agent needs from memory: the protocols, and the long-term write policies."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Protocol, runtime_checkable

from goagent_py.errors import ConfigurationError
from goagent_py.messages import ContentBlock, Message, ScoredMessage

if TYPE_CHECKING:  # numpy stays out of `import goagent_py`
    import numpy as np
    from numpy.typing import NDArray

__all__ = [
    "MEMORY_CREATED_AT_KEY",
    "MEMORY_FOLLOWS_KEY",
    "MEMORY_FORMERLY",
    "MEMORY_INVALID_AT_KEY",
    "MEMORY_RECALLED_KEY",
    "MEMORY_STATE_KEY",
    "MEMORY_TURN_KEY",
    "BatchEmbedder",
    "Chunk",
    "Chunker",
    "Embedder",
    "LongTermMemoryProtocol",
    "ShortTermMemoryProtocol",
    "UpdatableMemory",
    "WritePolicy",
    "embedder_identity",
    "min_length",
    "store_always",
]


@runtime_checkable
class ShortTermMemoryProtocol(Protocol):
    """The conversation so far: what the agent loads before a run and appends after it."""

    async def messages(self) -> list[Message]:
        """The history to send, oldest first (after any window policy)."""
        ...

    async def append(self, *messages: Message) -> None:
        """Add the messages of a finished turn, atomically."""
        ...


MessageMatch = Callable[[Message], bool]
MessageUpdate = Callable[[Message], Message]


@runtime_checkable
class UpdatableMemory(Protocol):
    """A conversation store that can replace one stored message atomically: the
    compare-and-set that lets the first of two deciders of a waiting tool call win
    (docs/approvals.md). :class:`~goagent_py.memory.ShortTermMemory` has it when its storage
    does (in memory, SQLite)."""

    async def update_where(self, match: MessageMatch, update: MessageUpdate) -> Message | None:
        """In one transaction: find the newest stored message ``match`` accepts, store
        ``update(message)`` in its place and return it; None when no message matches. An
        exception from ``update`` leaves everything as it was and propagates."""
        ...


@runtime_checkable
class LongTermMemoryProtocol(Protocol):
    """Semantic memory across sessions: store what matters, recall what is relevant."""

    async def retrieve(
        self, query: list[ContentBlock], *, top_k: int | None, session: str = ""
    ) -> list[ScoredMessage]:
        """The ``top_k`` stored messages most relevant to ``query``, best first.

        ``top_k=None`` means the memory's own default (the agent passes None unless its
        ``long_term_top_k`` is set, so one owner decides).

        ``session`` is the agent's name ("" for none): only that session's memories come back.
        A query with nothing to embed (an image for a text embedder) returns ``[]``.
        """
        ...

    async def store(self, messages: list[Message], *, session: str = "") -> None:
        """Store ``messages`` under ``session``."""
        ...


MEMORY_STATE_KEY = "memory_state"
"""The metadata key of a long-term memory's state: ``"current"``, ``"superseded"`` (a newer
fact replaced it) or ``"deleted"`` (the user retracted it). A plain identifier, so every vector
store can filter on it; records are marked, never physically deleted, by consolidation."""

MEMORY_CREATED_AT_KEY = "goagent.created_at"
"""The metadata key of when a long-term memory was first stored (ISO 8601, UTC)."""

MEMORY_INVALID_AT_KEY = "goagent.invalid_at"
"""The metadata key of when a long-term memory stopped being true (ISO 8601, UTC), or None."""

MEMORY_RECALLED_KEY = "goagent.recalled"
"""The metadata key of the ids of the long-term memories an answer was given (recalled for its
run, best first). The agent sets it on the answer it stores in short-term memory, and on the
messages of the next turn it hands to long-term memory's ``store``: what "No wait, Madrid."
corrects is the memory the answer used. ``LongTermMemory`` never stores it with a memory."""

MEMORY_TURN_KEY = "goagent.turn"
"""The metadata key of a turn's id (a digest of its prompt's text). The agent sets it on the
answer it records and on the messages the turn hands to long-term memory's ``store``, which
keeps it in their records: the memories a turn stated are known by it."""

MEMORY_FOLLOWS_KEY = "goagent.follows"
"""The metadata key, on the messages the agent hands to long-term memory's ``store``, of the
turn the answer they reply to belongs to (that answer's :data:`MEMORY_TURN_KEY`): a
correction follows a statement directly only when the statement is a memory of that turn
("I live in Lisbon.", "Where does my sister live?", "That's no longer true." is about the
answer, not the home). ``LongTermMemory`` never stores it with a memory."""

MEMORY_FORMERLY: Final = "superseded"
"""The :data:`MEMORY_STATE_KEY` value of a memory a newer fact replaced (recalled as
"formerly" when asked for)."""


WritePolicy = Callable[[Message, Message], list[Message] | None]
"""Decides what a finished turn leaves in long-term memory.

Called with the user message and the final assistant message; returns ``None`` to store nothing
(long-term ``store`` is not called), or the list of messages to store (``[]`` calls ``store`` with
nothing).
"""


def store_always(user: Message, assistant: Message) -> list[Message] | None:
    """Store the user message and the final answer of every turn."""
    return [user, assistant]


def min_length(n: int) -> WritePolicy:
    """Store a turn only when its text is longer than ``n`` UTF-8 bytes (user + answer)."""
    if n < 0:
        raise ConfigurationError(f"min_length({n}): n must be >= 0")

    def policy(user: Message, assistant: Message) -> list[Message] | None:
        size = sum(len(m.text.encode("utf-8", "surrogatepass")) for m in (user, assistant))
        return [user, assistant] if size > n else None

    return policy


@runtime_checkable
class Embedder(Protocol):
    """Turns content into a vector (1-D float32 numpy array)."""

    async def embed(self, blocks: Sequence[ContentBlock]) -> NDArray[np.float32]:
        """Embed ``blocks`` as one vector.

        Raises:
            NoEmbeddableContentError: nothing in ``blocks`` can be embedded by this model.
        """
        ...


def embedder_identity(embedder: object) -> str:
    """Which vectors ``embedder`` makes: its ``embedder_identity``, else one derived from its
    class (``module.QualName``, and ``:dimensions`` when it has an int ``dimensions``).

    A RAG index and a long-term memory's store record it and refuse vectors of another
    (``docs/rag.md``, "Which embedder made the vectors"). The built-in embedders declare one
    (kind, model, size, and a remote one's endpoint when it is not the vendor's); a wrapper
    passes its inner embedder's through. An embedder of user code without the attribute (or
    with an empty or non-string one) gets the derived one, so it is never mixed silently with
    another's vectors: declare ``embedder_identity`` (a string naming the model) to keep an
    index across a rename of the class, or in a wrapper of an embedder that has one.
    """
    identity = getattr(embedder, "embedder_identity", None)
    if isinstance(identity, str) and identity:
        return identity
    kind = type(embedder)
    derived = f"{kind.__module__}.{kind.__qualname__}"
    try:
        dimensions = getattr(embedder, "dimensions", None)
    except Exception:  # a property of user code that fails: the class alone names it
        dimensions = None
    if isinstance(dimensions, int) and not isinstance(dimensions, bool):
        derived += f":{dimensions}"
    return derived


@runtime_checkable
class BatchEmbedder(Embedder, Protocol):
    """An embedder that embeds many inputs in one call (one request, one model pass)."""

    async def embed_batch(self, inputs: Sequence[Sequence[ContentBlock]]) -> NDArray[np.float32]:
        """Embed each input; returns a 2-D array with one row per input, in order."""
        ...


@dataclass(slots=True, frozen=True)
class Chunk:
    """One piece of a message or document, with metadata (chunk_index, heading, page...)."""

    blocks: list[ContentBlock]
    metadata: dict[str, Any]


@runtime_checkable
class Chunker(Protocol):
    """Splits content into chunks for embedding (shared by long-term memory and RAG)."""

    def chunk(
        self, blocks: Sequence[ContentBlock], metadata: dict[str, Any] | None = None
    ) -> list[Chunk]:
        """Split ``blocks``; the caller's ``metadata`` is copied into each chunk, never mutated."""
        ...
