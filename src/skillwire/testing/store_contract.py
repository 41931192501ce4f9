"""The TaskStore contract, as a reusable pytest suite.

Subclass :class:`TaskStoreContract` (and :class:`PushStoreContract`, for a store that keeps push
notifications) in your tests and provide an async ``store`` fixture that yields an
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
from typing import Protocol

import msgspec
import pytest

from skillwire.errors import ConcurrentUpdateError, InvalidParamsError, KeyClaimedError
from skillwire.protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatus,
    TaskStatusUpdateEvent,
    generation_of,
)
from skillwire.protocol.states import TaskState
from skillwire.stores.base import (
    LOG_ROW_BYTES,
    LOG_ROW_EVENTS,
    StoredTask,
    TaskQuery,
    TaskStore,
    TaskWrite,
    write_task,
)
from skillwire.stores.idempotency import Claim, IdempotencyStore
from skillwire.stores.push import Delivery, Lane, Outgoing, PushConfigRecord, PushStore
from skillwire.stores.retention import FINISHED_STATES, Pruned, RetentionStore

__all__ = [
    "IdempotencyStoreContract",
    "PushStoreContract",
    "RetentionStoreContract",
    "TaskStoreContract",
    "make_task",
    "save",
]

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
    store: TaskStore,
    stored: StoredTask,
    task: Task,
    *,
    replaced: tuple[int, ...] = (),
    events: list[StreamResponse] | None = None,
) -> StoredTask:
    """Write only what ``task`` adds to ``stored`` (and ``events`` to its log); return what the store then
    holds."""
    version = stored.version + 1
    write = write_task(
        task,
        version=version,
        base=stored.version,
        stored=stored.layout,
        replaced=replaced,
        events=events or (),
    )
    await store.commit(write)
    return StoredTask(task, version, write.layout)


def log_events(task: Task, first: int, last: int, *, text: str = "") -> list[StreamResponse]:
    """Events of ``task`` with generations ``first`` to ``last``: artifact chunks, a status update every
    third."""
    out = []
    for generation in range(first, last + 1):
        if generation % 3 == 0:
            status = TaskStatus(
                state=TaskState.WORKING, message=message(task.id, task.context_id, f"s{generation}")
            )
            update = TaskStatusUpdateEvent(
                task_id=task.id, context_id=task.context_id, status=status, generation=generation
            )
            out.append(StreamResponse(status_update=update))
        else:
            chunk = Artifact(artifact_id="a1", parts=[Part(text=text or f"c{generation}")])
            artifact = TaskArtifactUpdateEvent(
                task_id=task.id,
                context_id=task.context_id,
                artifact=chunk,
                append=True,
                generation=generation,
            )
            out.append(StreamResponse(artifact_update=artifact))
    return out


async def generations(
    store: TaskStore, task_id: str, *, after: int = 0, limit: int = LOG_ROW_EVENTS
) -> list[int]:
    events = await store.events(task_id, after=after, limit=limit)
    assert events is not None
    return [generation_of(e) for e in events]


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

    async def test_new_tasks_committed_together_each_get_their_own_outcome(self, store: TaskStore) -> None:
        """Tasks that exist among new ones committed at once (a store may write them as one statement): each
        existing one is told so and left as it was, each new one is stored; then a batch of existing ones
        only."""
        there = [make_task(text=f"first {i}") for i in range(2)]
        for task in there:
            await save(store, task)
        fresh = [make_task(text=f"new {i}") for i in range(3)]
        again = [make_task(task_id=t.id, text="second") for t in there]
        mixed = [fresh[0], again[0], fresh[1], again[1], fresh[2]]
        results = await asyncio.gather(*(save(store, t) for t in mixed), return_exceptions=True)
        assert [type(r).__name__ for r in results] == [
            "NoneType",
            "ConcurrentUpdateError",
            "NoneType",
            "ConcurrentUpdateError",
            "NoneType",
        ]
        results = await asyncio.gather(*(save(store, t) for t in again), return_exceptions=True)
        assert all(isinstance(r, ConcurrentUpdateError) for r in results)
        for task in [*there, *fresh]:
            stored = await store.get(task.id)
            assert stored is not None and stored.task == task

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

    # -- the event log ------------------------------------------------------------------------------------

    async def test_event_log_gives_each_writes_events_back_in_order(self, store: TaskStore) -> None:
        task = make_task()
        await store.commit(write_task(task, version=1, events=log_events(task, 1, 3)))
        stored = await store.get(task.id)
        assert stored is not None
        task.history.append(message(task.id, task.context_id, "more"))
        stored = await grow(store, stored, task, events=log_events(task, 4, 5))
        await grow(store, stored, task, events=log_events(task, 6, 6))
        assert await generations(store, task.id) == [1, 2, 3, 4, 5, 6]
        assert await generations(store, task.id, after=3) == [4, 5, 6]
        assert await generations(store, task.id, after=4, limit=1) == [5]
        assert await generations(store, task.id, after=6) == []
        events = await store.events(task.id)
        assert events is not None and events[0] == log_events(task, 1, 1)[0]
        assert await store.events("missing") is None
        assert await store.events(task.id, tenant="other") is None

    async def test_event_log_of_a_long_stream_reads_in_bounded_pages(self, store: TaskStore) -> None:
        """A write of many events (a burst committed at once) is stored in rows of LOG_ROW_EVENTS at most:
        a reader gets it back a page at a time, whole and in order."""
        task = make_task()
        count = 3 * LOG_ROW_EVENTS + 7
        await store.commit(write_task(task, version=1, events=log_events(task, 1, count)))
        seen: list[int] = []
        while len(seen) < count:
            page = await generations(store, task.id, after=seen[-1] if seen else 0, limit=LOG_ROW_EVENTS)
            assert 0 < len(page) <= LOG_ROW_EVENTS
            seen.extend(page)
        assert seen == list(range(1, count + 1))

    async def test_event_log_reads_from_any_generation(self, store: TaskStore) -> None:
        """A reader resumes from any generation: inside a row, at a row's edge, before the first, past the
        last, over rows written by several writes."""
        task = make_task()
        first = 2 * LOG_ROW_EVENTS + 5
        await store.commit(write_task(task, version=1, events=log_events(task, 1, first)))
        stored = await store.get(task.id)
        assert stored is not None
        count = first + LOG_ROW_EVENTS + 9
        task.history.append(message(task.id, task.context_id, "more"))
        await grow(store, stored, task, events=log_events(task, first + 1, count))
        edges = (LOG_ROW_EVENTS, 2 * LOG_ROW_EVENTS, first, first + LOG_ROW_EVENTS)
        afters = {0, 1, 7, count - 1, count, count + 5, *(e + d for e in edges for d in (-1, 0, 1))}
        for after in sorted(afters):
            expected = list(range(after + 1, min(after + 3, count) + 1))
            assert await generations(store, task.id, after=after, limit=3) == expected, after

    async def test_event_log_pages_stop_at_a_byte_budget(self, store: TaskStore) -> None:
        task = make_task()
        big = "x" * (LOG_ROW_BYTES // 4)
        await store.commit(write_task(task, version=1, events=log_events(task, 1, 12, text=big)))
        page = await generations(store, task.id, limit=1000)
        assert 1 <= len(page) <= 8  # about LOG_ROW_BYTES of rows past the first, not all twelve
        rest = await generations(store, task.id, after=page[-1], limit=1000)
        assert rest[0] == page[-1] + 1

    async def test_event_log_of_a_refused_write_is_not_kept(self, store: TaskStore) -> None:
        task = make_task()
        await store.commit(write_task(task, version=1, events=log_events(task, 1, 1)))
        stale = write_task(task, version=3, base=2, events=log_events(task, 2, 2, text="stale"))
        with pytest.raises(ConcurrentUpdateError):
            await store.commit(stale)
        assert await generations(store, task.id) == [1]

    async def test_event_log_goes_on_over_a_whole_task_write(self, store: TaskStore) -> None:
        task = make_task()
        await store.commit(write_task(task, version=1, events=log_events(task, 1, 2)))
        await store.commit(write_task(task, version=2, base=1, events=log_events(task, 3, 3)))
        assert await generations(store, task.id) == [1, 2, 3]

    async def test_event_log_past_its_budget_keeps_its_newest_events(self, store: TaskStore) -> None:
        """A task whose log passes the store's ``max_log_bytes`` (an artifact replaced again and again) keeps
        its newest events, at most the budget; the oldest are gone, so a reader behind them would get the
        task's snapshot instead."""
        budget = getattr(store, "max_log_bytes", None)
        if budget is None:
            pytest.skip("this store keeps no log budget of its own")
        store.max_log_bytes = 64 * 1024  # type: ignore[attr-defined]
        try:
            task = make_task()
            await store.commit(write_task(task, version=1, events=log_events(task, 1, 1, text="x" * 1000)))
            stored = await store.get(task.id)
            assert stored is not None
            for generation in range(2, 301):  # 300 KB of events, one write each
                stored = await grow(
                    store, stored, task, events=log_events(task, generation, generation, text="x" * 1000)
                )
            events = await store.events(task.id, limit=1000)
            assert events is not None
            kept = [generation_of(e) for e in events]
            assert kept[-1] == 300 and kept == list(range(kept[0], 301))
            assert kept[0] > 200  # the oldest are gone
            assert sum(len(msgspec.json.encode(e)) for e in events) <= 64 * 1024  # within the budget
        finally:
            store.max_log_bytes = budget  # type: ignore[attr-defined]

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


# -- push notifications -----------------------------------------------------------------------------------


class PushTaskStore(TaskStore, PushStore, Protocol):
    """A task store that keeps push notifications."""


def push_config(
    task_id: str,
    config_id: str,
    *,
    tenant: str = "",
    url: str = "https://hooks.example/in",
    shape: str = "1.0",
) -> PushConfigRecord:
    body = b'{"taskId":"%s","id":"%s","url":"%s"}' % (task_id.encode(), config_id.encode(), url.encode())
    return PushConfigRecord(tenant, task_id, config_id, body, shape=shape, issuer="https://agent.example")


def with_deliveries(write: TaskWrite, *bodies: bytes | tuple[str, bytes], config: str = "c1") -> TaskWrite:
    """``write`` carrying a delivery per body (to ``config``, or to the config named beside the body)."""
    outgoing = tuple(Outgoing(*b) if isinstance(b, tuple) else Outgoing(config, b) for b in bodies)
    return _replace(write, deliveries=outgoing)


async def _head(store: PushStore, lane: Lane) -> Delivery | None:
    """The first pending delivery of ``lane``."""
    first = await store.next_deliveries(lane, 1)
    return first[0] if first else None


async def drain(store: PushStore, lane: Lane) -> list[Delivery]:
    """Every pending delivery of ``lane``, in the order the lane makes them (each finished once read)."""
    made: list[Delivery] = []
    while (delivery := await _head(store, lane)) is not None:
        assert delivery.lane == lane and not delivery.failed
        assert not made or delivery.seq > made[-1].seq, "a lane's seq must only grow"
        made.append(delivery)
        await store.finish_deliveries([delivery.seq])
        assert len(made) <= 1000, "finish_deliveries did not remove the delivery"
    return made


class PushStoreContract:
    """Behaviour every PushStore must have (see :mod:`skillwire.stores.push`). ``store`` is an opened task
    store that is also a PushStore, empty at the start of a test."""

    # -- configs ----------------------------------------------------------------------------------------

    async def test_store_is_a_push_store(self, store: PushTaskStore) -> None:
        assert isinstance(store, PushStore)

    async def test_config_round_trips(self, store: PushTaskStore) -> None:
        record = push_config("t1", "c1", tenant="a", shape="0.3")
        assert await store.put_push_config(record, 10) is True
        assert await store.get_push_config("a", "t1", "c1") == record
        assert await store.get_push_config("a", "t1", "c2") is None
        assert await store.get_push_config("a", "t2", "c1") is None

    async def test_put_replaces_a_config_of_the_same_id(self, store: PushTaskStore) -> None:
        assert await store.put_push_config(push_config("t1", "c1", url="https://one.example"), 10)
        second = push_config("t1", "c1", url="https://two.example", shape="0.3")
        assert await store.put_push_config(second, 10) is True
        assert await store.get_push_config("", "t1", "c1") == second
        assert await store.list_push_configs("", "t1") == [second]

    async def test_list_in_id_order_with_after_and_limit(self, store: PushTaskStore) -> None:
        for config_id in ("d", "b", "e", "a", "c"):
            assert await store.put_push_config(push_config("t1", config_id), 10)
        await store.put_push_config(push_config("t2", "aa"), 10)

        async def ids(**kw: object) -> list[str]:
            return [r.id for r in await store.list_push_configs("", "t1", **kw)]  # type: ignore[arg-type]

        assert await ids() == ["a", "b", "c", "d", "e"]
        assert await ids(limit=2) == ["a", "b"]
        assert await ids(after="b", limit=2) == ["c", "d"]
        assert await ids(after="bb") == ["c", "d", "e"]
        assert await ids(after="e") == []
        listed = await store.list_push_configs("", "t1", limit=1)
        assert listed == [push_config("t1", "a")]
        assert await store.list_push_configs("", "nope") == []

    async def test_delete_removes_the_config(self, store: PushTaskStore) -> None:
        for config_id in ("a", "b", "c"):
            await store.put_push_config(push_config("t1", config_id), 10)
        await store.delete_push_config("", "t1", "b")
        assert await store.get_push_config("", "t1", "b") is None
        assert [r.id for r in await store.list_push_configs("", "t1")] == ["a", "c"]
        await store.delete_push_config("", "t1", "b")  # gone already: nothing happens
        await store.delete_push_config("", "nope", "x")
        assert [r.id for r in await store.list_push_configs("", "t1")] == ["a", "c"]
        assert await store.put_push_config(push_config("t1", "b"), 3)  # its place is free again

    async def test_put_is_refused_at_max_per_task_but_a_replacement_is_not(
        self, store: PushTaskStore
    ) -> None:
        assert await store.put_push_config(push_config("t1", "a"), 2)
        assert await store.put_push_config(push_config("t1", "b"), 2)
        assert await store.put_push_config(push_config("t1", "c"), 2) is False
        assert await store.get_push_config("", "t1", "c") is None
        assert [r.id for r in await store.list_push_configs("", "t1")] == ["a", "b"]
        replaced = push_config("t1", "a", url="https://new.example")
        assert await store.put_push_config(replaced, 2) is True
        assert await store.get_push_config("", "t1", "a") == replaced
        assert [r.id for r in await store.list_push_configs("", "t1")] == ["a", "b"]
        # the limit is per task, and per tenant
        assert await store.put_push_config(push_config("t2", "c"), 2)
        assert await store.put_push_config(push_config("t1", "c", tenant="other"), 2)
        assert await store.put_push_config(push_config("t9", "x"), 0) is False
        assert await store.list_push_configs("", "t9") == []

    async def test_configs_are_separate_by_tenant_and_task(self, store: PushTaskStore) -> None:
        records = [
            push_config("t1", "c1", tenant="a", url="https://a-t1.example"),
            push_config("t1", "c1", tenant="b", url="https://b-t1.example"),
            push_config("t2", "c1", tenant="a", url="https://a-t2.example"),
        ]
        for record in records:
            assert await store.put_push_config(record, 1)
        for record in records:
            assert await store.get_push_config(record.tenant, record.task_id, "c1") == record
            assert await store.list_push_configs(record.tenant, record.task_id) == [record]
        assert await store.get_push_config("", "t1", "c1") is None
        await store.delete_push_config("a", "t1", "c1")
        assert await store.get_push_config("a", "t1", "c1") is None
        assert await store.get_push_config("b", "t1", "c1") == records[1]
        assert await store.get_push_config("a", "t2", "c1") == records[2]

    # -- deliveries written with their task ---------------------------------------------------------------

    async def test_new_task_write_enqueues_its_deliveries_in_lane_order(self, store: PushTaskStore) -> None:
        task = make_task()
        write = with_deliveries(
            write_task(task, version=1, tenant="a"), b"one", ("c2", b"other"), b"two", b"three"
        )
        await store.commit(write)
        c1, c2 = ("a", task.id, "c1"), ("a", task.id, "c2")
        assert sorted(await store.pending_lanes()) == [(c1, 0), (c2, 0)]
        head = await _head(store, c1)
        assert head is not None
        assert (head.tenant, head.task_id, head.config_id, head.body) == ("a", task.id, "c1", b"one")
        assert (head.attempts, head.next_us, head.failed, head.error) == (0, 0, False, "")
        assert head.created_us == write.updated_us
        assert await _head(store, c1) == head  # reading does not take it
        assert await _head(store, ("", task.id, "c1")) is None
        assert [d.body for d in await drain(store, c1)] == [b"one", b"two", b"three"]
        assert [d.body for d in await drain(store, c2)] == [b"other"]
        assert await store.pending_lanes() == []
        stored = await store.get(task.id, tenant="a")
        assert stored is not None and stored.task == task

    async def test_a_delivery_keeps_the_trace_context_it_was_written_with(self, store: PushTaskStore) -> None:
        traced = (
            '{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01","tracestate":"k=v"}'
        )
        later = '{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01"}'
        task = make_task()
        first = write_task(task, version=1)
        await store.commit(
            _replace(first, deliveries=(Outgoing("c1", b"traced", traced), Outgoing("c1", b"none")))
        )
        stored = await store.get(task.id)
        assert stored is not None and stored.layout is not None
        grown = write_task(
            _replace(task, history=[*task.history, message(task.id, "ctx", "more")]),
            version=2,
            base=1,
            stored=stored.layout,
        )
        await store.commit(_replace(grown, deliveries=(Outgoing("c1", b"later", later),)))
        lane = ("", task.id, "c1")
        made = await store.next_deliveries(lane, 5)
        assert [(d.body, d.trace) for d in made] == [(b"traced", traced), (b"none", ""), (b"later", later)]
        await store.retry_delivery(made[0].seq, 1, 1_700_000_000_000_000, "HTTP 503")
        assert await _head(store, lane) == _replace(
            made[0], attempts=1, next_us=1_700_000_000_000_000, error="HTTP 503"
        )
        await store.fail_delivery(made[0].seq, 2, "HTTP 410")
        [failed] = await store.failed_deliveries()
        assert (failed.body, failed.trace) == (b"traced", traced)  # kept for the operator with its context
        assert [(d.body, d.trace) for d in await drain(store, lane)] == [(b"none", ""), (b"later", later)]

    async def test_incremental_and_whole_writes_enqueue_after_the_earlier_ones(
        self, store: PushTaskStore
    ) -> None:
        task = make_task()
        await store.commit(with_deliveries(write_task(task, version=1), b"created"))
        stored = await store.get(task.id)
        assert stored is not None and stored.layout is not None
        task = _replace(task, history=[*task.history, message(task.id, "ctx", "more")])
        grown = write_task(task, version=2, base=1, stored=stored.layout)
        assert not grown.rewrite
        await store.commit(with_deliveries(grown, b"grown 1", b"grown 2"))
        rewrite = write_task(
            make_task(task_id=task.id, state=TaskState.COMPLETED, text="again"), version=3, base=2
        )
        assert rewrite.rewrite
        await store.commit(with_deliveries(rewrite, b"rewritten"))
        await store.commit(write_task(make_task(task_id=task.id, text="quiet"), version=4, base=3))
        lane = ("", task.id, "c1")
        assert await store.pending_lanes() == [(lane, 0)]
        made = await drain(store, lane)
        assert [d.body for d in made] == [b"created", b"grown 1", b"grown 2", b"rewritten"]
        back = await store.get(task.id)
        assert back is not None and back.version == 4

    async def test_a_conflicting_write_enqueues_none_of_its_deliveries(self, store: PushTaskStore) -> None:
        task = make_task()
        await save(store, task)
        with pytest.raises(ConcurrentUpdateError):  # a new task that exists
            await store.commit(with_deliveries(write_task(make_task(task_id=task.id), version=1), b"x"))
        with pytest.raises(ConcurrentUpdateError):  # a stale version
            await store.commit(with_deliveries(write_task(task, version=3, base=2), b"y"))
        with pytest.raises(ConcurrentUpdateError):  # a task that is not there
            await store.commit(
                with_deliveries(write_task(make_task(task_id="gone"), version=2, base=1), b"z")
            )
        assert await store.pending_lanes() == []
        assert await _head(store, ("", task.id, "c1")) is None
        assert await _head(store, ("", "gone", "c1")) is None

    async def test_the_same_new_task_write_twice_enqueues_once(self, store: PushTaskStore) -> None:
        write = with_deliveries(write_task(make_task(), version=1), b"once")
        await store.commit(write)
        with pytest.raises(ConcurrentUpdateError):
            await store.commit(write)
        assert [d.body for d in await drain(store, ("", write.task_id, "c1"))] == [b"once"]

    async def test_of_racing_writers_only_the_winners_deliveries_are_enqueued(
        self, store: PushTaskStore
    ) -> None:
        task = make_task()
        await save(store, task)
        results = await asyncio.gather(
            *(
                store.commit(
                    with_deliveries(
                        write_task(make_task(task_id=task.id, text=f"w{i}"), version=2, base=1),
                        f"w{i}".encode(),
                    )
                )
                for i in range(10)
            ),
            return_exceptions=True,
        )
        winners = [i for i, r in enumerate(results) if r is None]
        assert len(winners) == 1
        assert all(isinstance(r, ConcurrentUpdateError) for r in results if r is not None)
        made = await drain(store, ("", task.id, "c1"))
        assert [d.body for d in made] == [f"w{winners[0]}".encode()]

    async def test_many_new_tasks_committed_at_once_each_get_their_deliveries(
        self, store: PushTaskStore
    ) -> None:
        existing = make_task()
        await save(store, existing)
        tasks = [make_task(text=f"t{i}") for i in range(60)]
        writes = [
            with_deliveries(write_task(t, version=1), f"{t.id} 1".encode(), f"{t.id} 2".encode())
            if i % 3
            else write_task(t, version=1)
            for i, t in enumerate(tasks)
        ]
        clash = with_deliveries(write_task(make_task(task_id=existing.id), version=1), b"clash")
        results = await asyncio.gather(*(store.commit(w) for w in [*writes, clash]), return_exceptions=True)
        assert results[:-1] == [None] * len(writes)
        assert isinstance(results[-1], ConcurrentUpdateError)
        expected = {("", t.id, "c1") for i, t in enumerate(tasks) if i % 3}
        lanes = await store.pending_lanes()
        assert {lane for lane, _ in lanes} == expected and len(lanes) == len(expected)
        for lane in sorted(expected):
            assert [d.body for d in await drain(store, lane)] == [
                f"{lane[1]} 1".encode(),
                f"{lane[1]} 2".encode(),
            ]
        for t in tasks:
            stored = await store.get(t.id)
            assert stored is not None and stored.task == t

    # -- making deliveries --------------------------------------------------------------------------------

    async def test_finish_deliveries_removes_them(self, store: PushTaskStore) -> None:
        task = make_task()
        await store.commit(with_deliveries(write_task(task, version=1), b"one", b"two"))
        lane = ("", task.id, "c1")
        first = await _head(store, lane)
        assert first is not None and first.body == b"one"
        await store.finish_deliveries([first.seq])
        second = await _head(store, lane)
        assert second is not None and second.body == b"two" and second.seq > first.seq
        await store.finish_deliveries([first.seq])  # finished already: nothing happens
        assert await _head(store, lane) == second
        await store.finish_deliveries([second.seq])
        assert await _head(store, lane) is None
        assert await store.pending_lanes() == []

    async def test_configs_given_with_a_write_are_stored_with_it(self, store: PushTaskStore) -> None:
        task, other = make_task(), make_task()
        config = push_config(task.id, "inline")
        write = msgspec.structs.replace(write_task(task, version=1), configs=(config,))
        await store.commit(with_deliveries(write, b"first", config="inline"))
        assert await store.get_push_config("", task.id, "inline") == config
        assert [d.body for d in await store.next_deliveries(("", task.id, "inline"), 5)] == [b"first"]
        # a write that conflicts stores neither its configs nor its deliveries
        stale = msgspec.structs.replace(write_task(task, version=1), configs=(push_config(task.id, "late"),))
        with pytest.raises(ConcurrentUpdateError):
            await store.commit(with_deliveries(stale, b"never", config="late"))
        assert await store.get_push_config("", task.id, "late") is None
        assert await store.next_deliveries(("", task.id, "late"), 5) == []
        # and among new tasks committed together (one statement in SQLite), each keeps its own
        third = make_task()
        together = [
            msgspec.structs.replace(write_task(t, version=1), configs=(push_config(t.id, "c"),))
            for t in (other, third)
        ]
        await asyncio.gather(*(store.commit(w) for w in together))
        for t in (other, third):
            assert await store.get_push_config("", t.id, "c") == push_config(t.id, "c")

    async def test_deliveries_are_read_and_finished_several_at_a_time(self, store: PushTaskStore) -> None:
        task = make_task()
        await store.commit(with_deliveries(write_task(task, version=1), b"a", b"b", b"c", b"d"))
        lane = ("", task.id, "c1")
        assert await store.pending_count() == 4
        other = make_task()
        await store.commit(with_deliveries(write_task(other, version=1, tenant="acme"), b"e"))
        assert await store.pending_by_partition() == {"": 4, "acme": 1}
        await store.finish_deliveries([d.seq for d in await store.next_deliveries(("acme", other.id, "c1"))])
        assert await store.pending_by_partition() == {"": 4}
        batch = await store.next_deliveries(lane, 3)
        assert [d.body for d in batch] == [b"a", b"b", b"c"]
        assert [d.body for d in await store.next_deliveries(lane, 10)] == [b"a", b"b", b"c", b"d"]
        await store.finish_deliveries([d.seq for d in batch])
        assert [d.body for d in await store.next_deliveries(lane, 10)] == [b"d"]
        assert await store.pending_count() == 1
        [last] = await store.next_deliveries(lane, 10)
        await store.fail_delivery(last.seq, 1, "HTTP 404")
        assert await store.pending_count() == 0
        assert await store.pending_by_partition() == {}
        assert await store.next_deliveries(lane, 10) == []

    async def test_retry_delivery_records_the_attempt_and_holds_the_lane(self, store: PushTaskStore) -> None:
        task = make_task()
        await store.commit(with_deliveries(write_task(task, version=1), b"one", b"two", ("c2", b"free")))
        lane = ("", task.id, "c1")
        first = await _head(store, lane)
        assert first is not None
        await store.retry_delivery(first.seq, 1, 1_700_000_000_000_000, "HTTP 503")
        again = await _head(store, lane)
        assert again == _replace(first, attempts=1, next_us=1_700_000_000_000_000, error="HTTP 503")
        assert sorted(await store.pending_lanes()) == [
            (lane, 1_700_000_000_000_000),
            (("", task.id, "c2"), 0),
        ]
        await store.retry_delivery(first.seq, 2, 1_700_000_000_500_000, "timed out")
        again = await _head(store, lane)
        assert again is not None and (again.seq, again.attempts, again.next_us, again.error) == (
            first.seq,
            2,
            1_700_000_000_500_000,
            "timed out",
        )
        await store.finish_deliveries([first.seq])
        assert sorted(await store.pending_lanes()) == [(lane, 0), (("", task.id, "c2"), 0)]

    async def test_fail_delivery_keeps_it_out_of_its_lane(self, store: PushTaskStore) -> None:
        task = make_task()
        await store.commit(with_deliveries(write_task(task, version=1), b"one", b"two", b"three"))
        lane = ("", task.id, "c1")
        first = await _head(store, lane)
        assert first is not None
        await store.retry_delivery(first.seq, 4, 1_700_000_000_000_000, "HTTP 500")
        await store.fail_delivery(first.seq, 5, "HTTP 410")
        second = await _head(store, lane)
        assert second is not None and second.body == b"two"
        assert await store.pending_lanes() == [(lane, 0)]
        failed = await store.failed_deliveries()
        assert failed == [
            _replace(first, attempts=5, next_us=1_700_000_000_000_000, failed=True, error="HTTP 410")
        ]
        await store.fail_delivery(second.seq, 1, "HTTP 400")
        third = await _head(store, lane)
        assert third is not None and third.body == b"three"
        assert [d.body for d in await store.failed_deliveries()] == [b"one", b"two"]
        await store.finish_deliveries([third.seq])
        assert await store.pending_lanes() == []
        assert [d.body for d in await store.failed_deliveries()] == [b"one", b"two"]

    async def test_failed_deliveries_page_by_seq(self, store: PushTaskStore) -> None:
        tasks = [make_task() for _ in range(3)]
        for t in tasks:
            await store.commit(with_deliveries(write_task(t, version=1), b"a", b"b"))
        for t in tasks:
            while (delivery := await _head(store, ("", t.id, "c1"))) is not None:
                await store.fail_delivery(delivery.seq, 3, f"{t.id} {delivery.body.decode()}")
        everything = await store.failed_deliveries()
        assert len(everything) == 6 and all(d.failed and d.attempts == 3 for d in everything)
        assert [d.seq for d in everything] == sorted(d.seq for d in everything)
        assert [d.error for d in everything] == [f"{t.id} {b}" for t in tasks for b in "ab"]
        assert await store.failed_deliveries(limit=2) == everything[:2]
        assert await store.failed_deliveries(after=everything[1].seq, limit=3) == everything[2:5]
        assert await store.failed_deliveries(after=everything[-1].seq) == []
        assert await store.pending_lanes() == []

    async def test_delete_push_config_drops_its_lanes_pending_deliveries_only(
        self, store: PushTaskStore
    ) -> None:
        task, other = make_task(), make_task()
        for config_id in ("c1", "c2"):
            await store.put_push_config(push_config(task.id, config_id), 10)
        await store.put_push_config(push_config(other.id, "c1"), 10)
        await store.commit(
            with_deliveries(write_task(task, version=1), b"gone 1", b"gone 2", b"gone 3", ("c2", b"kept"))
        )
        await store.commit(with_deliveries(write_task(other, version=1), b"other"))
        lane = ("", task.id, "c1")
        first = await _head(store, lane)
        assert first is not None
        await store.fail_delivery(first.seq, 1, "HTTP 400")
        await store.delete_push_config("", task.id, "c1")
        assert await _head(store, lane) is None
        assert sorted(await store.pending_lanes()) == sorted(
            [(("", task.id, "c2"), 0), (("", other.id, "c1"), 0)]
        )
        assert [d.body for d in await drain(store, ("", task.id, "c2"))] == [b"kept"]
        assert [d.body for d in await drain(store, ("", other.id, "c1"))] == [b"other"]
        assert [d.body for d in await store.failed_deliveries()] == [b"gone 1"]  # kept for the operator
        assert [r.id for r in await store.list_push_configs("", task.id)] == ["c2"]

    async def test_lanes_are_separate_by_tenant(self, store: PushTaskStore) -> None:
        task = make_task()
        await store.commit(with_deliveries(write_task(task, version=1, tenant="a"), b"for a"))
        await store.commit(with_deliveries(write_task(task, version=1, tenant="b"), b"for b"))
        assert sorted(await store.pending_lanes()) == [(("a", task.id, "c1"), 0), (("b", task.id, "c1"), 0)]
        await store.delete_push_config("a", task.id, "c1")
        assert await store.pending_lanes() == [(("b", task.id, "c1"), 0)]
        assert [d.body for d in await drain(store, ("b", task.id, "c1"))] == [b"for b"]


# -- idempotency keys ------------------------------------------------------------------------------------


def claim_of(key: str, *, scope: str = "s", at: int = 1_000, lasts: int = 1_000, **fields: object) -> Claim:
    return Claim(scope, key, b"digest", at, at + lasts, **fields)  # type: ignore[arg-type]


class IdempotencyStoreContract:
    """Behaviour every store that keeps idempotency claims must have (:mod:`skillwire.stores.idempotency`)."""

    async def test_a_claim_is_made_once_and_recalled_until_it_lapses(self, store: IdempotencyStore) -> None:
        first = claim_of("k", task_id="t1", generation=2)
        assert await store.claim(first) is None
        assert await store.recall("s", "k", 1_500) == first
        assert await store.claim(claim_of("k", at=1_200, task_id="t2")) == first  # the first stays
        assert await store.recall("s", "k", 2_000) is None  # lapsed at 2,000
        later = claim_of("k", at=2_000, task_id="t3")
        assert await store.claim(later) is None  # a lapsed claim is replaced
        assert await store.recall("s", "k", 2_500) == later

    async def test_claims_are_per_scope_and_settle_keeps_their_result(self, store: IdempotencyStore) -> None:
        assert await store.claim(claim_of("k", scope="a")) is None
        assert await store.claim(claim_of("k", scope="b")) is None
        await store.settle("a", "k", b'{"id":"c1"}')
        a, b = await store.recall("a", "k", 1_001), await store.recall("b", "k", 1_001)
        assert a is not None and a.result == b'{"id":"c1"}'
        assert b is not None and b.result == b""

    async def test_a_claim_made_with_a_task_is_kept_with_it_or_not_at_all(
        self, store: IdempotencyStore
    ) -> None:
        tasks: TaskStore = store  # type: ignore[assignment]
        task = make_task()
        made = claim_of("k", task_id=task.id, generation=1)
        await tasks.commit(msgspec.structs.replace(write_task(task, version=1), claim=made))
        assert await store.recall("s", "k", 1_001) == made and await tasks.get(task.id) is not None
        other = make_task()
        with pytest.raises(KeyClaimedError):  # the key is claimed: the other task is not stored
            await tasks.commit(
                msgspec.structs.replace(write_task(other, version=1), claim=claim_of("k", task_id=other.id))
            )
        assert await tasks.get(other.id) is None
        stale = msgspec.structs.replace(
            write_task(task, version=3, base=2), claim=claim_of("k2", task_id=task.id)
        )
        with pytest.raises(ConcurrentUpdateError):  # the task write does not apply: its claim is not made
            await tasks.commit(stale)
        assert await store.recall("s", "k2", 1_001) is None
        existing = make_task(task_id=task.id)
        clash = msgspec.structs.replace(
            write_task(existing, version=1), claim=claim_of("k3", task_id=task.id)
        )
        with pytest.raises(ConcurrentUpdateError):  # a new task that exists already: no claim either
            await tasks.commit(clash)
        assert await store.recall("s", "k3", 1_001) is None

    async def test_concurrent_claims_of_one_key_have_one_winner(self, store: IdempotencyStore) -> None:
        tasks: TaskStore = store  # type: ignore[assignment]
        attempts = [make_task(text=f"t{i}") for i in range(8)]
        results = await asyncio.gather(
            *(
                tasks.commit(
                    msgspec.structs.replace(write_task(t, version=1), claim=claim_of("k", task_id=t.id))
                )
                for t in attempts
            ),
            return_exceptions=True,
        )
        winners = [t for t, r in zip(attempts, results, strict=True) if r is None]
        assert len(winners) == 1 and all(isinstance(r, KeyClaimedError) for r in results if r is not None)
        claim = await store.recall("s", "k", 1_001)
        assert claim is not None and claim.task_id == winners[0].id
        stored = [await tasks.get(t.id) for t in attempts]
        assert sum(s is not None for s in stored) == 1


# -- retention ----------------------------------------------------------------------------------------------


class RetentionTaskStore(TaskStore, PushStore, IdempotencyStore, RetentionStore, Protocol):
    """A task store that prunes (and keeps push notifications and idempotency claims)."""


def _us(at: datetime) -> int:
    return int(at.timestamp() * 1_000_000)


class RetentionStoreContract:
    """Behaviour every RetentionStore must have (:mod:`skillwire.stores.retention`): a prune removes finished
    tasks older than its instant, oldest first and a batch at a time, with everything stored for them, and
    never an unfinished task. ``store`` is an opened store that also keeps push notifications and claims."""

    async def test_prune_removes_finished_tasks_before_the_instant_and_nothing_unfinished(
        self, store: RetentionTaskStore
    ) -> None:
        old, new = _BASE, _BASE + timedelta(hours=2)
        finished = [make_task(state=state, at=old) for state in FINISHED_STATES]
        unfinished = [
            make_task(state=state, at=old - timedelta(days=30))
            for state in TaskState
            if not state.is_terminal and state is not TaskState.UNSPECIFIED
        ]
        recent = make_task(state=TaskState.COMPLETED, at=new)
        for task in (*finished, *unfinished, recent):
            await save(store, task, version=2)
        cut = _us(_BASE + timedelta(hours=1))
        assert await store.count_finished(cut) == {s.value: 1 for s in FINISHED_STATES}
        pruned = await store.prune_finished(cut, limit=100)
        assert pruned.tasks == len(FINISHED_STATES) and not pruned.busy
        for task in finished:
            assert await store.get(task.id) is None
            assert await store.events(task.id) is None
        for task in (*unfinished, recent):
            kept = await store.get(task.id)
            assert kept is not None and kept.task == task
        assert await store.prune_finished(cut) == Pruned()
        page = await store.list_tasks(TaskQuery())
        assert page.total_size == len(unfinished) + 1
        assert {t.id for t in page.tasks} == {t.id for t in (*unfinished, recent)}

    async def test_prune_goes_oldest_first_a_batch_at_a_time(self, store: RetentionTaskStore) -> None:
        tasks = [make_task(state=TaskState.COMPLETED, at=_BASE + timedelta(minutes=i)) for i in range(5)]
        for i, task in enumerate(reversed(tasks)):  # stored newest first: order comes from the timestamps
            await save(store, task, tenant="t2" if i % 2 else "")
        cut = _us(_BASE + timedelta(days=1))
        assert (await store.prune_finished(cut, limit=2)).tasks == 2
        left = {t.id for t in tasks if await store.get(t.id) is not None}
        left |= {t.id for t in tasks if await store.get(t.id, tenant="t2") is not None}
        assert left == {t.id for t in tasks[2:]}
        assert (await store.prune_finished(cut, limit=2)).tasks == 2
        assert (await store.prune_finished(cut, limit=2)).tasks == 1
        assert (await store.prune_finished(cut, limit=2)).tasks == 0

    async def test_prune_removes_everything_that_belongs_to_the_task(self, store: RetentionTaskStore) -> None:
        task = make_task(state=TaskState.WORKING, at=_BASE)
        kept = make_task(state=TaskState.WORKING, at=_BASE)
        write = _replace(
            write_task(task, version=1, events=log_events(task, 1, 3)),
            configs=(push_config(task.id, "c1"),),
        )
        await store.commit(with_deliveries(write, b"e1", b"e2"))
        await store.commit(
            _replace(write_task(kept, version=1), configs=(push_config(kept.id, "c1"),)),
        )
        stored = await store.get(task.id)
        assert stored is not None
        grown = _replace(
            task,
            history=[*task.history, message(task.id, "ctx", "more")],
            artifacts=[Artifact(artifact_id="a1", parts=[Part(text="hello"), Part(text=" world")])],
        )
        stored = await grow(store, stored, grown, events=log_events(task, 4, 6))
        done = _replace(grown, status=TaskStatus(state=TaskState.COMPLETED, timestamp=_BASE))
        await grow(store, stored, done)
        lapses = _us(_BASE) + 10**12
        for scope in ("", "\x00caller-1"):
            assert (
                await store.claim(claim_of(f"k{scope}", scope=scope, task_id=task.id, lasts=lapses)) is None
            )
        other_tenant = claim_of("k-other", scope="t2", task_id=task.id, lasts=lapses)
        assert await store.claim(other_tenant) is None
        assert await store.claim(claim_of("k-kept", scope="", task_id=kept.id, lasts=lapses)) is None
        pruned = await store.prune_finished(_us(_BASE + timedelta(seconds=1)))
        assert pruned.tasks == 1 and pruned.push_configs == 1 and pruned.deliveries == 2
        assert pruned.claims == 2 and pruned.messages >= 1 and pruned.artifacts >= 1 and pruned.events >= 1, (
            pruned
        )
        assert await store.get(task.id) is None and await store.events(task.id) is None
        assert await store.list_push_configs("", task.id) == []
        assert await store.next_deliveries(("", task.id, "c1"), 10) == []
        assert await store.recall("", "k", 1_001) is None
        assert await store.recall("\x00caller-1", "k\x00caller-1", 1_001) is None
        assert await store.recall("t2", "k-other", 1_001) == other_tenant  # another tenant's task id
        assert await store.recall("", "k-kept", 1_001) is not None
        assert len(await store.list_push_configs("", kept.id)) == 1

    async def test_a_pruned_task_id_can_be_used_again(self, store: RetentionTaskStore) -> None:
        task = make_task(state=TaskState.COMPLETED, at=_BASE)
        await save(store, task, version=3)
        assert (await store.prune_finished(_us(_BASE) + 1)).tasks == 1
        again = make_task(task_id=task.id, state=TaskState.WORKING)
        await save(store, again)
        stored = await store.get(task.id)
        assert stored is not None and stored.task == again and stored.version == 1

    async def test_stats_count_tasks_by_state_and_name_the_oldest_finished(
        self, store: RetentionTaskStore
    ) -> None:
        empty = await store.stats()
        assert empty.tasks == {} and empty.oldest_finished_us is None
        for i, state in enumerate((TaskState.COMPLETED, TaskState.COMPLETED, TaskState.FAILED)):
            await save(store, make_task(state=state, at=_BASE + timedelta(minutes=i)))
        await save(store, make_task(state=TaskState.WORKING, at=_BASE - timedelta(days=1)))
        stats = await store.stats()
        assert stats.tasks == {
            TaskState.COMPLETED.value: 2,
            TaskState.FAILED.value: 1,
            TaskState.WORKING.value: 1,
        }
        assert stats.oldest_finished_us == _us(_BASE) and stats.size_bytes > 0
