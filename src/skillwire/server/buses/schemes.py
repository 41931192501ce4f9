"""Which bus a URL opens: one row per scheme, naming the module and function that open it.

The table names modules as strings, so this module imports no bus (and ``skillwire.server`` loads neither
redis-py nor asyncpg until a URL asks for one). Adding a bus is its module in this folder, with a function
``open_url(url, limits) -> EventBus``, and one row here::

    bus = open_bus("redis://127.0.0.1:6379/0")
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import NamedTuple, cast

from skillwire.errors import MissingExtraError, SkillwireError
from skillwire.protocol.limits import Limits
from skillwire.server.buses.base import EventBus

__all__ = ["SCHEMES", "Scheme", "open_bus"]


class Scheme(NamedTuple):
    #: ``"module:function"``; the function takes ``(url, limits)`` and returns the bus.
    opener: str
    #: When the module needs an optional extra: (the top-level module whose absence means the extra is not
    #: installed, the library as the error names it, the extra).
    needs: tuple[str, str, str] | None = None


_REDIS = Scheme("skillwire.server.buses.redis:open_url", ("redis", "redis-py", "redis"))
_POSTGRES = Scheme("skillwire.server.buses.postgres:open_url", ("asyncpg", "asyncpg", "postgres"))

SCHEMES: dict[str, Scheme] = {
    "memory": Scheme("skillwire.server.buses.memory:open_url"),
    "redis": _REDIS,
    "rediss": _REDIS,
    "postgresql": _POSTGRES,
    "postgres": _POSTGRES,
}


def scheme_of(url: str) -> str:
    """The table's key for ``url`` (lower case), or ``""``: ``memory://`` takes nothing after it."""
    if url in ("memory://", "memory"):
        return "memory"
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    return "" if scheme == "memory" else scheme


def open_bus(url: str, limits: Limits | None = None) -> EventBus:
    """The bus ``url`` names: ``memory://`` (this process only) or ``redis://HOST[:PORT][/DB]`` (also
    ``rediss://`` for TLS): the processes sharing that Redis share their tasks' events. The subscriber queue
    bounds are ``limits.stream_buffer_events`` and ``stream_buffer_bytes``::

        app = agent.asgi(store=store, bus=open_bus("redis://127.0.0.1:6379/0"))
    """
    scheme = scheme_of(url)
    row = SCHEMES.get(scheme)
    if row is None:
        named = (
            f"scheme {scheme}://" if scheme else f"URL {url!r}"
        )  # a scheme only: the URL may hold a password
        raise SkillwireError(
            f"Unknown event bus {named}: use memory://, redis://HOST[:PORT][/DB] (rediss:// for TLS) or postgresql://..."
        )
    module, _, function = row.opener.partition(":")
    try:
        opener = getattr(importlib.import_module(module), function)
    except ImportError as exc:
        if row.needs is None or exc.name is None or exc.name.split(".")[0] != row.needs[0]:
            raise
        raise MissingExtraError(f"the event bus {scheme}:// needs {row.needs[1]}", row.needs[2]) from None
    return cast(Callable[[str, Limits], EventBus], opener)(url, limits or Limits())
