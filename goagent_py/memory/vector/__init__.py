"""Vector stores: one interface, backends from in-memory to sqlite-vec, pgvector, qdrant and
Chroma.

Importing this package stays light: numpy and each backend's driver load on first use.
"""

from goagent_py.memory.vector.base import (
    BulkVectorStore,
    CountableStore,
    EmbedderRecordStore,
    GuardedStore,
    ListableStore,
    Metric,
    ScoredMessage,
    SearchOptions,
    UpsertEntry,
    Vector,
    VectorStore,
)
from goagent_py.memory.vector.chroma import ChromaStore
from goagent_py.memory.vector.in_memory import InMemoryVectorStore
from goagent_py.memory.vector.observable import (
    ObservableStore,
    VectorStoreObserver,
    merge_observers,
)
from goagent_py.memory.vector.pgvector import PgVectorStore
from goagent_py.memory.vector.qdrant import QdrantStore
from goagent_py.memory.vector.sqlite_vec import SqliteVecStore

__all__ = [
    "BulkVectorStore",
    "ChromaStore",
    "CountableStore",
    "EmbedderRecordStore",
    "GuardedStore",
    "InMemoryVectorStore",
    "ListableStore",
    "merge_observers",
    "Metric",
    "ObservableStore",
    "PgVectorStore",
    "QdrantStore",
    "ScoredMessage",
    "SearchOptions",
    "SqliteVecStore",
    "UpsertEntry",
    "Vector",
    "VectorStore",
    "VectorStoreObserver",
]
