"""New-task writes made in one turn of the event loop, handed to a store together.

Why: under concurrency most commits are new tasks (a SendMessage that finishes at once stores its task in one
write), and on a networked store each commit alone is a round trip, a transaction and a WAL flush. The
PostgreSQL store queues such a write here; one loop turn later (``call_soon``: every request that became
ready in the same turn has queued its own) the queue goes out as one statement, and each caller is answered
with its own write's outcome once that statement has committed: nothing is acknowledged before it is stored.

A batch of one, or one naming a task twice, is written one write at a time, as is a batch the store could not
write together (``insert`` returns None: a deadlock with another process, say). A batch holds MAX_BATCH_BYTES
of task data at most: the write that reaches it sends the batch at once, so that one statement never carries
hundreds of large tasks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from skillwire.errors import ConcurrentUpdateError, StoreError
from skillwire.stores.base import TaskWrite, log_size, task_size

__all__ = ["MAX_BATCH_BYTES", "NewTaskBatch"]

#: The task data (heads, messages, artifact pieces, log rows) one batch carries at most.
MAX_BATCH_BYTES = 1024 * 1024

#: Stores the writes together: the indexes of those whose task was inserted (a write not among them found
#: its task there already), or None when they must be written one at a time.
Insert = Callable[[list[TaskWrite]], Awaitable["set[int] | None"]]
#: Stores one write, raising what its commit raises.
Commit = Callable[[TaskWrite], Awaitable[None]]


class NewTaskBatch:
    """The new-task writes queued in this loop turn, and the batches on their way to the store."""

    def __init__(self, insert: Insert, alone: Commit) -> None:
        self._insert = insert
        self._alone = alone
        self._queued: list[tuple[TaskWrite, asyncio.Future[None]]] = []
        self._bytes = 0
        self._writing: set[asyncio.Task[None]] = set()

    def add(self, write: TaskWrite) -> asyncio.Future[None]:
        """Queue ``write``; the future is done once it is committed (or refused)."""
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        self._queued.append((write, done))
        self._bytes += task_size(write) + log_size(write)
        if self._bytes >= MAX_BATCH_BYTES:
            self.flush()
        elif len(self._queued) == 1:
            loop.call_soon(self.flush)
        return done

    def flush(self) -> None:
        """Send what is queued, now."""
        batch, self._queued, self._bytes = self._queued, [], 0
        if batch:
            task = asyncio.get_running_loop().create_task(self._write(batch))
            self._writing.add(task)
            task.add_done_callback(self._writing.discard)

    async def drain(self) -> None:
        """Send what is queued and wait until every batch is answered (before the store closes)."""
        while True:
            self.flush()
            if not self._writing:
                return
            await asyncio.gather(*self._writing, return_exceptions=True)

    async def _write(self, batch: list[tuple[TaskWrite, asyncio.Future[None]]]) -> None:
        try:
            writes = [w for w, _ in batch]
            if len(batch) > 1 and len({(w.tenant, w.task_id) for w in writes}) == len(batch):
                try:
                    inserted = await self._insert(writes)
                except StoreError as exc:
                    for _, done in batch:
                        _settle(done, exc)
                    return
                if inserted is not None:
                    for i, (w, done) in enumerate(batch):
                        _settle(done, None if i in inserted else _exists(w))
                    return
            if len(batch) == 1:
                await self._one(*batch[0])  # (gather would make it a task of its own)
            else:
                await asyncio.gather(*(self._one(w, done) for w, done in batch))
        except Exception as exc:  # a fault of the batch: each caller gets it, as from a commit alone
            for _, done in batch:
                _settle(done, exc)
        except BaseException:  # cancelled: no caller waits for ever
            for _, done in batch:
                _settle(done, StoreError("the store closed before the write was confirmed"))
            raise

    async def _one(self, write: TaskWrite, done: asyncio.Future[None]) -> None:
        try:
            await self._alone(write)
        except Exception as exc:
            _settle(done, exc)
        else:
            _settle(done, None)


def _exists(write: TaskWrite) -> ConcurrentUpdateError:
    return ConcurrentUpdateError(f"task {write.task_id} already exists")


def _settle(done: asyncio.Future[None], outcome: BaseException | None) -> None:
    """Answer one caller (unless it stopped waiting)."""
    if done.done():
        return
    if outcome is None:
        done.set_result(None)
    else:
        done.set_exception(outcome)
