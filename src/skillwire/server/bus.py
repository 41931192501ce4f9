"""The EventBus carries each task's events to every subscriber, in order.

A subscriber registers *before* it reads the task's current snapshot; events are tagged with the task
version they produced, so the subscriber drops what the snapshot already contains and misses nothing
(replay from the store, then live). The in-process bus serves one server process; a Redis bus joins later
behind the same protocol.
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Protocol

from skillwire.protocol.models import StreamResponse

__all__ = ["EventBus", "InProcessEventBus", "Subscription"]

#: (task version after the event, the event); ``None`` ends the subscription.
Item = tuple[int, StreamResponse] | None


class Subscription(Protocol):
    async def next(self) -> tuple[int, StreamResponse] | None:
        """The next event, or ``None`` once the bus closed."""
        ...

    def close(self) -> None: ...


class EventBus(Protocol):
    def subscribe(self, key: tuple[str, str]) -> Subscription: ...

    def publish(self, key: tuple[str, str], version: int, event: StreamResponse) -> None: ...

    def subscriber_count(self, key: tuple[str, str]) -> int:
        """How many subscriptions follow ``key`` in this process."""
        ...

    def close(self) -> None:
        """End every subscription (server shutdown)."""
        ...


class _QueueSubscription:
    """A deque with at most one waiter: cheaper than asyncio.Queue for one consumer."""

    def __init__(self, bus: InProcessEventBus, key: tuple[str, str]) -> None:
        self._bus = bus
        self._key = key
        self._items: deque[Item] = deque()
        self._waiter: asyncio.Future[None] | None = None
        self._ended = False

    def push(self, item: Item) -> None:
        self._items.append(item)
        waiter = self._waiter
        if waiter is not None:
            self._waiter = None
            if not waiter.done():
                waiter.set_result(None)

    async def next(self) -> tuple[int, StreamResponse] | None:
        while not self._items:
            if self._ended:
                return None
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        item = self._items.popleft()
        if item is None:
            self._ended = True
        return item

    def close(self) -> None:
        self._bus._drop(self._key, self)


class InProcessEventBus:
    def __init__(self) -> None:
        self._subs: dict[tuple[str, str], set[_QueueSubscription]] = {}

    def subscribe(self, key: tuple[str, str]) -> _QueueSubscription:
        sub = _QueueSubscription(self, key)
        self._subs.setdefault(key, set()).add(sub)
        return sub

    def publish(self, key: tuple[str, str], version: int, event: StreamResponse) -> None:
        subs = self._subs.get(key)
        if subs:
            item = (version, event)
            for sub in subs:
                sub.push(item)

    def close(self) -> None:
        for subs in self._subs.values():
            for sub in subs:
                sub.push(None)
        self._subs.clear()

    def subscriber_count(self, key: tuple[str, str]) -> int:
        return len(self._subs.get(key, ()))

    def _drop(self, key: tuple[str, str], sub: _QueueSubscription) -> None:
        subs = self._subs.get(key)
        if subs is not None:
            subs.discard(sub)
            if not subs:
                del self._subs[key]
