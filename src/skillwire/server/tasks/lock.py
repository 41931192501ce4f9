"""The run's lock: asyncio.Lock's guarantees, with an ``async with`` that costs one call in and one out.

Why our own: a SendMessage takes a run's locks three times (its first event, its end and its commit), nearly
always with nobody else waiting. ``async with asyncio.Lock()`` is five Python calls each time
(``__aenter__``, ``acquire``, ``__aexit__``, ``release``, ``_wake_up_first``) and three coroutine objects;
here the uncontended path is ``__aenter__`` and ``__aexit__`` alone (1.7% of a SendMessage's instructions
on the memory store, docs/performance.md). The contended path is asyncio.Lock's, rule for rule: waiters are
served first come, first served; a newcomer does not overtake a waiter, unless every waiter is cancelled
already; only the first waiter is woken, and one woken then cancelled before it took its turn passes it on.
tests/test_run_lock.py runs random schedules against both and requires the same steps. Only ``async with``
and :meth:`locked` are offered.
"""

from __future__ import annotations

import asyncio
from collections import deque
from types import TracebackType

__all__ = ["RunLock"]


class RunLock:
    """A first-come, first-served asyncio lock for ``async with`` (see the module)."""

    __slots__ = ("_held", "_waiters")

    def __init__(self) -> None:
        self._held = False
        self._waiters: deque[asyncio.Future[None]] | None = None

    def locked(self) -> bool:
        return self._held

    async def __aenter__(self) -> None:
        if not self._held and (not self._waiters or all(t.cancelled() for t in self._waiters)):
            self._held = True  # free, and nobody in line but waiters already cancelled (as asyncio.Lock)
            return
        await self._wait()

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._held = False
        self._wake_first()

    async def _wait(self) -> None:
        waiters = self._waiters
        if waiters is None:
            waiters = self._waiters = deque()
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        waiters.append(turn)
        try:
            try:
                await turn
            finally:
                waiters.remove(turn)
        except asyncio.CancelledError:
            if not self._held:  # perhaps woken, then cancelled before it took its turn: pass it on
                self._wake_first()
            raise
        self._held = True

    def _wake_first(self) -> None:
        """Wake the first waiter. One already woken (or cancelled) wakes no one else: it will run, and either
        take the lock or, cancelled, come back here once it has left the queue."""
        waiters = self._waiters
        if waiters:
            turn = waiters[0]
            if not turn.done():
                turn.set_result(None)
