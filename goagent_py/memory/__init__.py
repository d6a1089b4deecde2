"""Memory: short-term (the conversation) and long-term (semantic recall across sessions).

Importing this package stays light: numpy, tiktoken and the vector-store drivers load on first
use. Vector stores live in :mod:`goagent_py.memory.vector`.
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
    from goagent_py.memory.storage import InMemoryStorage, SQLiteStorage, Storage
    from goagent_py.memory.tokens import (
        CharEstimator,
        HeuristicEstimator,
        TiktokenEstimator,
        TokenEstimator,
        image_tokens,
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
    "SQLiteStorage": "goagent_py.memory.storage",
    "Storage": "goagent_py.memory.storage",
    "CharEstimator": "goagent_py.memory.tokens",
    "HeuristicEstimator": "goagent_py.memory.tokens",
    "TiktokenEstimator": "goagent_py.memory.tokens",
    "TokenEstimator": "goagent_py.memory.tokens",
    "image_tokens": "goagent_py.memory.tokens",
}


def __getattr__(name: str) -> _Any:
    """Load a public name's module on first access (PEP 562)."""
    return _lazy_load(__name__, _LAZY, name)


def __dir__() -> list[str]:
    return _lazy_dir(__name__, _LAZY)


__all__ = [
    "BatchEmbedder",
    "BlockChunker",
    "CharEstimator",
    "Chunk",
    "Chunker",
    "ClampParts",
    "ClearToolResults",
    "CompactionError",
    "CompactionEvent",
    "Compactor",
    "ConsolidationReport",
    "Decider",
    "Decision",
    "DecisionError",
    "Embedder",
    "FixedWindow",
    "HeuristicEstimator",
    "image_tokens",
    "InMemoryStorage",
    "LongTermMemory",
    "LongTermMemoryProtocol",
    "MarkdownChunker",
    "MemoryChange",
    "MemoryRecord",
    "message_groups",
    "min_length",
    "ModelDecider",
    "NoOp",
    "NoOpChunker",
    "Policy",
    "RecursiveChunker",
    "RuleDecider",
    "SentenceChunker",
    "ShortTermMemory",
    "ShortTermMemoryProtocol",
    "SlidingWindow",
    "SQLiteStorage",
    "Storage",
    "store_always",
    "Strategy",
    "Summarize",
    "TextChunker",
    "Tiered",
    "TiktokenEstimator",
    "TokenEstimator",
    "TokenWindow",
    "validate_context",
    "WritePolicy",
]
