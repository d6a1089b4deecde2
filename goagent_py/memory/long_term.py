"""Long-term memory: semantic recall across sessions, on any embedder and vector store.

``store`` chunks each message, embeds the chunks (one ``embed_batch`` call when the embedder
batches, else concurrent ``embed`` calls) and upserts them (one ``upsert_batch`` when the store
is bulk-capable). Entry ids are ``"<session>:<sha256 of the message JSON>:<chunk index>"``, so
storing the same turn twice replaces it instead of duplicating it.

The session (the agent's name) is stored in each entry's metadata under ``"session"`` and every
search filters on it, natively in each backend: two agents sharing one store never see each
other's memories, and an unnamed agent ("" session) sees only unnamed memories.

``retrieve`` never fails a run for want of text: a query with nothing to embed (an image for a
text embedder) returns ``[]``.

Provenance: every stored entry records where its text came from under the metadata key
``"goagent.provenance"`` (:data:`PROVENANCE_KEY`): ``"user"``, ``"assistant"``, ``"tool"``
(tool output) or ``"retrieved"`` (retrieved passages, e.g. RAG). Tool output and retrieved text
are untrusted: whoever renders recalled memories into a prompt should mark them so. The value
follows the message's role, and a caller can only make it less trusted (``store(...,
provenance="retrieved")`` or the same metadata key), never more: a tool message stays
``"tool"``. Recalled messages always carry it; entries stored before it existed get it from
their role.
"""

from __future__ import annotations

import asyncio
import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from goagent_py.errors import ConfigurationError, NoEmbeddableContentError
from goagent_py.memory.base import BatchEmbedder, Chunk, Chunker, Embedder
from goagent_py.memory.vector._common import SESSION_KEY
from goagent_py.memory.vector.base import (
    BulkVectorStore,
    SearchOptions,
    UpsertEntry,
    VectorStore,
)
from goagent_py.messages import ContentBlock, Message, ScoredMessage, messages_to_json

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["PROVENANCE_KEY", "PROVENANCES", "SESSION_KEY", "LongTermMemory", "Provenance"]

PROVENANCE_KEY = "goagent.provenance"
"""The metadata key of a memory's provenance (see the module docstring)."""

Provenance = Literal["user", "assistant", "tool", "retrieved"]
"""Where a memory's text came from; ``"tool"`` and ``"retrieved"`` are untrusted."""

PROVENANCES: tuple[Provenance, ...] = ("user", "assistant", "tool", "retrieved")

# How far each provenance is from the user: a message is given the least trusted of its role's
# and any declared provenance, so a declaration can lower trust but never raise it.
_DISTRUST: dict[str, int] = {"user": 0, "assistant": 1, "tool": 2, "retrieved": 2}
_ROLE_PROVENANCE: dict[str, Provenance] = {
    "user": "user",
    "assistant": "assistant",
    "tool": "tool",
    "document": "retrieved",
}


def provenance_of(message: Message, declared: str | None = None) -> Provenance:
    """The provenance to record for ``message``: the least trusted of what its role implies
    (an unknown role counts as retrieved), its metadata's :data:`PROVENANCE_KEY` and
    ``declared``; invalid metadata values are ignored."""
    found: Provenance = _ROLE_PROVENANCE.get(str(message.role), "retrieved")
    for value in (message.metadata.get(PROVENANCE_KEY), declared):
        if isinstance(value, str) and _DISTRUST.get(value, -1) >= _DISTRUST[found]:
            found = value  # type: ignore[assignment]  # checked against _DISTRUST
    return found


@runtime_checkable
class _MessageCounter(Protocol):
    def count(self, message: Message) -> int: ...


def _bytes_over_four(message: Message) -> int:
    return (len(message.text.encode()) + 3) // 4


def message_digest(message: Message) -> str:
    """The hex SHA-256 of ``message`` as JSON: the same message always gives the same digest."""
    return hashlib.sha256(messages_to_json([message])).hexdigest()


def _with_provenance(scored: ScoredMessage) -> ScoredMessage:
    """``scored`` with a valid provenance (entries stored before it existed get their role's)."""
    message = scored.message
    recorded = message.metadata.get(PROVENANCE_KEY)
    if isinstance(recorded, str) and recorded in _DISTRUST:
        return scored
    message.metadata = {**message.metadata, PROVENANCE_KEY: provenance_of(message)}
    return scored


class LongTermMemory:
    """Semantic memory: stores messages as vectors and recalls the most relevant ones.

    Implements :class:`~goagent_py.memory.base.LongTermMemoryProtocol`, so it plugs into an
    agent with ``with_long_term_memory(...)``; the agent passes its name as the session.

    Args:
        embedder: turns content into vectors (``BatchEmbedder`` is used when available).
        store: where the vectors live (``BulkVectorStore`` is used when available).
        chunker: splits each message before embedding; None stores one chunk per message.
        top_k: how many memories to recall when ``retrieve`` is given no ``top_k``.
        score_threshold: drop memories scoring below this (None, the default, keeps the
            ``top_k`` best whatever their score). There is no default threshold because the
            score that separates related from unrelated depends on the embedder, not on the
            memory: with the local MiniLM (``SentenceTransformerEmbedder``) related memories
            score 0.35-0.75 and unrelated ones under 0.25, so 0.3 suits it (``goagent-py
            chat`` uses 0.3); other embedders have other ranges (an l2 store scores
            ``1 / (1 + d)``, at least 0.33 for unit vectors). Measure yours: recall a few
            related and unrelated messages and look at ``ScoredMessage.score``. Without a
            threshold, every turn recalls ``top_k`` memories, relevant or not.
        token_budget: the most tokens recalled memories may take; the lowest-scored are dropped
            first (None: no budget).
        estimator: counts a message's tokens for the budget (any object with
            ``count(message) -> int``, e.g. a ``TokenEstimator``); None uses text bytes / 4.
        max_concurrency: the most ``embed`` calls in flight at once (non-batch embedders).

    Example:
        >>> memory = LongTermMemory(FakeEmbedder(), InMemoryVectorStore())  # doctest: +SKIP
        >>> agent = Agent(provider=p, long_term_memory=memory, name="alice")  # doctest: +SKIP
    """

    def __init__(
        self,
        embedder: Embedder,
        store: VectorStore,
        *,
        chunker: Chunker | None = None,
        top_k: int = 3,
        score_threshold: float | None = None,
        token_budget: int | None = None,
        estimator: Any | None = None,
        max_concurrency: int = 8,
    ) -> None:
        if not isinstance(embedder, Embedder):
            raise ConfigurationError(
                f"LongTermMemory needs an embedder with async embed(blocks), "
                f"got {type(embedder).__name__}"
            )
        if not isinstance(store, VectorStore):
            raise ConfigurationError(
                f"LongTermMemory needs a VectorStore (upsert, search, delete), "
                f"got {type(store).__name__}"
            )
        if chunker is not None and not isinstance(chunker, Chunker):
            raise ConfigurationError(
                f"chunker must have chunk(blocks, metadata), got {type(chunker).__name__}"
            )
        if estimator is not None and not isinstance(estimator, _MessageCounter):
            raise ConfigurationError(
                f"estimator must have count(message) -> int, got {type(estimator).__name__}"
            )
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k <= 0:
            raise ConfigurationError(f"top_k must be a positive int, got {top_k!r}")
        if score_threshold is not None and (
            isinstance(score_threshold, bool)
            or not isinstance(score_threshold, int | float)
            or math.isnan(score_threshold)
        ):
            raise ConfigurationError(
                f"score_threshold must be a number or None, got {score_threshold!r}"
            )
        if token_budget is not None and token_budget < 0:
            raise ConfigurationError(f"token_budget must be >= 0, got {token_budget}")
        if max_concurrency <= 0:
            raise ConfigurationError(f"max_concurrency must be > 0, got {max_concurrency}")
        self.embedder = embedder
        self.vector_store = store
        self.chunker = chunker
        self.top_k = top_k
        self.score_threshold = score_threshold
        self.token_budget = token_budget
        self.estimator: _MessageCounter | None = estimator
        self._max_concurrency = max_concurrency

    def __repr__(self) -> str:
        return (
            f"LongTermMemory(embedder={type(self.embedder).__name__}, "
            f"store={type(self.vector_store).__name__}, top_k={self.top_k})"
        )

    # -- store ---------------------------------------------------------------------------------

    def _chunks(self, message: Message) -> list[Chunk]:
        if self.chunker is None:
            return [Chunk(list(message.content), {})]
        return self.chunker.chunk(message.content, {"role": str(message.role)})

    async def store(
        self,
        messages: list[Message],
        *,
        session: str = "",
        provenance: Provenance | None = None,
    ) -> None:
        """Store ``messages`` under ``session``; storing the same message again replaces it.

        Chunks with nothing the embedder can embed (e.g. an image for a text model) are
        skipped silently. Errors of the embedder or the store propagate.

        Args:
            messages: what to remember.
            session: whose memories these are (the agent's name; "" for unnamed).
            provenance: where the messages' text came from, when it is less trusted than
                their roles say (e.g. ``"retrieved"`` for passages stored as user messages);
                recorded under :data:`PROVENANCE_KEY` (see the module docstring).

        Raises:
            ConfigurationError: ``provenance`` is not one of :data:`PROVENANCES`.
        """
        if provenance is not None and provenance not in _DISTRUST:
            raise ConfigurationError(
                f"provenance must be one of {', '.join(PROVENANCES)}, got {provenance!r}"
            )
        pending: list[tuple[str, Message]] = []
        for message in messages:
            digest = message_digest(message)
            origin = provenance_of(message, provenance)
            for index, chunk in enumerate(self._chunks(message)):
                if not chunk.blocks:
                    continue
                metadata = {
                    **message.metadata,
                    **chunk.metadata,
                    SESSION_KEY: session,
                    PROVENANCE_KEY: origin,
                }
                stored = Message(
                    message.role,
                    list(chunk.blocks),
                    tool_call_id=message.tool_call_id,
                    is_error=message.is_error,
                    metadata=metadata,
                )
                pending.append((f"{session}:{digest}:{index}", stored))
        if not pending:
            return
        vectors = await self._embed_all([m.content for _, m in pending])
        entries = [
            UpsertEntry(id, vector, message)
            for (id, message), vector in zip(pending, vectors, strict=True)
            if vector is not None
        ]
        if not entries:
            return
        if isinstance(self.vector_store, BulkVectorStore):
            await self.vector_store.upsert_batch(entries)
        else:
            for entry in entries:
                await self.vector_store.upsert(entry.id, entry.vector, entry.message)

    async def _embed_all(
        self, inputs: list[list[ContentBlock]]
    ) -> list[NDArray[np.float32] | None]:
        """One vector per input; None where the embedder found nothing to embed."""
        if isinstance(self.embedder, BatchEmbedder):
            try:
                matrix = await self.embedder.embed_batch(inputs)
            except NoEmbeddableContentError:
                pass  # some input has nothing to embed: find which, one by one
            else:
                if len(matrix) != len(inputs):
                    raise ValueError(
                        f"{type(self.embedder).__name__}.embed_batch returned {len(matrix)} "
                        f"vectors for {len(inputs)} inputs"
                    )
                return list(matrix)
        limit = asyncio.Semaphore(self._max_concurrency)

        async def one(blocks: list[ContentBlock]) -> NDArray[np.float32] | Exception | None:
            async with limit:
                try:
                    return await self.embedder.embed(blocks)
                except NoEmbeddableContentError:
                    return None
                except Exception as exc:  # raised below, first by input order, unwrapped
                    return exc

        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(one(blocks)) for blocks in inputs]
        results = [task.result() for task in tasks]
        for result in results:
            if isinstance(result, Exception):
                raise result
        return [r for r in results if not isinstance(r, Exception)]

    # -- retrieve ------------------------------------------------------------------------------

    async def retrieve(
        self,
        query: list[ContentBlock],
        *,
        top_k: int | None = None,
        session: str = "",
        score_threshold: float | None = None,
        filter: Mapping[str, Any] | None = None,
        token_budget: int | None = None,
    ) -> list[ScoredMessage]:
        """The memories of ``session`` most relevant to ``query``, best first.

        Args:
            query: the content to match (usually the user's message).
            top_k: how many to recall; None (or <= 0) uses the memory's ``top_k``.
            session: whose memories to search (the agent's name; "" for unnamed).
            score_threshold: overrides the memory's threshold for this call.
            filter: more metadata to match exactly (AND), on top of the session.
            token_budget: overrides the memory's token budget for this call.

        Returns:
            The recalled memories; ``[]`` when ``query`` has nothing the embedder can embed.
        """
        k = top_k if top_k is not None and top_k > 0 else self.top_k
        if not query:
            return []
        try:
            vector = await self.embedder.embed(query)
        except NoEmbeddableContentError:
            return []
        threshold = score_threshold if score_threshold is not None else self.score_threshold
        options = SearchOptions(
            top_k=k,
            score_threshold=threshold,
            filter={**(filter or {}), SESSION_KEY: session},
        )
        found = [_with_provenance(s) for s in await self.vector_store.search(vector, options)]
        budget = token_budget if token_budget is not None else self.token_budget
        return self._within_budget(found, budget)

    def _within_budget(self, found: list[ScoredMessage], budget: int | None) -> list[ScoredMessage]:
        """The best-scored prefix of ``found`` that fits ``budget`` (lowest scores dropped)."""
        if budget is None:
            return found
        count = self.estimator.count if self.estimator is not None else _bytes_over_four
        kept: list[ScoredMessage] = []
        left = budget
        for scored in sorted(found, key=lambda s: -s.score):
            cost = count(scored.message)
            if cost > left:
                break
            kept.append(scored)
            left -= cost
        return kept

    async def forget(self, messages: Sequence[Message], *, session: str = "") -> None:
        """Delete what :meth:`store` stored for ``messages`` under ``session``.

        Only meaningful without a chunker or with a deterministic one (it re-chunks to find
        the chunk ids).
        """
        ids = [
            f"{session}:{message_digest(m)}:{i}"
            for m in messages
            for i in range(len(self._chunks(m)))
        ]
        if isinstance(self.vector_store, BulkVectorStore):
            await self.vector_store.delete_batch(ids)
        else:
            for id in ids:
                await self.vector_store.delete(id)
