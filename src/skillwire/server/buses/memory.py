"""The in-process event bus: one server process's subscribers, each with a bounded queue (see
:mod:`skillwire.server.buses.base` for the rules every bus keeps: the floor, shedding, :class:`Behind`).
The shared buses (Redis, PostgreSQL) keep one of these inside for their local subscribers."""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

from msgspec import UNSET

from skillwire.errors import A2AError, StreamDroppedError
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import Part, StreamResponse
from skillwire.server.buses.base import Behind, EventBus

__all__ = ["InProcessEventBus", "open_url"]


#: (task generation after the event, the event, its size, its logged JSON or None); an error ends the
#: subscription by raising; ``None`` ends it.
Item = tuple[int, StreamResponse, int, bytes | None] | A2AError | None


class _QueueSubscription:
    """A deque with at most one waiter: cheaper than asyncio.Queue for one consumer."""

    def __init__(
        self, bus: InProcessEventBus, key: tuple[str, str], floor: int | None, ends_only: bool = False
    ) -> None:
        self._bus = bus
        #: Whether only the events that end the task are queued (see EventBus.subscribe).
        self._ends_only = ends_only
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
        #: The logged JSON of the event ``next`` or ``next_nowait`` returned last (None: not known).
        self.data: bytes | None = None

    def push(self, item: Item) -> bool:
        """Queue ``item``, shedding the oldest events past the bound; whether the queue holds a backlog now
        (more than a sixteenth of its bound: see :meth:`InProcessEventBus.publish`)."""
        items = self._items
        backlog = False
        if type(item) is tuple:  # an event (inline: a stream's every event comes here)
            floor = self._floor
            if floor is not None and 0 < item[0] <= floor:
                return False
            if self._ends_only and not _ends(item[1]):
                return False
            items.append(item)
            self._bytes += item[2]
            bus = self._bus
            if len(items) > bus.backlog_events or self._bytes > bus.backlog_bytes:
                backlog = True
                if len(items) > bus.max_events or self._bytes > bus.max_bytes:
                    self._shed_oldest()
        else:
            items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)
        return backlog

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
        self.data = item[3]
        return item[0], item[1]

    def next_nowait(self) -> tuple[int, StreamResponse] | None:
        """The next event if one is queued and nothing was shed past the floor, else None (``next`` then
        waits, answers Behind, or ends the subscription)."""
        floor, items = self._floor, self._items
        if floor is None or self._shed > floor or not items or type(item := items[0]) is not tuple:
            return None
        items.popleft()
        generation, event, size, self.data = item
        self._bytes -= size
        if generation:
            self._floor = generation
        return generation, event

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
            generation, _, size, _ = oldest
            self._bytes -= size
            self._shed = max(self._shed, generation)
        self._bus.shed += 1


class InProcessEventBus:
    shared = False

    def __init__(self, *, max_events: int = 10_000, max_bytes: int = 8 * 1024 * 1024) -> None:
        self.max_events = max_events
        self.max_bytes = max_bytes
        #: A queue past a sixteenth of its bound holds a backlog (see :meth:`publish`).
        self.backlog_events = max_events // 16
        self.backlog_bytes = max_bytes // 16
        #: How many times a subscriber's queue shed events (its reader then caught up from the store).
        self.shed = 0
        self._subs: dict[tuple[str, str], set[_QueueSubscription]] = {}

    def subscribe(
        self, key: tuple[str, str], *, after: int | None = 0, ends_only: bool = False
    ) -> _QueueSubscription:
        sub = _QueueSubscription(self, key, after, ends_only)
        self._subs.setdefault(key, set()).add(sub)
        return sub

    def publish(
        self, key: tuple[str, str], generation: int, event: StreamResponse, data: bytes | None = None
    ) -> bool:
        """Queue ``event`` for each subscriber of ``key``; whether one of them now holds a backlog: more than
        a sixteenth of its bound (625 events by default, where a run's turn makes 256 at most), so its reader
        is not keeping up (see ``EventBus.publish``)."""
        subs = self._subs.get(key)
        if not subs:
            return False
        item = (generation, event, len(data) if data is not None else _approx_size(event), data)
        backlog = False
        for sub in subs:
            if sub.push(item):
                backlog = True
        return backlog

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


def open_url(url: str, limits: Limits) -> EventBus:
    """``memory://``: this process only (the table in :mod:`skillwire.server.buses.schemes` sends it here)."""
    return InProcessEventBus(max_events=limits.stream_buffer_events, max_bytes=limits.stream_buffer_bytes)


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


def _ends(event: StreamResponse) -> bool:
    """Whether ``event`` ends its task: a terminal status update."""
    update = event.status_update
    return update is not None and update.status.state.is_terminal
