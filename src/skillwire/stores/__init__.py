"""Task stores: where tasks live. Public: the names in ``__all__`` (the modules are internal).

``open_store(url)`` picks one from a URL (``memory://``, ``sqlite:///path``, ``postgresql://...``), as
``agent.asgi(store=URL)`` does, by the table in :mod:`skillwire.stores.schemes` (one row per scheme). The store protocol and its values are :mod:`skillwire.stores.base`'s (its
``__all__`` lists them, once); the stores are :class:`MemoryTaskStore`, :class:`SQLiteTaskStore` and
``PostgresTaskStore`` (imported on first use: it needs the ``postgres`` extra, asyncpg). Every one of them is
also a :class:`RetentionStore`: it prunes finished tasks and reports :class:`StoreStats`
(docs/retention.md)::

    from skillwire.stores import PostgresTaskStore

    store = PostgresTaskStore("postgresql://app@db.internal/agents?schema=skillwire")
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from skillwire.stores import base
from skillwire.stores.base import *  # noqa: F403 - the protocol's names, listed once in base.__all__
from skillwire.stores.retention import Pruned, RetentionStore, StoreStats
from skillwire.stores.schemes import open_store

if TYPE_CHECKING:
    from skillwire.stores.memory import MemoryTaskStore
    from skillwire.stores.postgres import PostgresTaskStore
    from skillwire.stores.sqlite import SQLiteTaskStore

__all__ = [
    "MemoryTaskStore",
    "PostgresTaskStore",
    "Pruned",
    "RetentionStore",
    "SQLiteTaskStore",
    "StoreStats",
    "open_store",
]
__all__ += base.__all__


#: The stores, each imported when first asked for (PostgreSQL's needs the ``postgres`` extra, asyncpg; the
#: others are not needed by a caller that only reads a store's URL).
_STORES = {
    "MemoryTaskStore": "skillwire.stores.memory",
    "PostgresTaskStore": "skillwire.stores.postgres",
    "SQLiteTaskStore": "skillwire.stores.sqlite",
}


def __getattr__(name: str) -> Any:
    module = _STORES.get(name)
    if module is None:
        raise AttributeError(f"module 'skillwire.stores' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
