"""Memory: short-term (the conversation) and long-term (semantic recall across sessions).

Importing this package stays light: numpy, tiktoken and the vector-store drivers load on first
use. Vector stores live in :mod:`goagent_py.memory.vector`.
"""

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
from goagent_py.memory.long_term import LongTermMemory
from goagent_py.memory.policies import FixedWindow, NoOp, Policy, TokenWindow, message_groups
from goagent_py.memory.short_term import ShortTermMemory
from goagent_py.memory.storage import InMemoryStorage, SQLiteStorage, Storage
from goagent_py.memory.tokens import (
    CharEstimator,
    HeuristicEstimator,
    TiktokenEstimator,
    TokenEstimator,
    image_tokens,
)

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
    "Embedder",
    "FixedWindow",
    "HeuristicEstimator",
    "InMemoryStorage",
    "LongTermMemory",
    "LongTermMemoryProtocol",
    "MarkdownChunker",
    "NoOp",
    "NoOpChunker",
    "Policy",
    "RecursiveChunker",
    "SQLiteStorage",
    "SentenceChunker",
    "ShortTermMemory",
    "ShortTermMemoryProtocol",
    "SlidingWindow",
    "Storage",
    "Strategy",
    "Summarize",
    "TextChunker",
    "Tiered",
    "TiktokenEstimator",
    "TokenEstimator",
    "TokenWindow",
    "WritePolicy",
    "image_tokens",
    "message_groups",
    "min_length",
    "store_always",
    "validate_context",
]
