"""The runtime's budgets and its handling of what cannot be stored, in process, on both stores.

Deadlines, the running-task cap, history and size limits of a task, content that is not JSON, recovery in
batches, bounded subscribers and ListTasks views.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from skillwire import CallContext, Executor, Limits, Message, RequestContext, TaskEvents, TaskState
from skillwire.errors import (
    InvalidParamsError,
    ServerBusyError,
    UnsupportedOperationError,
)
from skillwire.protocol.models import (
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
)
from skillwire.server.buses.base import Behind
from skillwire.server.buses.memory import InProcessEventBus
from skillwire.server.tasks.runtime import RECOVERY_BATCH, TaskRuntime
from skillwire.stores import MemoryTaskStore, SQLiteTaskStore, TaskStore
from skillwire.stores.sqlite import SCHEMA_VERSION
from skillwire.testing.store_contract import make_task, save
from skillwire.types import Part, Role, SendMessageConfiguration, StreamResponse

CALL = CallContext()
WAIT = 10.0


def send(text: str, task_id: str = "", **config: Any) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=f"m-{text[:20]}", role=Role.USER, parts=[Part(text=text)], task_id=task_id
        ),
        configuration=SendMessageConfiguration(**config) if config else None,
    )


async def collect(stream: AsyncIterator[StreamResponse]) -> list[StreamResponse]:
    async with asyncio.timeout(WAIT):
        return [e async for e in stream]


def status_text(task: Any) -> str:
    return str(task.status.message.parts[0].text) if task.status.message is not None else ""


class Agent(Executor):
    """Behaviour by message text; ``hold`` waits until the test lets it go."""

    def __init__(self) -> None:
        self.go = asyncio.Event()
        self.cancelled = asyncio.Event()
        self.deadline: float | None = None

    def timeout(self, context: RequestContext) -> float | None:
        return self.deadline

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        text = context.text
        if context.task is not None:
            await events.input_required(f"got {len(text)} characters; more?")
        elif text == "hold":
            await events.working()
            try:
                await self.go.wait()
            except asyncio.CancelledError:
                self.cancelled.set()
                raise
        elif text == "ask":
            await events.input_required("more?")
        elif text.startswith("grow "):
            await events.artifact("y" * int(text.split()[1]))
        elif text == "not json":
            await events.working()
            await events.artifact([Part(data={"when": object()})])
        elif text == "not json reply":
            await events.reply(Message(message_id="r", role=Role.AGENT, parts=[Part(data=object())]))
        else:
            await events.artifact("done")


async def runtime(store: TaskStore, **limits: Any) -> tuple[TaskRuntime, Agent]:
    agent = Agent()
    rt = TaskRuntime(agent, store, limits=Limits(**limits))
    await rt.start()
    return rt, agent


# -- deadlines ----------------------------------------------------------------------------------------------


async def test_a_run_past_the_agent_wide_deadline_is_cancelled_and_fails_with_the_reason(
    store: TaskStore,
) -> None:
    rt, agent = await runtime(store, task_timeout=0.05)
    answer = await rt.on_send_message(send("hold"), CALL)
    task = answer.task
    assert task is not None and task.status.state is TaskState.FAILED
    assert "time limit of 0.05 seconds" in status_text(task)
    assert agent.cancelled.is_set()
    stored = await rt.on_get_task(GetTaskRequest(id=task.id), CALL)
    assert stored.status.state is TaskState.FAILED
    await rt.stop(grace=0)


async def test_the_executors_own_deadline_wins_over_the_default(store: TaskStore) -> None:
    rt, agent = await runtime(store, task_timeout=None)
    agent.deadline = 0.05  # as a skill's executionHints.timeoutSeconds would say
    task = (await rt.on_send_message(send("hold"), CALL)).task
    assert task is not None and task.status.state is TaskState.FAILED and "0.05" in status_text(task)
    await rt.stop(grace=0)


# -- the running-task cap -----------------------------------------------------------------------------------


async def test_past_the_running_task_cap_a_new_task_is_told_to_come_back(store: TaskStore) -> None:
    rt, agent = await runtime(store, max_running_tasks=2, retry_after=3)
    held = [await rt.on_send_message(send("hold", return_immediately=True), CALL) for _ in range(2)]
    with pytest.raises(ServerBusyError) as busy:
        await rt.on_send_message(send("hello"), CALL)
    assert (
        busy.value.retry_after == 3
        and busy.value.http_status == 503
        and busy.value.grpc_status == "UNAVAILABLE"
    )
    listed = await rt.on_list_tasks(ListTasksRequest(), CALL)
    assert listed.total_size == 2  # the refused message left nothing behind
    streams = [
        await rt.on_subscribe_to_task(SubscribeToTaskRequest(id=a.task.id), CALL) for a in held if a.task
    ]
    agent.go.set()
    for stream in streams:
        await collect(stream)
    done = (await rt.on_send_message(send("hello"), CALL)).task
    assert done is not None and done.status.state is TaskState.COMPLETED
    await rt.stop(grace=0)


# -- how much one task may hold -----------------------------------------------------------------------------


async def test_a_message_past_the_history_limit_is_refused_and_the_task_is_unchanged(
    store: TaskStore,
) -> None:
    rt, _ = await runtime(store, max_history_messages=5)
    task = (await rt.on_send_message(send("ask"), CALL)).task
    assert task is not None and len(task.history) == 2
    turns = 0
    with pytest.raises(InvalidParamsError, match="messages, the most one task may hold"):
        for _ in range(10):
            await rt.on_send_message(send("again", task_id=task.id), CALL)
            turns += 1
    assert turns == 1  # user + agent per turn: 2, then 4; a fifth and sixth message would pass 5
    stored = await rt.on_get_task(GetTaskRequest(id=task.id), CALL)
    assert len(stored.history) == 4 and stored.status.state is TaskState.INPUT_REQUIRED
    await rt.stop(grace=0)


async def test_a_message_that_would_make_the_task_too_large_is_refused(store: TaskStore) -> None:
    rt, _ = await runtime(store, max_task_bytes=5_000)
    task = (await rt.on_send_message(send("ask"), CALL)).task
    assert task is not None
    with pytest.raises(InvalidParamsError, match="past the 5000 bytes one task may hold"):
        await rt.on_send_message(send("z" * 6_000, task_id=task.id), CALL)
    small = (await rt.on_send_message(send("small", task_id=task.id), CALL)).task
    assert small is not None and small.status.state is TaskState.INPUT_REQUIRED
    await rt.stop(grace=0)


async def test_an_executor_that_grows_its_task_past_the_limit_fails_it_with_the_reason(
    store: TaskStore,
) -> None:
    rt, _ = await runtime(store, max_task_bytes=5_000)
    stream = await rt.on_send_streaming_message(send("grow 8000"), CALL)
    events = await collect(stream)
    last = events[-1].status_update
    assert last is not None and last.status.state is TaskState.FAILED
    assert all(e.artifact_update is None for e in events)  # the oversized artifact was never shown
    task_id = last.task_id
    stored = await rt.on_get_task(GetTaskRequest(id=task_id), CALL)
    assert stored.status.state is TaskState.FAILED and "grew past" in status_text(stored)
    assert stored.artifacts == []
    await rt.stop(grace=0)


# -- content that is not JSON -------------------------------------------------------------------------------


async def test_content_that_is_not_json_fails_the_task_with_a_reason(store: TaskStore) -> None:
    rt, _ = await runtime(store)
    task = (await rt.on_send_message(send("not json"), CALL)).task
    assert task is not None and task.status.state is TaskState.FAILED
    assert "not JSON" in status_text(task)
    stored = await rt.on_get_task(GetTaskRequest(id=task.id), CALL)
    assert stored.status.state is TaskState.FAILED and stored.artifacts == []
    # A stream always ends with a terminal event.
    events = await collect(await rt.on_send_streaming_message(send("not json"), CALL))
    assert events[0].task is not None
    end = events[-1].status_update
    assert end is not None and end.status.state is TaskState.FAILED
    # A direct reply that is not JSON becomes a failed task too, never a broken answer.
    replied = (await rt.on_send_message(send("not json reply"), CALL)).task
    assert replied is not None and replied.status.state is TaskState.FAILED
    await rt.stop(grace=0)


# -- recovery at start-up -------------------------------------------------------------------------------------


async def test_recovery_fails_orphans_in_batches_and_serves_meanwhile() -> None:
    store = MemoryTaskStore()
    orphans = [make_task(state=TaskState.WORKING) for _ in range(RECOVERY_BATCH * 2 + 100)]
    for task in orphans:
        await save(store, task)
    waiting = make_task(state=TaskState.INPUT_REQUIRED)
    await save(store, waiting)
    rt = TaskRuntime(Agent(), store)
    await rt.start()  # returns once the first batch is done; the rest goes on in the background
    first = await rt.on_get_task(GetTaskRequest(id=orphans[0].id), CALL)
    assert first.status.state is TaskState.FAILED
    late = orphans[-1]
    assert (await rt.on_get_task(GetTaskRequest(id=late.id), CALL)).status.state is TaskState.WORKING
    with pytest.raises(UnsupportedOperationError):  # an orphan not yet recovered takes no message
        await rt.on_send_message(send("hello", task_id=late.id), CALL)
    served = (await rt.on_send_message(send("hello"), CALL)).task
    assert served is not None and served.status.state is TaskState.COMPLETED
    failed = await rt.recovered()
    assert sorted(failed) == sorted(t.id for t in orphans)
    assert (await rt.on_get_task(GetTaskRequest(id=late.id), CALL)).status.state is TaskState.FAILED
    assert (
        await rt.on_get_task(GetTaskRequest(id=waiting.id), CALL)
    ).status.state is TaskState.INPUT_REQUIRED
    await rt.stop(grace=0)


# -- stores ---------------------------------------------------------------------------------------------------


async def test_the_memory_store_forgets_the_oldest_finished_tasks_first() -> None:
    store = MemoryTaskStore(max_finished=3)
    done = [make_task(state=TaskState.COMPLETED) for _ in range(5)]
    running = make_task(state=TaskState.WORKING)
    await save(store, running)
    for task in done:
        await save(store, task)
    assert [await store.get(t.id) is None for t in done] == [True, True, False, False, False]
    assert await store.get(running.id) is not None


async def test_a_schema_1_sqlite_file_is_migrated_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    old = make_task(state=TaskState.COMPLETED)
    old.history.append(old.history[0])
    import msgspec

    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE tasks (seq INTEGER PRIMARY KEY, tenant TEXT NOT NULL, id TEXT NOT NULL,
                context_id TEXT NOT NULL, state TEXT NOT NULL, updated_us INTEGER NOT NULL,
                version INTEGER NOT NULL, body BLOB NOT NULL, UNIQUE (tenant, id));
            CREATE INDEX tasks_by_time ON tasks (tenant, updated_us);
            PRAGMA user_version=1;
            """
        )
        conn.execute(
            "INSERT INTO tasks (tenant, id, context_id, state, updated_us, version, body) VALUES (?,?,?,?,?,?,?)",
            ("t", old.id, old.context_id, old.status.state.value, 1, 7, msgspec.json.encode(old)),
        )
    store = SQLiteTaskStore(path)
    await store.open()
    try:
        stored = await store.get(old.id, tenant="t")
        assert stored is not None and stored.task == old and stored.version == 7
        assert stored.layout is not None and stored.layout.messages == 2
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert tables == {
            "tasks",
            "messages",
            "artifacts",
            "events",
            "idempotency",
            "push_configs",
            "deliveries",
        }


# -- subscribers -----------------------------------------------------------------------------------------------


async def test_a_subscriber_that_stops_reading_is_behind_and_the_others_get_everything() -> None:
    bus = InProcessEventBus(max_events=5)
    key = ("", "t")
    reader, sleeper = bus.subscribe(key), bus.subscribe(key)
    got = []
    for version in range(1, 21):
        bus.publish(
            key,
            version,
            StreamResponse(message=Message(message_id=str(version), role=Role.AGENT, parts=[Part(text="x")])),
        )
        item = await reader.next()
        assert item is not None
        got.append(item[0])
    assert got == list(range(1, 21))
    behind = await sleeper.next()  # 1-15 were shed; its reader catches up from the store
    assert isinstance(behind, Behind) and behind.after == 0
    assert bus.subscriber_count(key) == 2


# -- listings ------------------------------------------------------------------------------------------------


async def test_listings_show_a_short_history_unless_asked_and_pages_keep_to_their_byte_budget(
    store: TaskStore,
) -> None:
    rt, _ = await runtime(store, list_history_length=1, max_page_bytes=3_000)
    ids = []
    for i in range(4):
        task = (await rt.on_send_message(send("ask"), CALL)).task
        assert task is not None
        await rt.on_send_message(send(f"answer {i} " + "w" * 1_000, task_id=task.id), CALL)
        ids.append(task.id)
    page = await rt.on_list_tasks(ListTasksRequest(), CALL)
    assert all(len(t.history) == 1 for t in page.tasks)
    longer = await rt.on_list_tasks(ListTasksRequest(history_length=3), CALL)
    assert all(len(t.history) == 3 for t in longer.tasks)
    seen: list[str] = []
    token = ""
    while True:
        page = await rt.on_list_tasks(ListTasksRequest(history_length=4, page_token=token), CALL)
        assert page.total_size == 4 and 1 <= len(page.tasks) < 4
        seen += [t.id for t in page.tasks]
        token = page.next_page_token
        if not token:
            break
    assert sorted(seen) == sorted(ids)
    await rt.stop(grace=0)
