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
    "Embedder",
    "FixedWindow",
    "HeuristicEstimator",
    "image_tokens",
    "InMemoryStorage",
    "LongTermMemory",
    "LongTermMemoryProtocol",
    "MarkdownChunker",
    "message_groups",
    "min_length",
    "NoOp",
    "NoOpChunker",
    "Policy",
    "RecursiveChunker",
    "SentenceChunker",
    "ShortTermMemory",
    "ShortTermMemoryProtocol",
    "SQLiteStorage",
    "Storage",
    "store_always",
    "TextChunker",
    "TiktokenEstimator",
    "TokenEstimator",
    "TokenWindow",
    "WritePolicy",
]
