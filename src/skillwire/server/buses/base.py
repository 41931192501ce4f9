"""The EventBus carries each task's events to every subscriber, in order.

A subscriber registers *before* it reads the task's current snapshot; events are tagged with the task
generation they produced (A2A 1.1: one more per event), so the subscriber drops what the snapshot already
contains and misses nothing (replay from the store, then live). The runtime publishes an event only once the
store has committed it, so the store's event log holds every event a bus carries.

The in-process bus serves one server process; :mod:`skillwire.server.buses.redis` and
:mod:`skillwire.server.buses.postgres` serve several that share a Redis or a PostgreSQL, behind the same
protocol (:func:`open_bus` picks one by URL).

**A reader that reads is never cut, and memory stays bounded.** Each subscriber's queue is bounded (events,
and approximate bytes of content). A queue past its bound sheds its oldest events instead of growing: the
subscriber has fallen behind (a burst of events committed at once, a slow reader), and its next read says so
(:class:`Behind`, with the last generation it was handed). The reader then catches up from the store's event
log (``TaskStore.events``) and tells the subscription how far it got (``skip_through``), which drops the
queued events it now has; when what was shed is all covered, the queue is live again. The producer never
waits for a subscriber. A reader that stopped reading altogether costs this bound and the stream's own write
budget (``Limits.write_timeout``), which lets it go.

A shared bus replays what a task's stream holds to a process's first subscription of it, which may be far
more than the bound when the task is long. So a subscription knows its *floor*: the generation its caller
holds. Events at or below the floor are dropped as they arrive and never count toward the bound.
``subscribe(key, after=GENERATION)`` gives the floor when the caller knows it; ``subscribe(key, after=None)``
leaves it open until ``sub.skip_through(generation)``, once the caller has read the snapshot.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any, Protocol

from msgspec import UNSET

from skillwire.errors import A2AError, MissingExtraError, SkillwireError, StreamDroppedError
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import Part, StreamResponse

__all__ = ["Behind", "EventBus", "InProcessEventBus", "Subscription", "open_bus"]

#: (task generation after the event, the event, its approximate size); an error ends the subscription by
#: raising; ``None`` ends it.
Item = tuple[int, StreamResponse, int] | A2AError | None


class Behind:
    """What ``Subscription.next`` answers when events past ``after`` (the last generation the subscriber
    was handed) were shed: read them from the store's event log, then ``skip_through`` the last one read."""

    __slots__ = ("after",)

    def __init__(self, after: int) -> None:
        self.after = after

    def __repr__(self) -> str:
        return f"Behind(after={self.after})"


class Subscription(Protocol):
    async def next(self) -> tuple[int, StreamResponse] | Behind | None:
        """The next event; :class:`Behind` when events were shed (catch up from the store); ``None`` once
        the bus closed. Raises the error that ended the stream."""
        ...

    def skip_through(self, generation: int) -> None:
        """Drop the events of ``generation`` and older, queued or still to come: the caller holds them (a
        snapshot of the task read after subscribing, so nothing newer is missed, or events it read from the
        store's log)::

            sub = bus.subscribe(key, after=None)
            stored = await store.get(task_id, tenant=tenant)
            sub.skip_through(stored.task.generation)
        """
        ...

    def close(self) -> None: ...


class EventBus(Protocol):
    #: Whether other processes publish and subscribe through this bus too (Redis, PostgreSQL): a process then
    #: learns from it that a task it runs was ended elsewhere (a CancelTask served by another process).
    shared: bool

    def subscribe(self, key: tuple[str, str], *, after: int | None = 0) -> Subscription:
        """A subscription to ``key``'s events newer than generation ``after`` (``None``: not known yet, the
        caller calls ``skip_through`` once it has read the task's snapshot)."""
        ...

    def publish(self, key: tuple[str, str], generation: int, event: StreamResponse) -> None:
        """Send ``event``, which made the task's generation ``generation`` (0: a reply, no task), to the
        task's subscribers; never waits."""
        ...

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
        #: Events of this generation and older are dropped; None until the caller knows it (skip_through).
        self._floor = floor
        #: The newest generation shed to stay within the bound (-1: none; a reply, generation 0, is newer
        #: than any floor). Past the floor, the subscriber is behind: see :class:`Behind`.
        self._shed = -1

    def push(self, item: Item) -> None:
        """Queue ``item``, shedding the oldest events past the bound."""
        if isinstance(item, tuple) and self._below_floor(item[0]):
            return
        self._items.append(item)
        if isinstance(item, tuple):
            self._bytes += item[2]
            if not self._within_bound():
                self._shed_oldest()
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    def skip_through(self, generation: int) -> None:
        if self._floor is not None and generation <= self._floor:
            return
        self._floor = generation
        items = self._items
        while items and isinstance(oldest := items[0], tuple) and self._below_floor(oldest[0]):
            items.popleft()
            self._bytes -= oldest[2]

    async def next(self) -> tuple[int, StreamResponse] | Behind | None:
        if self._floor is None:  # read before a snapshot: everything queued counts from now on
            self.skip_through(0)
        floor = self._floor or 0
        if self._shed > floor:
            return Behind(floor)
        while not self._items:
            if self._ended:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
            if self._shed > floor:
                return Behind(floor)
        item = self._items.popleft()
        if item is None or isinstance(item, A2AError):
            self._ended = True
            self._items.clear()
            if item is not None:
                raise item
            return None
        self._bytes -= item[2]
        if item[0]:
            self._floor = item[0]
        return item[0], item[1]

    def end(self, item: A2AError | None) -> None:
        """End with ``item`` after what is queued (``None``: the bus closed; an error: the task's state could
        not be stored), or at once for StreamDroppedError (the bus lost its connection)."""
        if isinstance(item, StreamDroppedError):
            self._items.clear()
            self._bytes = 0
        self.push(item)

    def close(self) -> None:
        self._bus._drop(self._key, self)

    def _below_floor(self, generation: int) -> bool:
        return self._floor is not None and 0 < generation <= self._floor

    def _within_bound(self) -> bool:
        return len(self._items) <= self._bus.max_events and self._bytes <= self._bus.max_bytes

    def _shed_oldest(self) -> None:
        """Keep within the bound by dropping the oldest events: the store's log (or the snapshot still to be
        read) holds them."""
        items = self._items
        while not self._within_bound() and items and isinstance(oldest := items[0], tuple) and oldest[0]:
            items.popleft()
            generation, _, size = oldest
            self._bytes -= size
            self._shed = max(self._shed, generation)
        self._bus.shed += 1


class InProcessEventBus:
    shared = False

    def __init__(self, *, max_events: int = 10_000, max_bytes: int = 8 * 1024 * 1024) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        #: How many times a subscriber's queue shed events (its reader then caught up from the store).
        self.shed = 0
        self._subs: dict[tuple[str, str], set[_QueueSubscription]] = {}

    def subscribe(self, key: tuple[str, str], *, after: int | None = 0) -> _QueueSubscription:
        sub = _QueueSubscription(self, key, after)
        self._subs.setdefault(key, set()).add(sub)
        return sub

    def publish(self, key: tuple[str, str], generation: int, event: StreamResponse) -> None:
        subs = self._subs.get(key)
        if not subs:
            return
        item = (generation, event, _approx_size(event))
        for sub in subs:
            sub.push(item)

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
            from skillwire.server.buses.redis import RedisEventBus
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
            from skillwire.server.buses.postgres import PostgresEventBus
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
