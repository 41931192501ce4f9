"""The EventBus carries each task's events to every subscriber, in order.

A subscriber registers *before* it reads the task's current snapshot; events are tagged with the task
generation they produced (A2A 1.1: one more per event), so the subscriber drops what the snapshot already
contains and misses nothing (replay from the store, then live). The runtime publishes an event only once the
store has committed it, so the store's event log holds every event a bus carries.

The in-process bus (:mod:`skillwire.server.buses.memory`) serves one server process;
:mod:`skillwire.server.buses.redis` and :mod:`skillwire.server.buses.postgres` serve several that share a
Redis or a PostgreSQL, behind the same protocol (:func:`~skillwire.server.buses.schemes.open_bus` picks one
by URL). This module is the protocol only: it imports no bus.

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

from typing import Protocol

from skillwire.errors import A2AError
from skillwire.protocol.models import StreamResponse

__all__ = ["Behind", "EventBus", "Subscription"]


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

    #: The logged JSON of the event ``next`` or ``next_nowait`` returned last, when the bus carried it.
    data: bytes | None

    def next_nowait(self) -> tuple[int, StreamResponse] | None:
        """The next event if it is queued now and the subscriber is not behind; else None, and ``next``
        says what comes (it waits, answers Behind, or ends)."""
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

    def subscribe(
        self, key: tuple[str, str], *, after: int | None = 0, ends_only: bool = False
    ) -> Subscription:
        """A subscription to ``key``'s events newer than generation ``after`` (``None``: not known yet, the
        caller calls ``skip_through`` once it has read the task's snapshot). ``ends_only``: only the events
        that end the task (a terminal status update), for a caller watching for the end, which the others
        would cost an append and a wake-up each (a stream of 1,000 chunks, 1,000 of them)."""
        ...

    def publish(
        self, key: tuple[str, str], generation: int, event: StreamResponse, data: bytes | None = None
    ) -> bool | None:
        """Send ``event``, which made the task's generation ``generation`` (0: a reply, no task), to the
        task's subscribers; never waits. ``data``: the event's JSON as the store's log holds it, when the
        publisher has it: a bus that sends JSON sends it, and a stream's encoder reuses it, instead of
        encoding the event again.

        True when this process is not keeping up with the task's events: a subscriber's queue holds a
        backlog, or events wait to be sent on. The publisher then hands the event loop on sooner, so that
        the readers and writers sharing its loop keep up instead of falling behind (a reader that falls
        behind catches up from the store's log, which costs more per event than the queue); it still never
        waits for them. None or False: keep on."""
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
