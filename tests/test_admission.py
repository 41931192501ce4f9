"""Admission of a message that continues a task (issue 28): what arrives while the message is being admitted
still reaches its run. A CancelTask ends the turn the message begins; a push config created meanwhile gets the
turn's notifications, and one deleted meanwhile gets none. The executor's admission is held on an event, so
each call arrives at that moment, with real stores and a real webhook receiver."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from pathlib import Path
from typing import Any, TypeVar

import pytest

from skillwire import CallContext, Executor, Message, RequestContext, TaskEvents, TaskState
from skillwire.errors import InvalidParamsError
from skillwire.protocol.models import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetTaskRequest,
    Part,
    Role,
    SendMessageRequest,
    Task,
    TaskPushNotificationConfig,
)
from skillwire.server.notifications.push import PushService
from skillwire.server.tasks.executor import Work
from skillwire.server.tasks.runtime import TaskRuntime
from skillwire.stores import TaskStore
from skillwire.stores.push import PushStore
from skillwire.webhooks import WebhookSigner, generate_key
from test_push import LOCAL, QUICK, Hook, kinds, receiving

CALL = CallContext()
WAIT = 10.0
T = TypeVar("T")


class Gated(Executor):
    """Asks for input on a new task; a message ``hold`` or ``refuse`` that continues one is held in ``admit``
    until the test lets it go (``go``), then answered with an artifact, or refused."""

    def __init__(self) -> None:
        self.admitting = asyncio.Event()
        self.go = asyncio.Event()
        self.answered: list[str] = []

    async def admit(self, context: RequestContext) -> Work | None:
        if context.task is not None and context.text in ("hold", "refuse"):
            self.admitting.set()
            await self.go.wait()
            if context.text == "refuse":
                raise InvalidParamsError("refused after a wait")
        return None

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        if context.task is None:
            await events.input_required("More?")
            return
        await events.working()
        await events.artifact("answer", name="answer")
        self.answered.append(context.text)


def message(text: str, task: Task | None = None) -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=f"m-{text}-{task is not None}",
            role=Role.USER,
            parts=[Part(text=text)],
            task_id=task.id if task is not None else "",
            context_id=task.context_id if task is not None else "",
        )
    )


async def arrive(call: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
    """Start ``call`` and let it run to its first wait (one turn of the loop, no timed sleep)."""
    started = asyncio.ensure_future(call)
    await asyncio.sleep(0)
    return started


async def waiting_task(rt: TaskRuntime) -> Task:
    task = (await rt.on_send_message(message("start"), CALL)).task
    assert task is not None and task.status.state is TaskState.INPUT_REQUIRED
    return task


async def held(rt: TaskRuntime, executor: Gated, task: Task, text: str = "hold") -> asyncio.Task[Any]:
    """The message ``text`` continuing ``task``, sent and held in its admission."""
    sending = asyncio.ensure_future(rt.on_send_message(message(text, task), CALL))
    async with asyncio.timeout(WAIT):
        await executor.admitting.wait()
    return sending


@pytest.fixture
async def gated(store: TaskStore) -> AsyncIterator[tuple[TaskRuntime, Gated]]:
    executor = Gated()
    rt = TaskRuntime(executor, store)
    await rt.start()
    yield rt, executor
    executor.go.set()
    await rt.stop(grace=1)


async def test_a_cancel_that_arrives_while_a_continued_task_is_admitted_ends_its_turn(
    gated: tuple[TaskRuntime, Gated],
) -> None:
    rt, executor = gated
    task = await waiting_task(rt)
    sending = await held(rt, executor, task)
    canceling = await arrive(rt.on_cancel_task(CancelTaskRequest(id=task.id), CALL))
    executor.go.set()
    canceled = await asyncio.wait_for(canceling, WAIT)
    assert canceled.status.state is TaskState.CANCELED
    answer = (await asyncio.wait_for(sending, WAIT)).task
    assert answer is not None and answer.status.state is TaskState.CANCELED
    await rt.stop(grace=1)  # whatever the run still does is over
    stored = await rt.on_get_task(GetTaskRequest(id=task.id), CALL)
    assert stored.status.state is TaskState.CANCELED
    assert stored.artifacts == [] and executor.answered == []  # the turn's work never answered


async def test_a_message_refused_while_a_cancel_waits_leaves_the_cancel_to_the_store(
    gated: tuple[TaskRuntime, Gated],
) -> None:
    rt, executor = gated
    task = await waiting_task(rt)
    sending = await held(rt, executor, task, "refuse")
    canceling = await arrive(rt.on_cancel_task(CancelTaskRequest(id=task.id), CALL))
    executor.go.set()
    assert (await asyncio.wait_for(canceling, WAIT)).status.state is TaskState.CANCELED
    with pytest.raises(InvalidParamsError, match="refused after a wait"):
        await asyncio.wait_for(sending, WAIT)
    stored = await rt.on_get_task(GetTaskRequest(id=task.id), CALL)
    assert stored.status.state is TaskState.CANCELED


# -- push configs set or deleted while the message is admitted --------------------------------------------


class Watched(PushService):
    """The push service, telling the test when a config was stored or deleted."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.changed = asyncio.Event()

    async def put(self, *args: Any, **kwargs: Any) -> tuple[TaskPushNotificationConfig, str]:
        stored = await super().put(*args, **kwargs)
        self.changed.set()
        return stored

    async def delete(self, *args: Any, **kwargs: Any) -> None:
        await super().delete(*args, **kwargs)
        self.changed.set()

    async def changes(self) -> None:
        async with asyncio.timeout(WAIT):
            await self.changed.wait()
        self.changed.clear()


@pytest.fixture
async def pushing(store: TaskStore, tmp_path: Path) -> AsyncIterator[tuple[TaskRuntime, Gated, Watched]]:
    assert isinstance(store, PushStore)
    signer = WebhookSigner(generate_key(tmp_path / "key.pem"), issuer="https://agent.example")
    executor = Gated()
    push = Watched(store, signer, policy=LOCAL, settings=QUICK)
    rt = TaskRuntime(executor, store, push=push)
    await rt.start()
    yield rt, executor, push
    executor.go.set()
    await rt.stop(grace=1)


def config(task: Task, hook: Hook, config_id: str) -> TaskPushNotificationConfig:
    return TaskPushNotificationConfig(task_id=task.id, id=config_id, url=hook.url)


async def completed(hook: Hook) -> list[str]:
    """The states the hook was told of, once it was told the task completed."""
    received = await asyncio.to_thread(
        hook.wait_until, lambda got: bool(got) and kinds(got)[-1] == "TASK_STATE_COMPLETED"
    )
    return kinds(received)


async def test_a_push_config_created_while_a_continued_task_is_admitted_gets_its_turn(
    pushing: tuple[TaskRuntime, Gated, Watched],
) -> None:
    rt, executor, push = pushing
    with receiving() as hook:
        task = await waiting_task(rt)
        sending = await held(rt, executor, task)
        creating = await arrive(rt.on_create_task_push_notification_config(config(task, hook, "late"), CALL))
        await push.changes()  # the config is stored while the message is still being admitted
        executor.go.set()
        assert (await asyncio.wait_for(creating, WAIT)).id == "late"
        answer = (await asyncio.wait_for(sending, WAIT)).task
        assert answer is not None and answer.status.state is TaskState.COMPLETED
        states = await completed(hook)
        assert states[0] == "TASK_STATE_WORKING" and "TASK_STATE_INPUT_REQUIRED" not in states, states


async def test_a_push_config_deleted_while_a_continued_task_is_admitted_gets_nothing_of_its_turn(
    pushing: tuple[TaskRuntime, Gated, Watched],
) -> None:
    rt, executor, push = pushing
    with receiving() as gone, receiving() as kept:
        task = await waiting_task(rt)
        for hook, config_id in ((gone, "gone"), (kept, "kept")):
            await rt.on_create_task_push_notification_config(config(task, hook, config_id), CALL)
            push.changed.clear()
        sending = await held(rt, executor, task)
        request = DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="gone")
        deleting = await arrive(rt.on_delete_task_push_notification_config(request, CALL))
        await push.changes()  # deleted while the message is still being admitted
        executor.go.set()
        await asyncio.wait_for(deleting, WAIT)
        answer = (await asyncio.wait_for(sending, WAIT)).task
        assert answer is not None and answer.status.state is TaskState.COMPLETED
        assert (await completed(kept))[0] == "TASK_STATE_WORKING"  # the turn's events went out
        assert gone.received == []  # but none to the deleted config
