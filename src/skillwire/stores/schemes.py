"""Which store a URL opens: one row per scheme, naming the module and function that open it.

The table names modules as strings, so neither this module nor the store protocol (:mod:`.base`) imports a
store (and asyncpg loads only when a ``postgresql://`` URL is opened). Adding a store is its module in this
folder, with a function ``open_url(url, limits, setting) -> TaskStore``, and one row here::

    store = open_store("sqlite:///.skillwire/greeter.db")
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import cast

from skillwire.errors import SkillwireError
from skillwire.protocol.limits import Limits
from skillwire.stores.base import TaskStore

__all__ = ["SCHEMES", "open_store"]

#: scheme -> ``"module:function"``; the function takes ``(url, limits, setting)`` and returns the store.
SCHEMES: dict[str, str] = {
    "memory": "skillwire.stores.memory:open_url",
    "sqlite": "skillwire.stores.sqlite:open_url",
    "postgresql": "skillwire.stores.postgres:open_url",
    "postgres": "skillwire.stores.postgres:open_url",
}


def scheme_of(url: str) -> str:
    """The table's key for ``url`` (as written: schemes are case-sensitive here), or ``""``: ``memory://``
    takes nothing after it."""
    if url in ("memory://", "memory"):
        return "memory"
    scheme = url.partition("://")[0] if "://" in url else ""
    return "" if scheme == "memory" else scheme


def open_store(url: str, *, limits: Limits | None = None, setting: str = "store=") -> TaskStore:
    """A store for ``url``: ``memory://``, ``sqlite:///relative/path.db`` or ``sqlite:////absolute/path.db``.
    ``setting`` is how the caller's user chose it (``--store``, ``store=``), for the errors that tell them
    to change it.

    A SQLite URL may carry ``?timeout=SECONDS``: how long a write waits for a database that another
    connection has locked before it fails (default 5).

    ``postgresql://`` (or ``postgres://``) URLs open :class:`~skillwire.stores.postgres.PostgresTaskStore`,
    shared by several processes (``?schema=NAME``, ``?pool=N``, ``?timeout=SECONDS``: docs/postgres.md)."""
    opener = SCHEMES.get(scheme_of(url))
    if opener is None:
        raise SkillwireError(
            f"Unknown store URL {url!r}: use memory://, sqlite:///PATH or postgresql://HOST/DATABASE"
        )
    module, _, function = opener.partition(":")
    open_url = getattr(importlib.import_module(module), function)
    return cast(Callable[[str, Limits, str], TaskStore], open_url)(url, limits or Limits(), setting)
