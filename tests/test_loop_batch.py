"""The new-task batch (skillwire.stores.loop_batch) on its own: what each caller is told when the store
cannot write a batch together, fails it, or stops while it is on its way. The PostgreSQL store's tests
(test_stores_postgres.py) run it against a real database."""

from __future__ import annotations

import asyncio

import pytest

from skillwire.errors import ConcurrentUpdateError, StoreError
from skillwire.stores.base import TaskWrite, write_task
from skillwire.stores.loop_batch import MAX_BATCH_BYTES, NewTaskBatch
from skillwire.testing.store_contract import make_task


class Recorded:
    """Stores writes in a dict, alone or together, recording each batch it was handed."""

    def __init__(self, together: str = "insert") -> None:
        self.together = together  # "insert", "refuse" (None: one at a time), "fail" or "hang"
        self.batches: list[list[str]] = []
        self.alone: list[str] = []
        self.stored: set[str] = set()
        self.entered = asyncio.Event()

    async def insert(self, writes: list[TaskWrite]) -> set[int] | None:
        self.batches.append([w.task_id for w in writes])
        self.entered.set()
        if self.together == "refuse":
            return None
        if self.together == "fail":
            raise ValueError("a bug in the batch")
        if self.together == "hang":
            await asyncio.Event().wait()
        inserted = {i for i, w in enumerate(writes) if w.task_id not in self.stored}
        self.stored.update(w.task_id for w in writes)
        return inserted

    async def one(self, write: TaskWrite) -> None:
        self.alone.append(write.task_id)
        if write.task_id in self.stored:
            raise ConcurrentUpdateError(f"task {write.task_id} already exists")
        self.stored.add(write.task_id)


def writes(n: int, text: str = "x") -> list[TaskWrite]:
    return [write_task(make_task(text=text), version=1) for _ in range(n)]


async def test_the_writes_of_one_turn_are_one_batch_and_each_gets_its_outcome() -> None:
    store = Recorded()
    batch = NewTaskBatch(store.insert, store.one)
    first, rest = writes(1), writes(3)
    store.stored.add(first[0].task_id)
    results = await asyncio.gather(*(batch.add(w) for w in [*first, *rest]), return_exceptions=True)
    assert isinstance(results[0], ConcurrentUpdateError) and results[1:] == [None] * 3
    assert store.batches == [[w.task_id for w in [*first, *rest]]] and store.alone == []


async def test_a_batch_the_store_cannot_write_together_goes_one_write_at_a_time() -> None:
    store = Recorded("refuse")
    batch = NewTaskBatch(store.insert, store.one)
    made = writes(3)
    store.stored.add(made[1].task_id)
    results = await asyncio.gather(*(batch.add(w) for w in made), return_exceptions=True)
    assert results[0] is None and results[2] is None and isinstance(results[1], ConcurrentUpdateError)
    assert len(store.batches) == 1 and sorted(store.alone) == sorted(w.task_id for w in made)


async def test_a_fault_of_the_batch_reaches_every_caller() -> None:
    store = Recorded("fail")
    batch = NewTaskBatch(store.insert, store.one)
    results = await asyncio.gather(*(batch.add(w) for w in writes(3)), return_exceptions=True)
    assert all(isinstance(r, ValueError) and "a bug in the batch" in str(r) for r in results)


async def test_a_batch_cancelled_on_its_way_answers_every_caller() -> None:
    store = Recorded("hang")
    batch = NewTaskBatch(store.insert, store.one)
    waiting = [batch.add(w) for w in writes(3)]
    await store.entered.wait()
    for task in list(batch._writing):  # the batch's own task, as a loop shutting down cancels it
        task.cancel()
    for done in waiting:
        with pytest.raises(StoreError, match="before the write was confirmed"):
            await done


async def test_a_batch_is_sent_at_once_when_it_reaches_its_byte_budget() -> None:
    store = Recorded()
    batch = NewTaskBatch(store.insert, store.one)
    big = writes(
        6, text="x" * (MAX_BATCH_BYTES // 6)
    )  # a third of the budget each: twice, history and artifact
    assert await asyncio.gather(*(batch.add(w) for w in big)) == [None] * 6
    assert [len(b) for b in store.batches] == [3, 3]


async def test_drain_sends_what_is_queued_and_waits_for_it() -> None:
    store = Recorded()
    batch = NewTaskBatch(store.insert, store.one)
    queued = [batch.add(w) for w in writes(2)]
    await batch.drain()
    assert all(done.done() and done.result() is None for done in queued)
    assert len(store.stored) == 2
