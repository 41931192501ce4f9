"""Task retention in the background: finished tasks past ``Limits.task_retention`` are pruned, a batch at a
time, and the store's statistics are read for the metrics.

Every ``interval`` seconds (a quarter of the retention, between a quarter of a second and a minute) the
pruner removes the finished tasks whose last status change is older than the retention, in batches of
:data:`BATCH` (each one transaction of the store: :mod:`skillwire.stores.retention`). Between two batches it
waits as long as the batch took, so that pruning a large backlog takes at most half of the store's time and
requests keep theirs. On a store several processes share (PostgreSQL), a batch is taken under an advisory
lock: one process prunes at a time, and the others, finding it taken, leave the round to it.

With metrics on, the store's size and its tasks by state are read every :data:`STATS_INTERVAL` seconds
(``skillwire_store_size_bytes``, ``skillwire_store_tasks``), and pruned tasks are counted
(``skillwire_tasks_pruned_total``): see :mod:`skillwire.server.observability.metrics`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time

from skillwire.protocol.limits import describe_duration
from skillwire.server.observability.metrics import Metrics
from skillwire.stores.retention import Pruned, RetentionStore

__all__ = ["BATCH", "STATS_INTERVAL", "Pruner", "prune_interval"]

log = logging.getLogger("skillwire.retention")

#: Tasks one prune batch removes at most (one transaction of the store).
BATCH = 200
#: Seconds between two readings of the store's statistics, with metrics on.
STATS_INTERVAL = 15.0


def prune_interval(retention: float | None) -> float:
    """Seconds between two prune rounds: a quarter of the retention, from a quarter second to a minute."""
    if retention is None:
        return STATS_INTERVAL
    return min(max(retention / 4, 0.25), 60.0)


class Pruner:
    """``Pruner(store, retention=86400.0)``: ``start()`` runs it in the background, ``stop()`` ends it;
    ``prune_due()`` runs one round now. ``rounds`` counts the rounds done and ``round_done`` is set after
    each (a test clears it, then waits on it)."""

    def __init__(
        self,
        store: RetentionStore,
        *,
        retention: float | None,
        metrics: Metrics | None = None,
        batch: int = BATCH,
        interval: float | None = None,
    ) -> None:
        self.store = store
        self.retention = retention
        self.metrics = metrics
        self.batch = batch
        self.interval = prune_interval(retention) if interval is None else interval
        #: What every round so far removed.
        self.total = Pruned()
        self.rounds = 0
        self.round_done = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._stats_at = -STATS_INTERVAL

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name="skillwire-retention")

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

    async def _run(self) -> None:
        while True:
            if self.retention is not None:
                await self.prune_due()
            if self.metrics is not None:
                await self._read_stats()
            self.rounds += 1
            self.round_done.set()
            await asyncio.sleep(self.interval)

    async def prune_due(self) -> Pruned:
        """Prune every finished task older than the retention, a batch at a time; what was removed."""
        if self.retention is None:
            return Pruned()
        before_us = time.time_ns() // 1000 - int(self.retention * 1_000_000)
        loop = asyncio.get_running_loop()
        done = Pruned()
        while True:
            started = loop.time()
            try:
                pruned = await self.store.prune_finished(before_us, self.batch)
            except Exception as exc:  # the store is failing: the next round tries again
                log.warning("could not prune finished tasks (%s); trying again in %g s", exc, self.interval)
                break
            done += pruned
            if self.metrics is not None and pruned.tasks:
                self.metrics.tasks_pruned(pruned.tasks)
            if pruned.tasks < self.batch:
                break
            # the store's time is shared: as long again for everything else before the next batch
            await asyncio.sleep(loop.time() - started)
        self.total += done
        if done.tasks:
            log.info(
                "pruned %d finished task(s) older than %s", done.tasks, describe_duration(self.retention)
            )
        return done

    async def _read_stats(self) -> None:
        assert self.metrics is not None
        now = time.monotonic()
        if now - self._stats_at < STATS_INTERVAL:
            return
        self._stats_at = now
        try:
            self.metrics.store_stats(await self.store.stats())
        except Exception as exc:
            log.warning("could not read the task store's statistics (%s)", exc)
