"""Task stores: where tasks live. ``open_store(url)`` picks one from a URL."""

from __future__ import annotations

from skillwire.stores.base import StoredTask, TaskPage, TaskQuery, TaskStore, open_store
from skillwire.stores.memory import MemoryTaskStore
from skillwire.stores.sqlite import SQLiteTaskStore

__all__ = [
    "MemoryTaskStore",
    "SQLiteTaskStore",
    "StoredTask",
    "TaskPage",
    "TaskQuery",
    "TaskStore",
    "open_store",
]
