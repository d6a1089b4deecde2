"""Memory: short-term (the conversation) and long-term (semantic recall across sessions)."""

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

__all__ = [
    "BatchEmbedder",
    "Chunk",
    "Chunker",
    "Embedder",
    "LongTermMemoryProtocol",
    "ShortTermMemoryProtocol",
    "WritePolicy",
    "min_length",
    "store_always",
]
