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

Records (issue 31): every entry also carries when it was stored, where it came from, its state
and its history (:mod:`goagent_py.memory.records`). With a ``decider``, the user facts of a
turn are consolidated with the current memories they change (:mod:`.consolidation`), and
``retrieve`` recalls current memories only (superseded ones too for questions about the past).
The state is checked here, after the store's search, so entries from before records existed
count as current in every backend.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, runtime_checkable

from goagent_py._deepcopy import deepcopy
from goagent_py._describe import described
from goagent_py.errors import ConfigurationError, NoEmbeddableContentError
from goagent_py.memory import _embedder_record
from goagent_py.memory._entries import (
    applied,
    change_of,
    message_digest,
    new_record,
    source_message,
)
from goagent_py.memory._following import (
    EPOCH,
    answer_used,
    mark_just_said,
    mark_recalled,
    turn_followed,
    without_context,
)
from goagent_py.memory._forgetting import after_forgetting
from goagent_py.memory._provenance import (
    DISTRUST,
    PROVENANCE_KEY,
    PROVENANCES,
    Provenance,
    provenance_of,
    with_provenance,
)
from goagent_py.memory.base import BatchEmbedder, Chunk, Chunker, Embedder, embedder_identity
from goagent_py.memory.consolidation import (
    ConsolidationReport,
    Decider,
    Decision,
    check_decisions,
    report_consolidation,
)
from goagent_py.memory.records import (
    CURRENT,
    SOURCE_MESSAGE_KEY,
    SUPERSEDED,
    MemoryRecord,
    MemoryState,
    as_present,
    asks_about_past,
    format_time,
    record_of,
    state_of,
)
from goagent_py.memory.tokens import heuristic_tokens
from goagent_py.memory.vector._common import SESSION_KEY
from goagent_py.memory.vector._shared import entries_shared, owned, search_shared
from goagent_py.memory.vector.base import (
    BulkVectorStore,
    GuardedStore,
    ListableStore,
    SearchOptions,
    UpsertEntry,
    VectorStore,
)
from goagent_py.messages import (
    ContentBlock,
    Message,
    Role,
    ScoredMessage,
    TextBlock,
    text_from,
)

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

__all__ = ["PROVENANCE_KEY", "PROVENANCES", "SESSION_KEY", "LongTermMemory", "Provenance"]

_log = logging.getLogger("goagent_py.memory")
T = TypeVar("T")
_ATTEMPTS = 8  # compare-and-set rounds of one consolidation before the facts are just added


@runtime_checkable
class _MessageCounter(Protocol):
    def count(self, message: Message) -> int: ...


def _heuristic_count(message: Message) -> int:
    """A recalled memory's text: ASCII bytes / 4 rounded up, other text as the heuristic
    counts it (per character by script: a Chinese memory is not counted at half its size)."""
    text = message.text
    return (len(text) + 3) // 4 if text.isascii() else heuristic_tokens(text)


def _plain_text(message: Message) -> str | None:
    """The text of a message made of one text block (None otherwise)."""
    if len(message.content) == 1 and isinstance(message.content[0], TextBlock):
        return message.content[0].text
    return None


class _ScopeLock:
    """A scope's writer lock and how many writers hold or await it."""

    __slots__ = ("lock", "users")

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.users = 0


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
            ``count(message) -> int``, e.g. a ``TokenEstimator``); None counts the text as
            ``HeuristicEstimator`` does.
        max_concurrency: the most ``embed`` calls in flight at once (non-batch embedders).
        decider: consolidates each turn's user facts with the memories they change
            (:mod:`goagent_py.memory.consolidation`): ``RuleDecider()`` (model-free),
            ``ModelDecider(provider, model=...)``, or None (every fact is added).
        candidates: how many similar current memories per fact the decider sees.
        clock: the time to record (a callable returning a datetime; default: now, UTC).
        on_consolidation: called with a :class:`ConsolidationReport` after each
            consolidation (decisions, duration, and a warning when the decider failed).
        tie_tolerance: recalled memories whose scores differ by at most this are ordered
            newest first (ties break toward the newer fact).
        recall_superseded: when ``retrieve`` (as the agent calls it) also recalls memories a
            newer fact replaced: ``"past"`` (default) when the query asks about the past
            ("Where did I live before?", :func:`~goagent_py.memory.records.asks_about_past`),
            ``"never"`` or ``"always"``.

    Every stored memory carries its record (:mod:`goagent_py.memory.records`): when it was
    stored, the conversation and message it came from, its state and its history. Recall
    returns current memories only unless asked for superseded ones too.

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
        decider: Decider | None = None,
        candidates: int = 8,
        clock: Callable[[], datetime] | None = None,
        on_consolidation: Callable[[ConsolidationReport], None] | None = None,
        tie_tolerance: float = 0.01,
        recall_superseded: Literal["past", "never", "always"] = "past",
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
        if decider is not None and not isinstance(decider, Decider):
            raise ConfigurationError(
                f"decider must have a name and async decide(facts, candidates), "
                f"got {type(decider).__name__}; use RuleDecider(), ModelDecider(...) or None"
            )
        if isinstance(candidates, bool) or not isinstance(candidates, int) or candidates <= 0:
            raise ConfigurationError(f"candidates must be a positive int, got {candidates!r}")
        if tie_tolerance < 0:
            raise ConfigurationError(f"tie_tolerance must be >= 0, got {tie_tolerance}")
        self.decider = decider
        self.candidates = candidates
        self.clock = clock or (lambda: datetime.now(UTC))
        self.on_consolidation = on_consolidation
        self.tie_tolerance = tie_tolerance
        if recall_superseded not in ("past", "never", "always"):
            raise ConfigurationError(
                f"recall_superseded must be 'past', 'never' or 'always', got {recall_superseded!r}"
            )
        self.recall_superseded = recall_superseded
        # One writer per scope at a time: two turns superseding the same memory must not
        # both read it as current (the second sees what the first wrote). An asyncio.Lock
        # belongs to one event loop: each loop has its own (threads calling run_sync each run
        # one; a lock shared across them left a waiter asleep forever). Writers of different
        # loops are kept apart as other processes are: by the store's compare-and-set.
        # A scope's lock lives while a writer holds or awaits it: a served app's table does
        # not grow by one lock per user forever.
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, _ScopeLock]] = (
            weakref.WeakKeyDictionary()
        )
        self._locks_guard = threading.Lock()

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
        if provenance is not None and provenance not in DISTRUST:
            raise ConfigurationError(
                f"provenance must be one of {', '.join(PROVENANCES)}, got {provenance!r}"
            )
        now = format_time(self.clock())
        recalled = answer_used(messages, session)
        follows = turn_followed(messages)
        messages = [without_context(m) for m in messages]
        facts = [m for m in messages if self._is_fact(m, provenance)]
        plain = [m for m in messages if not any(m is f for f in facts)]
        pending: list[tuple[str, Message]] = []
        for message in plain:
            digest = message_digest(message)
            origin = provenance_of(message, provenance)
            change = change_of("add", now, message, decider="none", text=message.text)
            for index, chunk in enumerate(self._chunks(message)):
                if not chunk.blocks:
                    continue
                metadata = {
                    **message.metadata,
                    **chunk.metadata,
                    **new_record(message, now, change),
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
        await self._write(pending)
        if facts:
            async with self._scope_lock(session):
                await self._consolidate(
                    facts, session=session, now=now, recalled=recalled, follows=follows
                )

    @contextlib.asynccontextmanager
    async def _scope_lock(self, session: str) -> AsyncIterator[None]:
        """Hold the lock of ``session``'s writers in the running event loop; the lock is
        dropped from the table when its last holder or waiter leaves."""
        loop = asyncio.get_running_loop()
        with self._locks_guard:
            table = self._locks.setdefault(loop, {})
            held = table.get(session)
            if held is None:
                held = table[session] = _ScopeLock()
            held.users += 1
        try:
            async with held.lock:
                yield
        finally:
            with self._locks_guard:
                held.users -= 1
                if held.users == 0 and table.get(session) is held:
                    del table[session]

    def _is_fact(self, message: Message, provenance: str | None) -> bool:
        """Whether ``message`` goes through the decider: a user's own text."""
        return (
            self.decider is not None
            and message.role is Role.USER
            and provenance_of(message, provenance) == "user"
            and bool(message.text.strip())
            and all(isinstance(b, TextBlock) for b in message.content)
        )

    async def _write(
        self, pending: Sequence[tuple[str, Message]], known: Mapping[str, Any] | None = None
    ) -> None:
        """Embed and upsert ``(id, message)`` pairs (one batch when the store has batches)."""
        await self._upsert(await self._entries(pending, known))

    async def _entries(
        self, pending: Sequence[tuple[str, Message]], known: Mapping[str, Any] | None = None
    ) -> list[UpsertEntry]:
        """``(id, message)`` pairs with their vectors; a text-only message whose text is in
        ``known`` reuses that vector."""
        if not pending:
            return []
        unique = dict(pending)  # one entry per id: the last wins, as in every store
        reused = [(known or {}).get(_plain_text(m) or "") for m in unique.values()]
        todo = [m.content for m, v in zip(unique.values(), reused, strict=True) if v is None]
        made = iter(await self._embed_all(todo) if todo else [])
        vectors = [v if v is not None else next(made) for v in reused]
        return [
            UpsertEntry(id, vector, message)
            for (id, message), vector in zip(unique.items(), vectors, strict=True)
            if vector is not None
        ]

    # -- consolidation -------------------------------------------------------------------------

    async def _consolidate(
        self,
        facts: list[Message],
        *,
        session: str,
        now: str,
        recalled: Sequence[str] = (),
        follows: str | None = None,
    ) -> None:
        """Decide and apply what ``facts`` do to the current memories of ``session``.

        On a :class:`GuardedStore` the write is a compare-and-set on the scope: the scope's
        version is read before the candidates, and the decisions are written only if no other
        writer (another process on the same file or database) changed the scope meanwhile;
        otherwise the candidates are read and decided again, so the second writer builds on
        what the first wrote (writers in other event loops of this process too: threads each
        calling ``run_sync``). Other stores rely on the per-scope lock of this object, which
        keeps apart the writers of one event loop only.
        """
        assert self.decider is not None
        texts = [f.text for f in facts]
        scope: dict[str, Any] = {SESSION_KEY: session}
        deciding = 0.0
        store = self.vector_store
        report = ConsolidationReport(decider=self.decider.name, facts=texts)
        for attempt in range(1, _ATTEMPTS + 1):
            version = await store.version(scope) if isinstance(store, GuardedStore) else ""
            report = ConsolidationReport(decider=self.decider.name, facts=texts, attempts=attempt)
            started = time.perf_counter()
            candidates, vectors, past = await self._candidates(
                texts, session, facts, now, recalled, follows
            )
            decisions = await self._decide(facts, candidates, report)
            deciding += time.perf_counter() - started
            by_id = {c.id: c for c in candidates}
            name = self.decider.name if not report.warning else "none"
            written = applied(decisions, facts, by_id, session, now, name, past)
            entries = await self._entries(written, vectors)
            if not isinstance(store, GuardedStore):
                await self._upsert(entries)
                break
            if await store.upsert_batch_if(entries, filter=scope, version=version):
                break
        else:
            # Other writers kept changing the scope: add the facts as without a decider
            # (nothing lost; a later turn's consolidation replaces a duplicate value).
            report.warning = (
                f"the memories of {session!r} kept changing under {_ATTEMPTS} attempts; the "
                f"turn's {len(facts)} fact(s) were added unchanged"
            )
            _log.warning("long-term memory consolidation: %s", report.warning)
            report.decisions = [Decision(fact=i, op="ADD") for i in range(len(facts))]
            plain = applied(report.decisions, facts, {}, session, now, "none", past)
            await self._upsert(await self._entries(plain, vectors))
        report.duration = deciding
        report_consolidation(report)
        if self.on_consolidation is not None:
            self.on_consolidation(report)

    async def _decide(
        self, facts: list[Message], candidates: list[MemoryRecord], report: ConsolidationReport
    ) -> list[Decision]:
        """The decider's checked decisions; all ADD, with a warning in ``report``, when it
        fails."""
        assert self.decider is not None
        try:
            decided = await self.decider.decide([f.text for f in facts], candidates)
            decisions = check_decisions(decided, facts=len(facts), candidates=candidates)
        except Exception as exc:  # nothing lost: the facts are added as without a decider
            report.warning = (
                f"decider {self.decider.name!r} failed ({described(exc)}); "
                f"the turn's {len(facts)} fact(s) were added unchanged"
            )
            _log.warning("long-term memory consolidation: %s", report.warning)
            decisions = [Decision(fact=i, op="ADD") for i in range(len(facts))]
        report.decisions = decisions
        return decisions

    async def _upsert(self, entries: list[UpsertEntry]) -> None:
        if not entries:
            return
        if isinstance(self.vector_store, BulkVectorStore):
            await self.vector_store.upsert_batch(entries)
        else:
            for entry in entries:
                await self.vector_store.upsert(entry.id, entry.vector, entry.message)

    async def _candidates(
        self,
        texts: list[str],
        session: str,
        facts: Sequence[Message],
        now: str,
        recalled: Sequence[str] = (),
        follows: str | None = None,
    ) -> tuple[list[MemoryRecord], dict[str, Any], dict[str, MemoryRecord]]:
        """The current memories of ``session`` most similar to each fact (best first), then,
        when the store can list, the latest ones if the facts follow them directly
        (``just_said``, stated in the turn ``follows`` when it is given: for "that's no longer
        true", "sorry, I meant John"); the facts' vectors by text (storing a
        fact reuses its vector); and, when the store can list, the memories of ``session``
        that are no longer current, by id (a fact said again after it was forgotten is stored
        under the same id: its earlier history is kept). The current memories of ``recalled``
        (what the answer the facts reply to was given) are candidates too, marked
        ``recalled``."""
        vectors = await self._embed_all([[TextBlock(t)] for t in texts])
        scope: dict[str, Any] = {SESSION_KEY: session}
        found: dict[str, MemoryRecord] = {}
        past: dict[str, MemoryRecord] = {}
        # Only the user's own facts are candidates: an assistant's answer, tool output or a
        # retrieved passage is no fact of the user's to replace, and its text (untrusted) must
        # never reach a model decider, where it could ask for the user's memories' deletion.
        for vector in vectors:
            if vector is None:
                continue
            hits = await self._search(vector, self.candidates, scope, (CURRENT,), mine=True)
            for scored in hits:
                found.setdefault(scored.id, record_of(with_provenance(scored)))
        if isinstance(self.vector_store, ListableStore):
            # Every entry of the scope is read, never copied: only the candidates the decider
            # (user code) is handed get a message of their own.
            hits, shared = await entries_shared(self.vector_store, scope)
            listed = [record_of(s) for s in hits if provenance_of(s.message) == "user"]
            past = {r.id: r for r in listed if not r.is_current}
            listed = [r for r in listed if r.is_current]
            searched = set(found)
            if listed:
                # The latest statement, all of it ("My brother is Jon and I live in Lisbon.":
                # two memories stored together): what "that's no longer true" or "sorry, I
                # meant John" is about, when the facts follow it.
                mark_just_said(found, listed, facts, now, follows)
            mark_recalled(found, listed, recalled)
            if shared:
                for id in found.keys() - searched:
                    found[id] = replace(found[id], message=deepcopy(found[id].message))
        elif found:
            # A store that cannot list: the newest of the similar memories stands for the
            # latest statement (a correction is similar to what it corrects), and only the
            # similar memories can be known as recalled.
            mark_just_said(found, list(found.values()), facts, now, follows)
            mark_recalled(found, list(found.values()), recalled)
        by_text = {t: v for t, v in zip(texts, vectors, strict=True) if v is not None}
        return list(found.values()), by_text, past

    async def _checked(self, embedding: Awaitable[T]) -> T:
        """``embedding``'s result, once the store's record says its vectors are this
        embedder's (read while it embeds; see :mod:`goagent_py.memory._embedder_record`)."""
        made, checked = await asyncio.gather(
            embedding,
            _embedder_record.check(self.vector_store, embedder_identity(self.embedder)),
            return_exceptions=True,
        )
        if isinstance(checked, BaseException):
            raise checked
        if isinstance(made, BaseException):
            raise made
        return made

    async def _embed_all(
        self, inputs: list[list[ContentBlock]]
    ) -> list[NDArray[np.float32] | None]:
        """One vector per input (None where the embedder found nothing to embed), checked
        against the store's embedder record: every vector the memory writes or searches with
        comes from here or from :meth:`retrieve`'s check."""
        return await self._checked(self._embed_unchecked(inputs))

    async def _embed_unchecked(
        self, inputs: list[list[ContentBlock]]
    ) -> list[NDArray[np.float32] | None]:
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
        include_superseded: bool | None = None,
    ) -> list[ScoredMessage]:
        """The current memories of ``session`` most relevant to ``query``, best first.

        Scores within ``tie_tolerance`` of the best one left are ordered newest first.
        Superseded and deleted memories are left out unless ``include_superseded`` (then
        superseded ones come too, their ``memory_state`` metadata saying so: recall renders
        them "formerly").

        Args:
            query: the content to match (usually the user's message).
            top_k: how many to recall; None (or <= 0) uses the memory's ``top_k``.
            session: whose memories to search (the agent's name; "" for unnamed).
            score_threshold: overrides the memory's threshold for this call.
            filter: more metadata to match exactly (AND), on top of the session.
            token_budget: overrides the memory's token budget for this call.
            include_superseded: also recall memories a newer fact replaced ("where did I live
                before?"); None follows the memory's ``recall_superseded``.

        Returns:
            The recalled memories; ``[]`` when ``query`` has nothing the embedder can embed.
        """
        k = top_k if top_k is not None and top_k > 0 else self.top_k
        if not query:
            return []
        asked = text_from(list(query))
        if include_superseded is None:
            include_superseded = self.recall_superseded == "always" or (
                self.recall_superseded == "past" and asks_about_past(asked)
            )
        if include_superseded and asked and asks_about_past(asked):
            # "Where did I live before?" is searched as "Where do I live?": the tense and
            # the cue words pull the question away from the facts it asks about.
            query = [
                TextBlock(as_present(asked)),
                *(b for b in query if not isinstance(b, TextBlock)),
            ]
        try:
            vector = await self._checked(self.embedder.embed(query))
        except NoEmbeddableContentError:
            return []
        threshold = score_threshold if score_threshold is not None else self.score_threshold
        states = (CURRENT, SUPERSEDED) if include_superseded else (CURRENT,)
        scope = {**(filter or {}), SESSION_KEY: session}
        found = await self._search(vector, k, scope, states, threshold)
        found = self._newer_first([with_provenance(s) for s in found])[:k]
        budget = token_budget if token_budget is not None else self.token_budget
        return self._within_budget(found, budget)

    async def _search(
        self,
        vector: Any,
        k: int,
        scope: dict[str, Any],
        states: Sequence[MemoryState],
        threshold: float | None = None,
        *,
        mine: bool = False,
    ) -> list[ScoredMessage]:
        """The ``k`` best entries of ``scope`` whose record is in ``states`` (with ``mine``,
        whose provenance is the user's), and after them every entry scored within
        ``tie_tolerance`` of the k-th: a newer one of them goes before it (see
        :meth:`_newer_first`), whatever ``k``.

        The state is checked here, not in the store's filter: entries stored before records
        existed have none and count as current (in every backend, migrated or not), and a
        filter on the scope alone keeps each store's fast path (sqlite-vec's KNN partition).
        Entries crowding the top that are left out are skipped by asking for more, 4x at a
        time.
        """
        fetch = k + 1  # one more than asked: it tells whether anything below ties with the k-th
        while True:
            options = SearchOptions(top_k=fetch, score_threshold=threshold, filter=scope)
            # Hits left out (other states, crowds of ties) are read, never copied: only what is
            # returned gets a message of its own.
            hits, shared = await search_shared(self.vector_store, vector, options)
            kept = [
                h
                for h in hits
                if state_of(h.message.metadata) in states
                and (not mine or provenance_of(h.message) == "user")
            ]
            if len(hits) < fetch:
                break  # everything the store has
            if len(kept) > k and kept[-1].score < kept[k - 1].score - self.tie_tolerance:
                break  # nothing further down can tie with the k-th
            if len(kept) >= k and fetch >= 16 * k:
                break  # a crowd of ties: the newest of the first 16 k stand for them
            fetch *= 4
        if len(kept) > k:
            floor = kept[k - 1].score - self.tie_tolerance
            kept = kept[:k] + [h for h in kept[k:] if h.score >= floor]
        return [owned(h) for h in kept] if shared else kept

    def _newer_first(self, found: list[ScoredMessage]) -> list[ScoredMessage]:
        """``found`` best first, in groups of near-equal scores, each group newest first.

        A group is the best score left and every score within ``tie_tolerance`` below it;
        within a group the newer fact comes first (equal times keep the score order).
        """
        ranked = sorted(found, key=lambda s: -s.score)
        ordered: list[ScoredMessage] = []
        start = 0
        while start < len(ranked):
            top = ranked[start].score
            end = start + 1
            while end < len(ranked) and top - ranked[end].score <= self.tie_tolerance:
                end += 1
            group = ranked[start:end]
            if len(group) > 1:
                group.sort(key=lambda s: record_of(s).created_at or EPOCH, reverse=True)
            ordered.extend(group)
            start = end
        return ordered

    async def reembed(self) -> int:
        """Embed every memory in the store again with this memory's embedder.

        After a change of embedder (another model, another server), the stored vectors are
        the old one's and every call refuses them (``docs/memory.md``, "Which embedder made the
        memories"); this moves all of them, of every session, to this embedder, records it, and
        returns how many it re-embedded (0 when they are this embedder's already). Stop other
        writers of the store meanwhile: they are refused until it finishes. A crash part-way
        leaves the store refused by both embedders; call it again to finish. A memory this
        embedder cannot embed (an image for a text model) is deleted (logged).

        Raises:
            ConfigurationError: the store cannot list its entries or record its embedder
                (re-embed needs in-memory, sqlite-vec or pgvector), or another re-embedding
                took the store over meanwhile.
        """
        return await _embedder_record.reembed(
            self.vector_store, embedder_identity(self.embedder), self._embed_unchecked
        )

    async def records(
        self, *, session: str = "", states: Sequence[MemoryState] = (CURRENT,)
    ) -> list[MemoryRecord]:
        """The memories of ``session`` in ``states``, oldest first, with their records.

        ``states=("current", "superseded", "deleted")`` lists everything, with each memory's
        history (what changed, when, which decider, from which message).

        Raises:
            ConfigurationError: the store cannot list (it is not a ``ListableStore``).
        """
        if not isinstance(self.vector_store, ListableStore):
            raise ConfigurationError(
                f"{type(self.vector_store).__name__} cannot list its entries; use a store with "
                "entries(filter) (in-memory, sqlite-vec or pgvector) to list memories"
            )
        listed = await self.vector_store.entries({SESSION_KEY: session})
        found = [r for r in (record_of(with_provenance(s)) for s in listed) if r.state in states]
        return sorted(found, key=lambda r: (r.created_at or EPOCH, r.id))

    def _within_budget(self, found: list[ScoredMessage], budget: int | None) -> list[ScoredMessage]:
        """The prefix of ``found`` (best first, ties newest first) that fits ``budget``: the
        lowest scores are dropped, and the order is kept (re-sorting by score alone would undo
        the tie order of :meth:`_newer_first`)."""
        if budget is None:
            return found
        count = self.estimator.count if self.estimator is not None else _heuristic_count
        kept: list[ScoredMessage] = []
        left = budget
        for scored in found:
            cost = count(scored.message)
            if cost > left:
                break
            kept.append(scored)
            left -= cost
        return kept

    async def forget(self, messages: Sequence[Message], *, session: str = "") -> None:
        """Delete what :meth:`store` stored for ``messages`` under ``session``.

        Only meaningful without a chunker or with a deterministic one (it re-chunks to find
        the chunk ids). A fact a decider stored in other words (the rule decider's "I live in
        Porto." for "I moved to Porto last month.", under another id) is found by the message
        it came from (its record's source message) when the store can list.

        When the store can list, the memories left are as if the forgotten ones had never been
        said: a fact a forgotten one replaced takes its place (current again, or replaced by
        what replaced it), and the words and ids of what is forgotten are blanked in the
        histories of the scope's other memories (see :mod:`goagent_py.memory._forgetting`).
        """
        ids = [
            f"{session}:{message_digest(m)}:{i}"
            for m in messages
            for i in range(len(self._chunks(m)))
        ]
        sources = {source_message(m) for m in messages if m.role is Role.USER}
        await self._forget_ids(ids, session, {m.text for m in messages}, sources)

    async def forget_ids(self, ids: Sequence[str], *, session: str = "") -> None:
        """Delete the memories of ``session`` with these entry ids (what :meth:`records`
        lists as ``MemoryRecord.id``), with the bookkeeping of :meth:`forget`: a fact one of
        them replaced takes its place, and no history keeps their words. An id of another
        scope, or of no memory, deletes nothing."""
        await self._forget_ids([i for i in ids if i.startswith(f"{session}:")], session)

    async def _forget_ids(
        self,
        ids: list[str],
        session: str,
        texts: set[str] | None = None,
        sources: set[str] | None = None,
    ) -> None:
        if isinstance(self.vector_store, ListableStore):
            listed = await self.vector_store.entries({SESSION_KEY: session})
            ids += [
                s.id
                for s in listed
                if s.message.role is Role.USER
                and s.message.metadata.get(SOURCE_MESSAGE_KEY) in (sources or set())
                and s.id not in ids
            ]
            gone = (texts or set()) | {s.message.text for s in listed if s.id in ids}
            now = format_time(self.clock())
            await self._write(after_forgetting(listed, set(ids), gone - {""}, now))
        if isinstance(self.vector_store, BulkVectorStore):
            await self.vector_store.delete_batch(ids)
        else:
            for id in ids:
                await self.vector_store.delete(id)
