"""Where short-term memory keeps the conversation: the :class:`Storage` protocol and backends."""

from goagent_py.memory.storage._lease import SessionLease
from goagent_py.memory.storage.base import Storage
from goagent_py.memory.storage.in_memory import InMemoryStorage
from goagent_py.memory.storage.postgres import PostgresStorage
from goagent_py.memory.storage.sqlite import SQLiteStorage

__all__ = ["InMemoryStorage", "PostgresStorage", "SessionLease", "SQLiteStorage", "Storage"]
