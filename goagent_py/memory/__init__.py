"""Memory: short-term (the conversation) and long-term (semantic recall across sessions).

Importing this package stays light: numpy, tiktoken and the vector-store drivers load on first
use. It re-exports the whole of :mod:`goagent_py.memory.storage` (where short-term memory keeps
the conversation) and of :mod:`goagent_py.memory.vector` (the vector stores of long-term memory
and RAG): every backend is exported by the package of its kind and from here.
"""

import typing as _typing
from typing import Any as _Any

from goagent_py._lazy import lazy_dir as _lazy_dir
from goagent_py._lazy import lazy_load as _lazy_load

if _typing.TYPE_CHECKING:  # the names for type checkers; at run time each loads on first access
    from goagent_py.memory.base import (
        BatchEmbedder,
        Chunk,
        Chunker,
        Embedder,
        LongTermMemoryProtocol,
        ShortTermMemoryProtocol,
        WritePolicy,
        min_length,
        store_always,
    )
    from goagent_py.memory.chunking import (
        BlockChunker,
        MarkdownChunker,
        NoOpChunker,
        RecursiveChunker,
        SentenceChunker,
        TextChunker,
    )
    from goagent_py.memory.compaction import (
        ClampParts,
        ClearToolResults,
        CompactionError,
        SlidingWindow,
        Strategy,
        Summarize,
        Tiered,
        validate_context,
    )
    from goagent_py.memory.compactor import CompactionEvent, Compactor
    from goagent_py.memory.consolidation import (
        ConsolidationReport,
        Decider,
        Decision,
        DecisionError,
    )
    from goagent_py.memory.deciders import ModelDecider, RuleDecider
    from goagent_py.memory.long_term import LongTermMemory
    from goagent_py.memory.policies import FixedWindow, NoOp, Policy, TokenWindow, message_groups
    from goagent_py.memory.records import MemoryChange, MemoryRecord
    from goagent_py.memory.short_term import ShortTermMemory
    from goagent_py.memory.storage import (
        InMemoryStorage,
        PostgresStorage,
        SessionLease,
        SQLiteStorage,
        Storage,
    )
    from goagent_py.memory.tokens import (
        CharEstimator,
        HeuristicEstimator,
        TiktokenEstimator,
        TokenEstimator,
        image_tokens,
    )
    from goagent_py.memory.vector import (
        BulkVectorStore,
        ChromaStore,
        CountableStore,
        EmbedderRecordStore,
        GuardedStore,
        InMemoryVectorStore,
        ListableStore,
        Metric,
        ObservableStore,
        PgVectorStore,
        QdrantStore,
        ScoredMessage,
        SearchOptions,
        SqliteVecStore,
        UpsertEntry,
        Vector,
        VectorStore,
        VectorStoreObserver,
        merge_observers,
    )

# Each public name and the module it comes from. Importing goagent_py.memory.base (as the agent
# does) runs this file first: importing every submodule here would load the stores, SQLite and
# the chunkers on every `import goagent_py`.
_LAZY = {
    "BatchEmbedder": "goagent_py.memory.base",
    "Chunk": "goagent_py.memory.base",
    "Chunker": "goagent_py.memory.base",
    "Embedder": "goagent_py.memory.base",
    "LongTermMemoryProtocol": "goagent_py.memory.base",
    "ShortTermMemoryProtocol": "goagent_py.memory.base",
    "WritePolicy": "goagent_py.memory.base",
    "min_length": "goagent_py.memory.base",
    "store_always": "goagent_py.memory.base",
    "BlockChunker": "goagent_py.memory.chunking",
    "MarkdownChunker": "goagent_py.memory.chunking",
    "NoOpChunker": "goagent_py.memory.chunking",
    "RecursiveChunker": "goagent_py.memory.chunking",
    "SentenceChunker": "goagent_py.memory.chunking",
    "TextChunker": "goagent_py.memory.chunking",
    "ClampParts": "goagent_py.memory.compaction",
    "ClearToolResults": "goagent_py.memory.compaction",
    "CompactionError": "goagent_py.memory.compaction",
    "SlidingWindow": "goagent_py.memory.compaction",
    "Strategy": "goagent_py.memory.compaction",
    "Summarize": "goagent_py.memory.compaction",
    "Tiered": "goagent_py.memory.compaction",
    "validate_context": "goagent_py.memory.compaction",
    "CompactionEvent": "goagent_py.memory.compactor",
    "Compactor": "goagent_py.memory.compactor",
    "ConsolidationReport": "goagent_py.memory.consolidation",
    "Decider": "goagent_py.memory.consolidation",
    "Decision": "goagent_py.memory.consolidation",
    "DecisionError": "goagent_py.memory.consolidation",
    "ModelDecider": "goagent_py.memory.deciders",
    "RuleDecider": "goagent_py.memory.deciders",
    "LongTermMemory": "goagent_py.memory.long_term",
    "MemoryChange": "goagent_py.memory.records",
    "MemoryRecord": "goagent_py.memory.records",
    "FixedWindow": "goagent_py.memory.policies",
    "NoOp": "goagent_py.memory.policies",
    "Policy": "goagent_py.memory.policies",
    "TokenWindow": "goagent_py.memory.policies",
    "message_groups": "goagent_py.memory.policies",
    "ShortTermMemory": "goagent_py.memory.short_term",
    "InMemoryStorage": "goagent_py.memory.storage",
    "PostgresStorage": "goagent_py.memory.storage",
    "SessionLease": "goagent_py.memory.storage",
    "SQLiteStorage": "goagent_py.memory.storage",
    "Storage": "goagent_py.memory.storage",
    "CharEstimator": "goagent_py.memory.tokens",
    "HeuristicEstimator": "goagent_py.memory.tokens",
    "TiktokenEstimator": "goagent_py.memory.tokens",
    "TokenEstimator": "goagent_py.memory.tokens",
    "image_tokens": "goagent_py.memory.tokens",
    "BulkVectorStore": "goagent_py.memory.vector",
    "ChromaStore": "goagent_py.memory.vector",
    "CountableStore": "goagent_py.memory.vector",
    "EmbedderRecordStore": "goagent_py.memory.vector",
    "GuardedStore": "goagent_py.memory.vector",
    "ListableStore": "goagent_py.memory.vector",
    "InMemoryVectorStore": "goagent_py.memory.vector",
    "Metric": "goagent_py.memory.vector",
    "ObservableStore": "goagent_py.memory.vector",
    "PgVectorStore": "goagent_py.memory.vector",
    "QdrantStore": "goagent_py.memory.vector",
    "ScoredMessage": "goagent_py.memory.vector",
    "SearchOptions": "goagent_py.memory.vector",
    "SqliteVecStore": "goagent_py.memory.vector",
    "UpsertEntry": "goagent_py.memory.vector",
    "Vector": "goagent_py.memory.vector",
    "VectorStore": "goagent_py.memory.vector",
    "VectorStoreObserver": "goagent_py.memory.vector",
    "merge_observers": "goagent_py.memory.vector",
}


def __getattr__(name: str) -> _Any:
    """Load a public name's module on first access (PEP 562)."""
    return _lazy_load(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return _lazy_dir(__name__, _LAZY)


__all__ = [
    "BatchEmbedder",
    "BlockChunker",
    "BulkVectorStore",
    "CharEstimator",
    "ChromaStore",
    "Chunk",
    "Chunker",
    "ClampParts",
    "ClearToolResults",
    "CompactionError",
    "CompactionEvent",
    "Compactor",
    "ConsolidationReport",
    "CountableStore",
    "Decider",
    "Decision",
    "DecisionError",
    "Embedder",
    "EmbedderRecordStore",
    "FixedWindow",
    "GuardedStore",
    "HeuristicEstimator",
    "image_tokens",
    "InMemoryStorage",
    "InMemoryVectorStore",
    "ListableStore",
    "LongTermMemory",
    "LongTermMemoryProtocol",
    "MarkdownChunker",
    "MemoryChange",
    "MemoryRecord",
    "merge_observers",
    "message_groups",
    "Metric",
    "min_length",
    "ModelDecider",
    "NoOp",
    "NoOpChunker",
    "ObservableStore",
    "PgVectorStore",
    "Policy",
    "PostgresStorage",
    "QdrantStore",
    "RecursiveChunker",
    "RuleDecider",
    "ScoredMessage",
    "SearchOptions",
    "SentenceChunker",
    "SessionLease",
    "ShortTermMemory",
    "ShortTermMemoryProtocol",
    "SlidingWindow",
    "SQLiteStorage",
    "SqliteVecStore",
    "Storage",
    "store_always",
    "Strategy",
    "Summarize",
    "TextChunker",
    "Tiered",
    "TiktokenEstimator",
    "TokenEstimator",
    "TokenWindow",
    "UpsertEntry",
    "validate_context",
    "Vector",
    "VectorStore",
    "VectorStoreObserver",
    "WritePolicy",
]
