"""The run's lock (skillwire.server.tasks.lock.RunLock) keeps asyncio.Lock's guarantees: one holder at a time,
first come first served, no overtaking a woken waiter, and a cancelled waiter never strands the others. Each
scenario runs against asyncio.Lock too, and the two must agree step for step."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable
from typing import Any

import pytest

from skillwire.server.tasks.lock import RunLock

Locks = Callable[[], Any]
BOTH = pytest.mark.parametrize("make", [RunLock, asyncio.Lock], ids=["RunLock", "asyncio.Lock"])


async def _turns() -> None:
    """Let every task that is ready run (a few loop turns; nothing here sleeps on time)."""
    for _ in range(5):
        await asyncio.sleep(0)


@BOTH
async def test_one_holder_at_a_time_and_the_lock_says_so(make: Locks) -> None:
    lock = make()
    inside, most, order = 0, 0, []
    gates = [asyncio.Event() for _ in range(4)]

    async def worker(i: int) -> None:
        nonlocal inside, most
        async with lock:
            inside += 1
            most = max(most, inside)
            order.append(i)
            await gates[i].wait()  # holds the lock across a real suspension
            inside -= 1

    assert not lock.locked()
    tasks = [asyncio.create_task(worker(i)) for i in range(4)]
    await _turns()
    assert lock.locked() and order == [0]
    for i in range(4):
        gates[i].set()
        await _turns()
    await asyncio.gather(*tasks)
    assert most == 1 and order == [0, 1, 2, 3] and not lock.locked()


class _Scene:
    """A lock held by one task until ``release`` is set, and tasks that note their turns by name."""

    def __init__(self, make: Locks) -> None:
        self.lock = make()
        self.order: list[str] = []
        self.release = asyncio.Event()

    async def held(self) -> asyncio.Task[None]:
        """The holder's task, once it holds the lock."""
        holder = asyncio.create_task(self._hold())
        await _turns()
        return holder

    async def _hold(self) -> None:
        async with self.lock:
            await self.release.wait()
            self.order.append("holder")

    def take(self, name: str) -> asyncio.Task[None]:
        async def turn() -> None:
            async with self.lock:
                self.order.append(name)

        return asyncio.create_task(turn())


@BOTH
async def test_a_newcomer_does_not_overtake_a_woken_waiter(make: Locks) -> None:
    scene = _Scene(make)
    holder = await scene.held()
    waiter = scene.take("waiter")
    await _turns()
    scene.release.set()
    await asyncio.sleep(0)  # the holder leaves and wakes the waiter, which has not run yet
    newcomer = scene.take("newcomer")
    await asyncio.gather(holder, waiter, newcomer)
    assert scene.order == ["holder", "waiter", "newcomer"]


@BOTH
async def test_a_waiter_cancelled_while_waiting_leaves_the_others_their_turns(make: Locks) -> None:
    scene = _Scene(make)
    holder = await scene.held()
    a, b, c = (scene.take(n) for n in "abc")
    await _turns()
    b.cancel()
    await _turns()
    scene.release.set()
    await asyncio.gather(holder, a, c)
    with pytest.raises(asyncio.CancelledError):
        await b
    assert scene.order == ["holder", "a", "c"] and not scene.lock.locked()


@BOTH
async def test_a_waiter_cancelled_after_it_was_woken_passes_its_turn_on(make: Locks) -> None:
    scene = _Scene(make)
    holder = await scene.held()
    woken, next_one = scene.take("woken"), scene.take("next")
    await _turns()
    scene.release.set()
    await asyncio.sleep(0)  # the holder has left and woken the first waiter, which has not run yet
    await holder
    woken.cancel()
    await asyncio.wait_for(next_one, timeout=5)  # not stranded behind the cancelled one
    with pytest.raises(asyncio.CancelledError):
        await woken
    assert scene.order == ["holder", "next"] and not scene.lock.locked()


@BOTH
async def test_an_error_inside_releases_the_lock(make: Locks) -> None:
    lock = make()
    with pytest.raises(ZeroDivisionError):
        async with lock:
            1 / 0  # noqa: B018
    assert not lock.locked()
    async with lock:
        assert lock.locked()


async def _schedule(make: Locks, seed: int) -> list[tuple[str, int]]:
    """A random mix of holders, waiters, cancellations and loop turns; what happened, in order."""
    rng = random.Random(seed)
    lock = make()
    log: list[tuple[str, int]] = []
    tasks: list[asyncio.Task[None]] = []

    async def worker(i: int, hold: int) -> None:
        try:
            async with lock:
                log.append(("in", i))
                for _ in range(hold):
                    await asyncio.sleep(0)
                log.append(("out", i))
        except asyncio.CancelledError:
            log.append(("cancelled", i))
            raise

    for i in range(40):
        step = rng.random()
        if step < 0.5:
            tasks.append(asyncio.create_task(worker(i, rng.randrange(4))))
        elif step < 0.65 and tasks:
            rng.choice(tasks).cancel()
        for _ in range(rng.randrange(3)):
            await asyncio.sleep(0)
    await asyncio.gather(*tasks, return_exceptions=True)
    assert not lock.locked()
    return log


@pytest.mark.parametrize("seed", range(300))
async def test_a_random_schedule_goes_as_it_goes_with_asyncio_lock(seed: int) -> None:
    ours = await _schedule(RunLock, seed)
    theirs = await _schedule(asyncio.Lock, seed)
    inside: set[int] = set()
    for what, i in ours:  # never two holders: each "in" is closed (out, or cancelled inside) before the next
        if what == "in":
            assert not inside, (i, inside)
            inside.add(i)
        else:
            inside.discard(i)
    assert sum(what == "in" for what, _ in ours) > 5  # the schedule did contend
    assert ours == theirs
