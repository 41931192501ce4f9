"""The TaskStore contract, as a reusable pytest suite.

Subclass :class:`TaskStoreContract` in your tests and provide an async ``store`` fixture that yields an
*opened* store (and a ``reopen`` fixture if the store outlives its process). Every store skillwire ships runs
this same suite; a new store (PostgreSQL, ...) joins by adding one subclass.

    class TestMyStore(TaskStoreContract):
        @pytest.fixture
        async def store(self):
            s = MyStore(...)
            await s.open()
            yield s
            await s.close()
"""

from __future__ import annotations

import asyncio
import random
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from skillwire.errors import InvalidParamsError
from skillwire.protocol.models import Artifact, Message, Part, Role, Task, TaskStatus
from skillwire.protocol.states import TaskState
from skillwire.stores.base import TaskQuery, TaskStore

__all__ = ["TaskStoreContract", "make_task"]

_BASE = datetime(2026, 1, 1, tzinfo=UTC)


def make_task(
    *,
    task_id: str | None = None,
    context_id: str = "ctx",
    state: TaskState = TaskState.WORKING,
    at: datetime | None = None,
    text: str = "hello",
) -> Task:
    tid = task_id or str(uuid.uuid4())
    return Task(
        id=tid,
        context_id=context_id,
        status=TaskStatus(state=state, timestamp=at or datetime.now(UTC)),
        artifacts=[Artifact(artifact_id="a1", parts=[Part(text=text)])],
        history=[
            Message(
                message_id="m1", context_id=context_id, task_id=tid, role=Role.USER, parts=[Part(text=text)]
            )
        ],
    )


class TaskStoreContract:
    """Behaviour every TaskStore must have. ``store`` is an opened store, empty at the start of a test."""

    async def test_get_unknown_is_none(self, store: TaskStore) -> None:
        assert await store.get("nope") is None

    async def test_save_then_get_round_trips(self, store: TaskStore) -> None:
        task = make_task()
        assert await store.save(task, version=1) is True
        stored = await store.get(task.id)
        assert stored is not None
        assert stored.task == task
        assert stored.version == 1

    async def test_snapshot_is_isolated_from_later_changes(self, store: TaskStore) -> None:
        task = make_task()
        await store.save(task, version=1)
        task.history.append(task.history[0])
        stored = await store.get(task.id)
        assert stored is not None and len(stored.task.history) == 1

    async def test_newer_version_replaces(self, store: TaskStore) -> None:
        task = make_task()
        await store.save(task, version=1)
        done = make_task(task_id=task.id, state=TaskState.COMPLETED, text="done")
        assert await store.save(done, version=2) is True
        stored = await store.get(task.id)
        assert stored is not None and stored.task.status.state is TaskState.COMPLETED and stored.version == 2

    async def test_stale_version_never_overwrites(self, store: TaskStore) -> None:
        task = make_task(state=TaskState.COMPLETED, text="final")
        await store.save(task, version=5)
        stale = make_task(task_id=task.id, state=TaskState.WORKING, text="stale")
        assert await store.save(stale, version=4) is False
        assert await store.save(stale, version=5) is False
        stored = await store.get(task.id)
        assert stored is not None and stored.task.artifacts[0].parts[0].text == "final"

    async def test_concurrent_writers_lose_no_update(self, store: TaskStore) -> None:
        """Many writers, writes in random order: each task ends at its newest version, none is missing."""
        ids = [str(uuid.uuid4()) for _ in range(20)]
        writes = [(tid, v) for tid in ids for v in range(1, 11)]
        random.Random(7).shuffle(writes)
        await asyncio.gather(
            *(store.save(make_task(task_id=tid, text=f"v{v}"), version=v) for tid, v in writes)
        )
        for tid in ids:
            stored = await store.get(tid)
            assert stored is not None
            assert stored.version == 10
            assert stored.task.artifacts[0].parts[0].text == "v10"

    async def test_tenants_are_separate(self, store: TaskStore) -> None:
        task = make_task()
        await store.save(task, version=1, tenant="a")
        assert await store.get(task.id, tenant="b") is None
        assert await store.get(task.id) is None
        assert await store.get(task.id, tenant="a") is not None
        page = await store.list_tasks(TaskQuery(tenant="b"))
        assert page.tasks == [] and page.total_size == 0

    async def test_list_newest_first_with_cursor_paging(self, store: TaskStore) -> None:
        tasks = [make_task(at=_BASE + timedelta(seconds=i)) for i in range(7)]
        for t in tasks:
            await store.save(t, version=1)
        seen: list[str] = []
        token = ""
        pages = 0
        while True:
            page = await store.list_tasks(TaskQuery(page_size=3, page_token=token))
            pages += 1
            assert page.total_size == 7
            seen += [t.id for t in page.tasks]
            token = page.next_page_token
            if not token:
                break
        assert pages == 3
        assert seen == [t.id for t in reversed(tasks)]

    async def test_list_last_page_has_empty_token(self, store: TaskStore) -> None:
        for i in range(3):
            await store.save(make_task(at=_BASE + timedelta(seconds=i)), version=1)
        page = await store.list_tasks(TaskQuery(page_size=3))
        assert len(page.tasks) == 3 and page.next_page_token == ""

    async def test_list_filters(self, store: TaskStore) -> None:
        a = make_task(context_id="c1", state=TaskState.WORKING, at=_BASE)
        b = make_task(context_id="c1", state=TaskState.COMPLETED, at=_BASE + timedelta(minutes=1))
        c = make_task(context_id="c2", state=TaskState.COMPLETED, at=_BASE + timedelta(minutes=2))
        for t in (a, b, c):
            await store.save(t, version=1)
        by_context = await store.list_tasks(TaskQuery(context_id="c1"))
        assert {t.id for t in by_context.tasks} == {a.id, b.id} and by_context.total_size == 2
        by_state = await store.list_tasks(TaskQuery(state=TaskState.COMPLETED))
        assert [t.id for t in by_state.tasks] == [c.id, b.id]
        both = await store.list_tasks(TaskQuery(context_id="c1", state=TaskState.COMPLETED))
        assert [t.id for t in both.tasks] == [b.id]
        recent = await store.list_tasks(TaskQuery(updated_after=_BASE + timedelta(minutes=1)))
        assert [t.id for t in recent.tasks] == [c.id, b.id]

    async def test_bad_page_token_is_invalid_params(self, store: TaskStore) -> None:
        with pytest.raises(InvalidParamsError):
            await store.list_tasks(TaskQuery(page_token="%%%not-a-token"))

    async def test_list_unfinished_finds_submitted_and_working_tasks(self, store: TaskStore) -> None:
        working = make_task(state=TaskState.WORKING)
        submitted = make_task(state=TaskState.SUBMITTED)
        other_tenant = make_task(state=TaskState.WORKING)
        for t in (working, submitted):
            await store.save(t, version=3)
        await store.save(other_tenant, version=2, tenant="t2")
        for state in (
            TaskState.INPUT_REQUIRED,
            TaskState.AUTH_REQUIRED,
            TaskState.COMPLETED,
            TaskState.FAILED,
        ):
            await store.save(make_task(state=state), version=1)
        found = {(tenant, stored.task.id): stored for tenant, stored in await store.list_unfinished()}
        assert set(found) == {("", working.id), ("", submitted.id), ("t2", other_tenant.id)}
        assert found[("", working.id)].task == working and found[("", working.id)].version == 3
