"""The TaskStore contract, as a reusable pytest suite.

Subclass :class:`TaskStoreContract` in your tests and provide an async ``store`` fixture that yields an
*opened* store, empty at the start of each test. Every store skillwire ships runs this same suite; a new
store (PostgreSQL, ...) joins by adding one subclass.

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
import uuid
from datetime import UTC, datetime, timedelta

import msgspec
import pytest

from skillwire.errors import ConcurrentUpdateError, InvalidParamsError
from skillwire.protocol.models import Artifact, Message, Part, Role, Task, TaskStatus
from skillwire.protocol.states import TaskState
from skillwire.stores.base import StoredTask, TaskQuery, TaskStore, write_task

__all__ = ["TaskStoreContract", "make_task", "save"]

_BASE = datetime(2026, 1, 1, tzinfo=UTC)
_replace = msgspec.structs.replace


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
        history=[message(tid, context_id, text, "m1")],
    )


def message(task_id: str, context_id: str, text: str, message_id: str | None = None) -> Message:
    return Message(
        message_id=message_id or str(uuid.uuid4()),
        context_id=context_id,
        task_id=task_id,
        role=Role.USER,
        parts=[Part(text=text)],
    )


async def save(store: TaskStore, task: Task, *, version: int = 1, base: int = 0, tenant: str = "") -> None:
    """Write ``task`` whole (a new task unless ``base`` names the stored version it replaces)."""
    await store.commit(write_task(task, version=version, base=base, tenant=tenant))


async def grow(
    store: TaskStore, stored: StoredTask, task: Task, *, replaced: tuple[int, ...] = ()
) -> StoredTask:
    """Write only what ``task`` adds to ``stored``; return what the store then holds."""
    version = stored.version + 1
    write = write_task(task, version=version, base=stored.version, stored=stored.layout, replaced=replaced)
    await store.commit(write)
    return StoredTask(task, version, write.layout)


class TaskStoreContract:
    """Behaviour every TaskStore must have. ``store`` is an opened store, empty at the start of a test."""

    # -- writing and reading ---------------------------------------------------------------------------

    async def test_get_unknown_is_none(self, store: TaskStore) -> None:
        assert await store.get("nope") is None

    async def test_write_then_get_round_trips(self, store: TaskStore) -> None:
        task = make_task()
        await save(store, task)
        stored = await store.get(task.id)
        assert stored is not None
        assert stored.task == task
        assert stored.version == 1
        assert stored.layout is not None and stored.layout.messages == 1 and stored.layout.parts == (1,)

    async def test_stored_task_is_isolated_from_later_changes(self, store: TaskStore) -> None:
        task = make_task()
        await save(store, task)
        task.history.append(task.history[0])
        task.artifacts[0].parts.append(Part(text="later"))
        stored = await store.get(task.id)
        assert (
            stored is not None and len(stored.task.history) == 1 and len(stored.task.artifacts[0].parts) == 1
        )

    async def test_incremental_writes_add_messages_and_chunks(self, store: TaskStore) -> None:
        """Each write carries what changed; reading back gives the whole task, in order."""
        task = make_task()
        await save(store, task)
        stored = await store.get(task.id)
        assert stored is not None
        for turn in range(1, 6):
            task = _replace(
                task,
                status=TaskStatus(state=TaskState.INPUT_REQUIRED, timestamp=datetime.now(UTC)),
                history=[*task.history, message(task.id, "ctx", f"turn {turn}")],
            )
            task.artifacts[0].parts.append(Part(text=f"chunk {turn}"))
            stored = await grow(store, stored, task)
        back = await store.get(task.id)
        assert back is not None and back.version == 6
        assert [m.parts[0].text for m in back.task.history] == ["hello"] + [f"turn {t}" for t in range(1, 6)]
        assert [p.text for p in back.task.artifacts[0].parts] == ["hello"] + [
            f"chunk {t}" for t in range(1, 6)
        ]
        assert back.task.status.state is TaskState.INPUT_REQUIRED
        assert back.layout == stored.layout

    async def test_replaced_artifact_is_rewritten_and_new_one_added(self, store: TaskStore) -> None:
        task = make_task()
        task.artifacts[0].parts.append(Part(text="second"))
        await save(store, task)
        stored = await store.get(task.id)
        assert stored is not None
        task.artifacts[0] = Artifact(artifact_id="a1", name="again", parts=[Part(text="replaced")])
        task.artifacts.append(Artifact(artifact_id="a2", parts=[Part(data={"n": 1})]))
        await grow(store, stored, task, replaced=(0,))
        back = await store.get(task.id)
        assert back is not None
        assert [(a.artifact_id, a.name, [p.text if p.data is msgspec.UNSET else p.data for p in a.parts])
                for a in back.task.artifacts] == [("a1", "again", ["replaced"]), ("a2", "", [{"n": 1}])]  # fmt: skip

    async def test_whole_write_over_a_stored_task_replaces_everything(self, store: TaskStore) -> None:
        task = make_task()
        task.history.append(message(task.id, "ctx", "two"))
        task.artifacts.append(Artifact(artifact_id="a2", parts=[Part(text="x")]))
        await save(store, task)
        short = make_task(task_id=task.id, state=TaskState.COMPLETED, text="short")
        await save(store, short, version=2, base=1)
        back = await store.get(task.id)
        assert back is not None and back.task == short and back.version == 2

    async def test_get_with_history_length_reads_the_last_messages(self, store: TaskStore) -> None:
        task = make_task()
        task.history.extend(message(task.id, "ctx", f"m{i}") for i in range(5))
        await save(store, task)
        for n, want in ((0, []), (2, ["m3", "m4"]), (10, ["hello", "m0", "m1", "m2", "m3", "m4"])):
            stored = await store.get(task.id, history_length=n)
            assert stored is not None and [m.parts[0].text for m in stored.task.history] == want
            assert stored.task.artifacts == task.artifacts

    # -- versions -----------------------------------------------------------------------------------------

    async def test_new_task_that_exists_is_a_conflict(self, store: TaskStore) -> None:
        task = make_task(text="first")
        await save(store, task)
        with pytest.raises(ConcurrentUpdateError):
            await save(store, make_task(task_id=task.id, text="second"))
        stored = await store.get(task.id)
        assert stored is not None and stored.task.artifacts[0].parts[0].text == "first"

    async def test_write_from_a_stale_version_is_a_conflict_and_changes_nothing(
        self, store: TaskStore
    ) -> None:
        task = make_task(text="v1")
        await save(store, task)
        await save(store, make_task(task_id=task.id, text="v2"), version=2, base=1)
        with pytest.raises(ConcurrentUpdateError):
            await save(store, make_task(task_id=task.id, text="stale"), version=3, base=1)
        with pytest.raises(ConcurrentUpdateError):
            await save(store, make_task(task_id="missing", text="stale"), version=2, base=1)
        stored = await store.get(task.id)
        assert stored is not None and stored.version == 2 and stored.task.artifacts[0].parts[0].text == "v2"
        assert await store.get("missing") is None

    async def test_concurrent_writers_of_one_version_have_one_winner(self, store: TaskStore) -> None:
        """Writers racing from the same version: exactly one commits, the others are told, none is lost."""
        task = make_task()
        await save(store, task)
        results = await asyncio.gather(
            *(save(store, make_task(task_id=task.id, text=f"w{i}"), version=2, base=1) for i in range(10)),
            return_exceptions=True,
        )
        winners = [i for i, r in enumerate(results) if r is None]
        assert len(winners) == 1
        assert all(isinstance(r, ConcurrentUpdateError) for r in results if r is not None)
        stored = await store.get(task.id)
        assert stored is not None and stored.task.artifacts[0].parts[0].text == f"w{winners[0]}"

    async def test_many_tasks_written_concurrently_are_all_kept(self, store: TaskStore) -> None:
        tasks = [make_task(text=f"t{i}") for i in range(50)]
        await asyncio.gather(*(save(store, t) for t in tasks))
        for t in tasks:
            stored = await store.get(t.id)
            assert stored is not None and stored.task == t

    async def test_tenants_are_separate(self, store: TaskStore) -> None:
        task = make_task()
        await save(store, task, tenant="a")
        assert await store.get(task.id, tenant="b") is None
        assert await store.get(task.id) is None
        assert await store.get(task.id, tenant="a") is not None
        page = await store.list_tasks(TaskQuery(tenant="b"))
        assert page.tasks == [] and page.total_size == 0

    # -- listing ------------------------------------------------------------------------------------------

    async def test_list_newest_first_with_cursor_paging(self, store: TaskStore) -> None:
        tasks = [make_task(at=_BASE + timedelta(seconds=i)) for i in range(7)]
        for t in tasks:
            await save(store, t)
        seen: list[str] = []
        token = ""
        pages = 0
        while True:
            page = await store.list_tasks(TaskQuery(page_size=3, page_token=token, include_artifacts=True))
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
            await save(store, make_task(at=_BASE + timedelta(seconds=i)))
        page = await store.list_tasks(TaskQuery(page_size=3))
        assert len(page.tasks) == 3 and page.next_page_token == ""

    async def test_list_filters(self, store: TaskStore) -> None:
        a = make_task(context_id="c1", state=TaskState.WORKING, at=_BASE)
        b = make_task(context_id="c1", state=TaskState.COMPLETED, at=_BASE + timedelta(minutes=1))
        c = make_task(context_id="c2", state=TaskState.COMPLETED, at=_BASE + timedelta(minutes=2))
        for t in (a, b, c):
            await save(store, t)
        by_context = await store.list_tasks(TaskQuery(context_id="c1"))
        assert {t.id for t in by_context.tasks} == {a.id, b.id} and by_context.total_size == 2
        by_state = await store.list_tasks(TaskQuery(state=TaskState.COMPLETED))
        assert [t.id for t in by_state.tasks] == [c.id, b.id] and by_state.total_size == 2
        both = await store.list_tasks(TaskQuery(context_id="c1", state=TaskState.COMPLETED))
        assert [t.id for t in both.tasks] == [b.id]
        recent = await store.list_tasks(TaskQuery(updated_after=_BASE + timedelta(minutes=1)))
        assert [t.id for t in recent.tasks] == [c.id, b.id]

    async def test_list_views_history_and_artifacts(self, store: TaskStore) -> None:
        task = make_task()
        task.history.extend(message(task.id, "ctx", f"m{i}") for i in range(4))
        await save(store, task)
        plain = (await store.list_tasks(TaskQuery(history_length=2))).tasks[0]
        assert [m.parts[0].text for m in plain.history] == ["m2", "m3"] and plain.artifacts == []
        full = (await store.list_tasks(TaskQuery(include_artifacts=True))).tasks[0]
        assert full == task

    async def test_list_page_ends_early_at_its_byte_budget(self, store: TaskStore) -> None:
        """A page stops before it passes max_bytes (but holds at least one task) and says where to go on."""
        big = "x" * 10_000
        tasks = [make_task(at=_BASE + timedelta(seconds=i), text=big) for i in range(10)]
        for t in tasks:
            await save(store, t)
        seen: list[str] = []
        token = ""
        while True:
            page = await store.list_tasks(
                TaskQuery(page_size=100, page_token=token, include_artifacts=True, max_bytes=25_000)
            )
            assert 1 <= len(page.tasks) <= 2 and page.total_size == 10
            seen += [t.id for t in page.tasks]
            token = page.next_page_token
            if not token:
                break
        assert seen == [t.id for t in reversed(tasks)]
        alone = await store.list_tasks(TaskQuery(include_artifacts=True, max_bytes=10))
        assert len(alone.tasks) == 1 and alone.next_page_token

    async def test_bad_page_token_is_invalid_params(self, store: TaskStore) -> None:
        with pytest.raises(InvalidParamsError):
            await store.list_tasks(TaskQuery(page_token="%%%not-a-token"))

    # -- recovery -----------------------------------------------------------------------------------------

    async def test_unfinished_pages_through_submitted_and_working_tasks(self, store: TaskStore) -> None:
        working = [make_task(state=TaskState.WORKING) for _ in range(5)]
        submitted = make_task(state=TaskState.SUBMITTED)
        other_tenant = make_task(state=TaskState.WORKING)
        for t in (*working, submitted):
            await save(store, t, version=3, base=0)
        await save(store, other_tenant, version=2, tenant="t2")
        for state in (
            TaskState.INPUT_REQUIRED,
            TaskState.AUTH_REQUIRED,
            TaskState.COMPLETED,
            TaskState.FAILED,
        ):
            await save(store, make_task(state=state))
        found: dict[tuple[str, str], StoredTask] = {}
        cursor = ""
        batches = 0
        while True:
            batch, cursor = await store.unfinished(cursor, limit=2)
            batches += 1
            assert len(batch) <= 2
            found.update({(tenant, s.task.id): s for tenant, s in batch})
            if not cursor:
                break
        assert batches >= 4
        assert set(found) == {("", t.id) for t in (*working, submitted)} | {("t2", other_tenant.id)}
        first = found[("", working[0].id)]
        assert first.task == working[0] and first.version == 3 and first.layout is not None
