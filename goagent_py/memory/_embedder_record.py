"""Which embedder made long-term memory's vectors: the record in the store, checked and moved.

A query vector compares only with vectors of the same model. Before this record, a memory
opened with another embedder (another model of the same size) searched the stored vectors with
its own query vectors and stored new vectors beside the old ones: silent garbage recall. Now
the store (an :class:`~goagent_py.memory.vector.base.EmbedderRecordStore`: in-memory,
sqlite-vec, pgvector, and a wrapper of one) records the identity of the embedder
(:func:`~goagent_py.memory.base.embedder_identity`) and :func:`check` refuses every other:

- no record (a new store, or one written before the record existed): this embedder's is
  recorded, the stored vectors adopted as they are (nothing re-embedded);
- this embedder's: nothing to do;
- another's: :class:`~goagent_py.errors.ConfigurationError` saying what to do (use that
  embedder, or ``LongTermMemory.reembed()``, or another table);
- :func:`reembedding` of an identity (a re-embedding under way, or one that crashed): every
  embedder is refused until ``reembed()`` finishes it.

:func:`reembed` moves a store to a new embedder in a crash-safe order: the record says
"re-embedding" *before* any vector is rewritten and names the new identity only after every
memory holds one of its vectors, so a crash leaves a store both embedders refuse (and the next
``reembed()`` finishes), never old vectors under the new identity. The stored message of an
entry is exactly what was embedded (``LongTermMemory.store`` embeds each chunk's blocks), so
re-embedding it gives what storing it again would. An entry the new embedder cannot embed (an
image for a text model) is deleted, and counted in the warning logged.

A writer that read the record just before a ``reembed()`` started may still write one old
vector after it listed the entries (the window between a writer's check and its write, run
concurrently with its embedding); ``reembed()`` lists the entries again after its pass and
re-embeds what changed meanwhile, which narrows the window to that last listing.

Here so that long_term.py keeps the memory's store, recall and consolidation.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from goagent_py.errors import ConfigurationError
from goagent_py.memory.vector.base import (
    BulkVectorStore,
    EmbedderRecordStore,
    ListableStore,
    UpsertEntry,
    VectorStore,
)
from goagent_py.messages import ContentBlock, ScoredMessage, messages_to_json

if TYPE_CHECKING:
    import numpy as np
    from numpy.typing import NDArray

_log = logging.getLogger("goagent_py.memory")

_REEMBEDDING = "\x1freembedding\x1f"
"""The record's prefix while a re-embedding to the identity after it is under way."""

_BATCH = 64  # memories embedded per call while re-embedding
_PASSES = 4  # listings of the store while re-embedding (the later ones find late writes)

Embed = Callable[[list[list[ContentBlock]]], Awaitable[list["NDArray[np.float32] | None"]]]


def reembedding(identity: str) -> str:
    """The record of a store being re-embedded with ``identity``."""
    return _REEMBEDDING + identity


def _refusal(record: str, identity: str) -> ConfigurationError:
    if record.startswith(_REEMBEDDING):
        target = record.removeprefix(_REEMBEDDING)
        how = (
            "run `await memory.reembed()` again to finish it"
            if target == identity
            else f"finish it with `await memory.reembed()` on a LongTermMemory with {target}"
        )
        return ConfigurationError(
            f"a re-embedding of this store's memories with {target} did not finish (some "
            f"vectors are still another embedder's): {how}"
        )
    return ConfigurationError(
        f"this store's memories were embedded with {record}, not with this memory's embedder "
        f"{identity}: their vectors do not compare. Use the embedder they were made with, or "
        "re-embed them with this one (`await memory.reembed()`, on a store that can list its "
        "entries), or use another table or store"
    )


async def check(store: VectorStore, identity: str) -> None:
    """Adopt ``store`` for ``identity`` or check that its vectors are that embedder's.

    A store that cannot record (qdrant, Chroma, user code) is not checked.

    Raises:
        ConfigurationError: the store's vectors are another embedder's, or a re-embedding of
            them did not finish.
    """
    if not isinstance(store, EmbedderRecordStore):
        return
    while True:
        record = await store.embedder_record()
        if record == identity:
            return
        if record is not None:
            raise _refusal(record, identity)
        if await store.replace_embedder_record(None, identity):
            return


async def reembed(store: VectorStore, identity: str, embed: Embed) -> int:
    """Embed every entry of ``store`` again with ``embed`` (the embedder of ``identity``),
    then record ``identity``; how many entries it re-embedded (0 when the store's vectors are
    that embedder's already).

    Raises:
        ConfigurationError: the store cannot record its embedder or list its entries, or
            another re-embedding (with another embedder) took the store over meanwhile.
    """
    if not isinstance(store, EmbedderRecordStore) or not isinstance(store, ListableStore):
        raise ConfigurationError(
            f"{type(store).__name__} cannot re-embed its memories: it must list its entries "
            "and record its embedder (in-memory, sqlite-vec or pgvector); store the memories "
            "again in a new store instead"
        )
    marker = reembedding(identity)
    while True:
        record = await store.embedder_record()
        if record == identity:
            return 0
        if record == marker or await store.replace_embedder_record(record, marker):
            break
    done: dict[str, bytes] = {}  # id -> the message (JSON) it was re-embedded as
    written = dropped = 0
    for _ in range(_PASSES):  # again while writers that checked before the marker wrote
        listed = [s for s in await store.entries() if done.get(s.id) != _json(s)]
        if not listed:
            break
        for start in range(0, len(listed), _BATCH):
            batch = listed[start : start + _BATCH]
            if await store.embedder_record() != marker:
                raise _taken_over(identity)
            vectors = await embed([list(s.message.content) for s in batch])
            kept, gone = await _rewrite(store, batch, vectors)
            written, dropped = written + kept, dropped + gone
            done.update((s.id, _json(s)) for s in batch)
    if not await store.replace_embedder_record(marker, identity):
        raise _taken_over(identity)
    if dropped:
        _log.warning(
            "long-term memory re-embedded with %s: %d memories with nothing it can embed "
            "were deleted",
            identity,
            dropped,
        )
    return written


def _json(scored: ScoredMessage) -> bytes:
    return messages_to_json([scored.message])


def _taken_over(identity: str) -> ConfigurationError:
    return ConfigurationError(
        f"another re-embedding took this store over while this one re-embedded it with "
        f"{identity}: re-embed with one embedder at a time"
    )


async def _rewrite(
    store: VectorStore,
    batch: Sequence[ScoredMessage],
    vectors: Sequence[NDArray[np.float32] | None],
) -> tuple[int, int]:
    """Write each entry of ``batch`` again with its new vector (same id, same message); delete
    the ones with none (nothing the new embedder can embed). How many of each."""
    pairs = list(zip(batch, vectors, strict=True))
    entries = [UpsertEntry(s.id, v, s.message) for s, v in pairs if v is not None]
    gone = [s.id for s, v in pairs if v is None]
    if isinstance(store, BulkVectorStore):
        if entries:
            await store.upsert_batch(entries)
        if gone:
            await store.delete_batch(gone)
    else:
        for entry in entries:
            await store.upsert(entry.id, entry.vector, entry.message)
        for id in gone:
            await store.delete(id)
    return len(entries), len(gone)
