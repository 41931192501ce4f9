"""Internal: import the public names from :mod:`skillwire` (the front door); this package may change.

Task stores: where tasks live. ``open_store(url)`` picks one from a URL."""

from __future__ import annotations

from skillwire.stores.base import (
    Layout,
    StoredTask,
    TaskPage,
    TaskQuery,
    TaskStore,
    TaskWrite,
    open_store,
    write_task,
)
from skillwire.stores.memory import MemoryTaskStore
from skillwire.stores.sqlite import SQLiteTaskStore

__all__ = [
    "Layout",
    "MemoryTaskStore",
    "SQLiteTaskStore",
    "StoredTask",
    "TaskPage",
    "TaskQuery",
    "TaskStore",
    "TaskWrite",
    "open_store",
    "write_task",
]
