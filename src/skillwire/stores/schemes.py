"""Which store a URL opens: one row per scheme, naming the module and function that open it.

The table names modules as strings, so neither this module nor the store protocol (:mod:`.base`) imports a
store (and asyncpg loads only when a ``postgresql://`` URL is opened). Adding a store is its module in this
folder, with a function ``open_url(url, limits, setting) -> TaskStore``, and one row here::

    store = open_store("sqlite:///.skillwire/greeter.db")

The operator's commands (``skillwire db``, ``skillwire deliveries``) reach a store's data through the same
row: the store's module may offer ``TOOLS``, a :class:`StoreTools`, and what it leaves out those commands
refuse with a message naming the store. So a new store is still one module and one line.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from skillwire.errors import SkillwireError
from skillwire.protocol.limits import Limits
from skillwire.stores.base import TaskStore

if TYPE_CHECKING:
    from skillwire.stores.push import Delivery
    from skillwire.stores.retention import StoreStats

__all__ = ["SCHEMES", "StoreTools", "open_store", "store_tools"]

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
    module = _module(url)
    open_url = getattr(module, SCHEMES[scheme_of(url)].partition(":")[2])
    return cast(Callable[[str, Limits, str], TaskStore], open_url)(url, limits or Limits(), setting)


@dataclass(frozen=True)
class StoreTools:
    """What the operator's commands do to a store's data without serving it, each given the store's URL; a
    tool a store lacks is None. Reads work while a server (or a cluster) owns the store."""

    #: ``skillwire db stats``: tasks by state, size, the oldest finished task.
    read_stats: Callable[[str], Coroutine[Any, Any, StoreStats]] | None = None
    #: ``skillwire deliveries``: the failed push deliveries after a sequence number, at most a number of them.
    read_failed_deliveries: Callable[[str, int, int], Coroutine[Any, Any, list[Delivery]]] | None = None
    #: ``skillwire db upgrade``: apply the schema's migrations; the schema version.
    upgrade: Callable[[str], Coroutine[Any, Any, int]] | None = None
    #: ``skillwire db prune --vacuum``: give the free space back to the file system.
    vacuum: Callable[[str], Coroutine[Any, Any, None]] | None = None


def _module(url: str) -> ModuleType:
    opener = SCHEMES.get(scheme_of(url))
    if opener is None:
        raise SkillwireError(
            f"Unknown store URL {url!r}: use memory://, sqlite:///PATH or postgresql://HOST/DATABASE"
        )
    return importlib.import_module(opener.partition(":")[0])


def store_tools(url: str) -> StoreTools:
    """The operator's tools of the store that ``url`` opens (none for a store whose module offers no
    ``TOOLS``); SkillwireError for a URL no store opens."""
    tools = getattr(_module(url), "TOOLS", None)
    return tools if isinstance(tools, StoreTools) else StoreTools()
