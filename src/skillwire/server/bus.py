"""The EventBus carries each task's events to every subscriber, in order.

A subscriber registers *before* it reads the task's current snapshot; events are tagged with the task
version they produced, so the subscriber drops what the snapshot already contains and misses nothing
(replay from the store, then live). The runtime publishes an event only once the store has committed it.
The in-process bus serves one server process; :mod:`skillwire.server.bus_redis` serves several that share
a Redis, behind the same protocol (:func:`open_bus` picks one by URL).

Each subscriber's queue is bounded (events, and approximate bytes of content). A subscriber that stops
reading while its task keeps producing is dropped once it passes the bound: its stream ends with
:class:`StreamDroppedError` and it can resubscribe (SubscribeToTask replays the task from the store).

A shared bus replays what a task's stream holds to a process's first subscription of it, which may be far
more than the bound when the task is long. So a subscription knows its *floor*: the snapshot version its
caller holds. Events at or below the floor are dropped as they arrive and never count toward the bound.
``subscribe(key, after=VERSION)`` gives the floor when the caller knows it; ``subscribe(key, after=None)``
leaves it open until ``sub.skip_through(version)``, once the caller has read the snapshot. While the floor
is open, a queue past the bound sheds its oldest events instead of being dropped; when the floor is set,
the subscription is dropped after all if a shed event was newer than the floor (it would be missing).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Protocol

from msgspec import UNSET

from skillwire.errors import A2AError, MissingExtraError, SkillwireError, StreamDroppedError
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import Part, StreamResponse

__all__ = ["EventBus", "InProcessEventBus", "Subscription", "open_bus"]

#: (task version after the event, the event, its approximate size); an error ends the subscription by
#: raising; ``None`` ends it.
Item = tuple[int, StreamResponse, int] | A2AError | None
#: Newer than any task version: where a reply (version 0, no task) stands against a floor.
_NEWEST = 1 << 62


class Subscription(Protocol):
    async def next(self) -> tuple[int, StreamResponse] | None:
        """The next event, or ``None`` once the bus closed; raises the error that ended the stream."""
        ...

    def skip_through(self, version: int) -> None:
        """Drop the events of ``version`` and older, queued or still to come: the caller holds a snapshot of
        the task at that version (read after subscribing, so nothing newer is missed)::

            sub = bus.subscribe(key, after=None)
            stored = await store.get(task_id, tenant=tenant)
            sub.skip_through(stored.version)
        """
        ...

    def close(self) -> None: ...


class EventBus(Protocol):
    #: Whether other processes publish and subscribe through this bus too (Redis, PostgreSQL): a process then
    #: learns from it that a task it runs was ended elsewhere (a CancelTask served by another process).
    shared: bool

    def subscribe(self, key: tuple[str, str], *, after: int | None = 0) -> Subscription:
        """A subscription to ``key``'s events newer than version ``after`` (``None``: not known yet, the
        caller calls ``skip_through`` once it has read the task's snapshot)."""
        ...

    def publish(self, key: tuple[str, str], version: int, event: StreamResponse) -> None: ...

    def fail(self, key: tuple[str, str], error: A2AError) -> None:
        """End every subscription of ``key`` with ``error`` (the task's state could not be stored)."""
        ...

    def subscriber_count(self, key: tuple[str, str]) -> int:
        """How many subscriptions follow ``key`` in this process."""
        ...

    def close(self) -> None:
        """End every subscription (server shutdown)."""
        ...


class _QueueSubscription:
    """A deque with at most one waiter: cheaper than asyncio.Queue for one consumer."""

    def __init__(self, bus: InProcessEventBus, key: tuple[str, str], floor: int | None) -> None:
        self._bus = bus
        self._key = key
        self._items: deque[Item] = deque()
        self._bytes = 0
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False
        #: Events of this version and older are dropped; None until the caller knows it (skip_through).
        self._floor = floor
        #: While the floor is open: the newest version shed to stay within the bound (-1: none; a reply,
        #: version 0, is newer than any floor).
        self._shed = -1

    def push(self, item: Item) -> bool:
        """Queue ``item``; False if that passes the bound (the caller drops this subscriber)."""
        if isinstance(item, tuple) and self._below_floor(item[0]):
            return True
        self._items.append(item)
        if isinstance(item, tuple):
            self._bytes += item[2]
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)
        if self._floor is None:
            self._shed_oldest()
            return True
        return self._within_bound()

    def skip_through(self, version: int) -> None:
        if self._floor is not None and version <= self._floor:
            return
        self._floor = version
        items = [item for item in self._items if not (isinstance(item, tuple) and self._below_floor(item[0]))]
        self._items = deque(items)
        self._bytes = sum(item[2] for item in items if isinstance(item, tuple))
        ending = bool(items) and not isinstance(items[-1], tuple)  # its end is queued already: kept
        if self._shed > version and not ending:  # an event the snapshot lacks was shed
            self._shed = -1
            self._bus._drop_behind(self._key, self)

    async def next(self) -> tuple[int, StreamResponse] | None:
        if self._floor is None:  # read before a snapshot: everything queued counts from now on
            self.skip_through(0)
        while not self._items:
            if self._ended:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        item = self._items.popleft()
        if item is None or isinstance(item, A2AError):
            self._ended = True
            self._items.clear()
            if item is not None:
                raise item
            return None
        self._bytes -= item[2]
        return item[0], item[1]

    def end(self, item: A2AError | None) -> None:
        """Drop what is queued and end with ``item`` (the subscriber cannot keep up, or the bus closed)."""
        if isinstance(item, StreamDroppedError):
            self._items.clear()
            self._bytes = 0
        self.push(item)

    def close(self) -> None:
        self._bus._drop(self._key, self)

    def _below_floor(self, version: int) -> bool:
        return self._floor is not None and 0 < version <= self._floor

    def _within_bound(self) -> bool:
        return len(self._items) <= self._bus.max_events and self._bytes <= self._bus.max_bytes

    def _shed_oldest(self) -> None:
        """Keep within the bound by dropping the oldest events: the snapshot still to be read may hold them."""
        items = self._items
        while not self._within_bound() and items and isinstance(oldest := items[0], tuple):
            items.popleft()
            version, _, size = oldest
            self._bytes -= size
            self._shed = max(self._shed, version or _NEWEST)


class InProcessEventBus:
    shared = False

    def __init__(self, *, max_events: int = 10_000, max_bytes: int = 8 * 1024 * 1024) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        self._subs: dict[tuple[str, str], set[_QueueSubscription]] = {}

    def subscribe(self, key: tuple[str, str], *, after: int | None = 0) -> _QueueSubscription:
        sub = _QueueSubscription(self, key, after)
        self._subs.setdefault(key, set()).add(sub)
        return sub

    def publish(self, key: tuple[str, str], version: int, event: StreamResponse) -> None:
        subs = self._subs.get(key)
        if not subs:
            return
        item = (version, event, _approx_size(event))
        behind = [sub for sub in subs if not sub.push(item)]
        for sub in behind:
            self._drop_behind(key, sub)

    def fail(self, key: tuple[str, str], error: A2AError) -> None:
        for sub in self._subs.pop(key, ()):
            sub.end(error)

    def close(self) -> None:
        for subs in self._subs.values():
            for sub in subs:
                sub.end(None)
        self._subs.clear()

    def subscriber_count(self, key: tuple[str, str]) -> int:
        return len(self._subs.get(key, ()))

    def subscriptions(self) -> int:
        """How many subscriptions this bus holds, over every task (the ``skillwire_subscribers`` gauge)."""
        return sum(len(subs) for subs in self._subs.values())

    def _drop_behind(self, key: tuple[str, str], sub: _QueueSubscription) -> None:
        """End ``sub``, which fell past the bound, with StreamDroppedError."""
        sub.end(
            StreamDroppedError(
                f"This stream fell more than {self.max_events} events or {self.max_bytes} bytes behind the"
                f" task and was dropped; subscribe to task {key[1]} again to catch up"
            )
        )
        self._drop(key, sub)

    def _drop(self, key: tuple[str, str], sub: _QueueSubscription) -> None:
        subs = self._subs.get(key)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[key]


def open_bus(url: str, limits: Limits | None = None) -> EventBus:
    """The bus ``url`` names: ``memory://`` (this process only) or ``redis://HOST[:PORT][/DB]`` (also
    ``rediss://`` for TLS): the processes sharing that Redis share their tasks' events. The subscriber queue
    bounds are ``limits.stream_buffer_events`` and ``stream_buffer_bytes``::

        app = agent.asgi(store=store, bus=open_bus("redis://127.0.0.1:6379/0"))
    """
    limits = limits or Limits()
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if url in ("memory://", "memory"):
        return InProcessEventBus(max_events=limits.stream_buffer_events, max_bytes=limits.stream_buffer_bytes)
    if scheme in ("redis", "rediss"):
        try:
            from skillwire.server.bus_redis import RedisEventBus
        except ImportError as exc:
            if exc.name is None or exc.name.split(".")[0] != "redis":
                raise
            raise MissingExtraError(f"the event bus {scheme}:// needs redis-py", "redis") from None
        try:
            return RedisEventBus(
                url, max_events=limits.stream_buffer_events, max_bytes=limits.stream_buffer_bytes
            )
        except ValueError as exc:  # redis-py's word on a URL it cannot read
            raise SkillwireError(f"event bus URL: {exc}") from None
    if scheme in ("postgresql", "postgres"):
        try:
            from skillwire.server.bus_postgres import PostgresEventBus
        except ImportError as exc:
            if exc.name is None or exc.name.split(".")[0] != "asyncpg":
                raise
            raise MissingExtraError(f"the event bus {scheme}:// needs asyncpg", "postgres") from None
        return PostgresEventBus(
            url, max_events=limits.stream_buffer_events, max_bytes=limits.stream_buffer_bytes
        )
    named = f"scheme {scheme}://" if scheme else f"URL {url!r}"  # a scheme only: the URL may hold a password
    raise SkillwireError(
        f"Unknown event bus {named}: use memory://, redis://HOST[:PORT][/DB] (rediss:// for TLS) or postgresql://..."
    )


# -- sizes ------------------------------------------------------------------------------------------------

_EVENT_OVERHEAD = 200


def _approx_size(event: StreamResponse) -> int:
    """Roughly what an event holds, without encoding it: its parts' text, bytes, URLs and data."""
    size = _EVENT_OVERHEAD
    if event.artifact_update is not None:
        size += _parts_size(event.artifact_update.artifact.parts)
    elif event.status_update is not None and event.status_update.status.message is not None:
        size += _parts_size(event.status_update.status.message.parts)
    elif event.message is not None:
        size += _parts_size(event.message.parts)
    return size


def _parts_size(parts: list[Part]) -> int:
    size = 0
    for part in parts:
        for value in (part.text, part.raw, part.url):
            if value is not UNSET:
                size += len(value)
        if part.data is not UNSET:
            size += _data_size(part.data)
    return size


def _data_size(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, dict | list):
        return 16 * (len(value) + 1)
    return 8
