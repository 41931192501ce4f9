"""Internal: import the public names from :mod:`skillwire` (the front door); this package may change.

Task stores: where tasks live. ``open_store(url)`` picks one from a URL. The store protocol and its values
are :mod:`skillwire.stores.base`'s (its ``__all__`` lists them, once); the stores are
:class:`MemoryTaskStore` and :class:`SQLiteTaskStore`, and :class:`~skillwire.stores.postgres.PostgresTaskStore`
(imported on first use: it needs the ``postgres`` extra, asyncpg).
"""

from __future__ import annotations

from skillwire.stores import base
from skillwire.stores.base import *  # noqa: F403 - the protocol's names, listed once in base.__all__
from skillwire.stores.memory import MemoryTaskStore
from skillwire.stores.sqlite import SQLiteTaskStore

__all__ = ["MemoryTaskStore", "SQLiteTaskStore"]
__all__ += base.__all__
