"""The task runtime: the default request handler.

It creates tasks for incoming messages, runs the executor for each, applies the executor's events to the
task, persists the task in the store and publishes each event on the bus. One ``_Run`` exists per executor
invocation (a new task, or a message that resumes an interrupted one) and owns the task while it runs.

Persistence rules: the task's creation and every terminal or interrupted state are committed before anyone
is told about them (the blocking answer, a stream event); other changes are written behind, coalesced, and
never block the executor. Snapshots carry a version that grows with every change, so the store keeps the
newest one whatever order writes land in.

Snapshots: the live task of a run is private to it. Appending a chunk to an artifact extends that
artifact's parts in place (so a long stream costs linear, not quadratic, time); everything that leaves the
run (a stream event, an answer, a store write) is a ``snapshot()``, which copies the lists that change.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import msgspec

from skillwire.errors import (
    ExtendedAgentCardNotConfiguredError,
    InvalidAgentResponseError,
    InvalidParamsError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from skillwire.protocol.models import (
    AgentCard,
    Artifact,
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatus,
    TaskStatusUpdateEvent,
    agent_text,
)
from skillwire.protocol.states import TaskState, can_transition
from skillwire.server.bus import EventBus, InProcessEventBus, Subscription
from skillwire.server.context import CallContext
from skillwire.server.executor import Executor, RequestContext, TaskEvents, Work
from skillwire.server.handler import BaseRequestHandler
from skillwire.stores.base import TaskQuery, TaskStore

__all__ = ["TaskRuntime"]

log = logging.getLogger("skillwire.runtime")

FAILED_MESSAGE = "The agent failed while working on this task."
RESTART_MESSAGE = "The server stopped while this task was running; it cannot be resumed."
SHUTDOWN_MESSAGE = "The server shut down before this task finished."
CANCELED_MESSAGE = "The task was canceled."
DEFAULT_PAGE_SIZE = 50

_replace = msgspec.structs.replace


def _now() -> datetime:
    return datetime.now(UTC)


def view(task: Task, history_length: int | None = None, include_artifacts: bool = True) -> Task:
    """``task`` as a caller asked to see it: the last ``history_length`` messages, artifacts or not."""
    history = task.history
    if history_length is not None and len(history) > history_length:
        history = history[len(history) - history_length :] if history_length else []
    artifacts = task.artifacts if include_artifacts else []
    if history is task.history and artifacts is task.artifacts:
        return task
    return _replace(task, history=history, artifacts=artifacts)


def snapshot(task: Task) -> Task:
    """A copy of a live task that later changes to it cannot reach."""
    return _replace(
        task,
        artifacts=[_replace(a, parts=list(a.parts)) for a in task.artifacts],
        history=list(task.history),
    )


def _settles(state: TaskState) -> bool:
    return state.is_terminal or state.is_interrupted


def _is_terminal(state: TaskState) -> bool:
    return state.is_terminal


class _Run:
    """One executor invocation on one task."""

    def __init__(
        self,
        runtime: TaskRuntime,
        *,
        tenant: str,
        task_id: str,
        context_id: str,
        message: Message,
        task: Task | None,
        version: int,
        previous: Task | None,
        request: SendMessageRequest,
        call: CallContext,
    ) -> None:
        self.runtime = runtime
        self.tenant = tenant
        self.task_id = task_id
        self.context_id = context_id
        self.key = (tenant, task_id)
        self.message = message
        self.task = task
        self.version = version
        self.previous = previous
        self.request = request
        self.call = call
        self.lock = asyncio.Lock()
        loop = asyncio.get_running_loop()
        #: Resolved with the Task (terminal or interrupted) or the Message reply.
        self.settled: asyncio.Future[Task | Message] = loop.create_future()
        self.runner: asyncio.Task[None] | None = None
        #: Blocking SendMessage calls waiting for this run to settle.
        self.waiters = 0
        #: Whether the task id is revealed before the task settles (streaming or returnImmediately).
        self.observed = False
        self.replied = False
        self._dirty = False
        self._submitted = 0
        self._flusher: asyncio.Task[None] | None = None

    # -- persistence ---------------------------------------------------------------------------------

    async def _commit(self) -> None:
        assert self.task is not None
        self._submitted = self.version
        await self.runtime.store.save(snapshot(self.task), version=self.version, tenant=self.tenant)

    def _write_behind(self) -> None:
        """Write the task soon, without waiting; changes made meanwhile merge into one write."""
        if not self._dirty:
            self._dirty = True
            asyncio.get_running_loop().call_soon(self._start_flush)

    def _start_flush(self) -> None:
        # Runs after the executor's next pause: a commit it made meanwhile may have covered everything.
        if self.version > self._submitted and (self._flusher is None or self._flusher.done()):
            self._flusher = asyncio.create_task(self._flush())
        elif self._flusher is None or self._flusher.done():
            self._dirty = False

    async def _flush(self) -> None:
        while self.version > self._submitted:
            self._dirty = False
            try:
                await self._commit()
            except Exception:  # the next commit retries with a newer snapshot
                log.exception("writing task %s failed", self.task_id)
                break
        self._dirty = False

    def _publish(self, event: StreamResponse) -> None:
        self.runtime.bus.publish(self.key, self.version, event)

    # -- applying events (the caller holds the lock) -------------------------------------------------

    async def _materialize(self) -> None:
        task = Task(
            id=self.task_id,
            context_id=self.context_id,
            status=TaskStatus(state=TaskState.SUBMITTED, timestamp=_now()),
            history=[self.message],
        )
        self.task = task
        self.version = 1
        if self.observed:
            # Someone learns the task id now (a stream, an immediate answer): commit it first.
            await self._commit()
        else:
            # A blocking caller learns the id only when the task settles, which commits; until then the
            # creation is written behind and usually merges with that commit.
            self._write_behind()
        self._publish(StreamResponse(task=snapshot(task)))

    async def _apply_status(self, state: TaskState, message: Message | None) -> Task:
        if self.task is None:
            await self._materialize()
        task = self.task
        assert task is not None
        current = task.status.state
        if not can_transition(current, state):
            raise InvalidAgentResponseError(
                f"task {self.task_id} cannot move from {current.value} to {state.value}"
            )
        status = TaskStatus(state=state, message=message, timestamp=_now())
        history = [*task.history, message] if message is not None else task.history
        self.task = task = _replace(task, status=status, history=history)
        self.version += 1
        event = StreamResponse(
            status_update=TaskStatusUpdateEvent(
                task_id=self.task_id, context_id=self.context_id, status=status
            )
        )
        if _settles(state):
            await self._commit()
            self._publish(event)
            if not self.settled.done():
                self.settled.set_result(snapshot(task))
        else:
            self._write_behind()
            self._publish(event)
        return task

    # -- the emitter's entry points ------------------------------------------------------------------

    async def reply(self, message: Message) -> None:
        async with self.lock:
            if self.task is not None or self.replied:
                raise InvalidAgentResponseError("a direct reply must be the only answer to a message")
            self.replied = True
            self.runtime.bus.publish(self.key, 0, StreamResponse(message=message))
            if not self.settled.done():
                self.settled.set_result(message)

    async def set_status(self, state: TaskState, message: Message | None) -> None:
        if self.replied:
            raise InvalidAgentResponseError("the agent already replied with a message")
        async with self.lock:
            await self._apply_status(state, message)

    async def add_artifact(self, artifact: Artifact, *, append: bool, last_chunk: bool) -> None:
        if self.replied:
            raise InvalidAgentResponseError("the agent already replied with a message")
        async with self.lock:
            if self.task is None:
                await self._materialize()
            task = self.task
            assert task is not None
            if task.status.state.is_terminal:
                raise InvalidAgentResponseError(f"task {self.task_id} is already {task.status.state.value}")
            own = _replace(artifact, parts=list(artifact.parts))  # the event keeps the caller's object
            for i, existing in enumerate(task.artifacts):
                if existing.artifact_id == artifact.artifact_id:
                    if append:
                        existing.parts.extend(artifact.parts)
                    else:
                        task.artifacts[i] = own
                    break
            else:
                task.artifacts.append(own)
            self.version += 1
            self._write_behind()
            self._publish(
                StreamResponse(
                    artifact_update=TaskArtifactUpdateEvent(
                        task_id=self.task_id,
                        context_id=self.context_id,
                        artifact=artifact,
                        append=append,
                        last_chunk=last_chunk,
                    )
                )
            )

    # -- lifecycle -----------------------------------------------------------------------------------

    def request_context(self) -> RequestContext:
        return RequestContext(
            message=self.message,
            task_id=self.task_id,
            context_id=self.context_id,
            call=self.call,
            task=self.previous,
            configuration=self.request.configuration,
            metadata=self.request.metadata,
        )

    async def start(self, work: Work, *, eager: bool) -> None:
        """Publish the task if it already exists (or ``eager``), then run ``work`` in the background."""
        self.observed = self.observed or eager
        async with self.lock:
            if self.task is not None and self.version > self._submitted:
                # a resumed task: its new history is committed, and announced, first
                await self._commit()
                self._publish(StreamResponse(task=snapshot(self.task)))
            elif self.task is None and eager:
                await self._materialize()
        self.runner = asyncio.create_task(self._drive(work), name=f"skillwire-task-{self.task_id}")

    async def _drive(self, work: Work) -> None:
        try:
            await work(TaskEvents(self))
        except asyncio.CancelledError:
            pass  # canceled by CancelTask or shutdown, which set the final state themselves
        except InvalidAgentResponseError as exc:
            log.warning("agent error on task %s: %s", self.task_id, exc.message)
            await self._end(TaskState.FAILED, FAILED_MESSAGE)
        except Exception:
            log.exception("executor failed on task %s", self.task_id)
            await self._end(TaskState.FAILED, FAILED_MESSAGE)
        else:
            await self._end(TaskState.COMPLETED, None)
        finally:
            self.runtime._forget(self)

    async def release(self) -> None:
        """Answer a blocking caller now with the task as it is; the work goes on."""
        async with self.lock:
            if self.task is None:
                await self._materialize()
            assert self.task is not None
            if self._submitted < self.version:
                await self._commit()
            if not self.settled.done():
                self.settled.set_result(snapshot(self.task))

    async def set_metadata(self, key: str, value: Any) -> None:
        """Set ``task.metadata[key]`` and commit it (it is not a stream event)."""
        async with self.lock:
            if self.task is None:
                await self._materialize()
            assert self.task is not None
            if self.task.status.state.is_terminal:
                raise InvalidAgentResponseError(
                    f"task {self.task_id} is already {self.task.status.state.value}"
                )
            self.task = _replace(self.task, metadata={**(self.task.metadata or {}), key: value})
            self.version += 1
            await self._commit()

    @property
    def watchers(self) -> int:
        """Blocking callers still waiting plus open streams following this task."""
        return self.waiters + self.runtime.bus.subscriber_count(self.key)

    async def _end(self, state: TaskState, text: str | None) -> None:
        """Close the run: a task still SUBMITTED or WORKING moves to ``state``."""
        if self.replied:
            return
        async with self.lock:
            if self.task is not None and _settles(self.task.status.state):
                if not self.settled.done():
                    self.settled.set_result(snapshot(self.task))
                return
            message = None
            if text is not None:
                message = agent_text(text, context_id=self.context_id, task_id=self.task_id)
            try:
                await self._apply_status(state, message)
            except Exception:
                log.exception("could not close task %s", self.task_id)
                if not self.settled.done() and self.task is not None:
                    self.settled.set_result(snapshot(self.task))

    async def stop(self, state: TaskState, text: str) -> Task:
        """End the task in terminal ``state`` with ``text`` as its status message and stop the executor."""
        async with self.lock:
            if self.task is None:
                await self._materialize()
            assert self.task is not None
            if self.task.status.state.is_terminal:
                raise TaskNotCancelableError(
                    f"Task {self.task_id} is already {self.task.status.state.value}",
                    metadata={"taskId": self.task_id},
                )
            note = agent_text(text, context_id=self.context_id, task_id=self.task_id)
            task = await self._apply_status(state, note)
        if self.runner is not None and not self.runner.done():
            self.runner.cancel()
        return snapshot(task)


class EventStream:
    """The events of one stream: an optional snapshot, then live events until the task ends.

    A SendStreamingMessage stream ends at a terminal or interrupted state (the client's turn has come); a
    SubscribeToTask stream follows the task through interruptions and ends at a terminal state. The Task is
    only ever the first event: when a subscribed task is resumed by a new message, the snapshot announcing
    it is not repeated (the status updates that follow tell the subscriber what happens). Closing it
    (``aclose``) releases its bus subscription even if it was never iterated.
    """

    def __init__(
        self, sub: Subscription, first: tuple[Task, int] | None = None, *, end_on_interrupt: bool = True
    ) -> None:
        self._sub = sub
        self._first = first
        self._ends = _settles if end_on_interrupt else _is_terminal
        self._seen = first[1] if first is not None else 0
        self._started = False
        self._done = False

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> StreamResponse:
        if self._first is not None:
            task, self._first = self._first[0], None
            self._started = True
            return StreamResponse(task=task)
        while not self._done:
            item = await self._sub.next()
            if item is None:
                break
            version, event = item
            if (version and version <= self._seen) or (event.task is not None and self._started):
                continue
            self._started = True
            update = event.status_update
            if event.message is not None or (update is not None and self._ends(update.status.state)):
                await self.aclose()
            return event
        await self.aclose()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        if not self._done:
            self._done = True
            self._sub.close()


class TaskRuntime(BaseRequestHandler):
    """The default request handler: tasks, executor runs, store and bus."""

    def __init__(
        self,
        executor: Executor,
        store: TaskStore,
        bus: EventBus | None = None,
        *,
        extended_card: AgentCard | None = None,
    ) -> None:
        self.executor = executor
        self.store = store
        self.bus: EventBus = bus or InProcessEventBus()
        self.extended_card = extended_card
        self._runs: dict[tuple[str, str], _Run] = {}
        self._closing = False

    # -- lifecycle -----------------------------------------------------------------------------------

    async def start(self) -> list[str]:
        """Recover tasks a previous process left SUBMITTED or WORKING; returns the ids marked failed.

        An executor with a ``resume(task)`` method may take a task back (work delegated elsewhere that can be
        followed again): ``resume`` returns the work to run for it, or None. Every other such task is failed
        with a reason, since the work it stood for died with the process.
        """
        resume: Callable[[Task], Work | None] | None = getattr(self.executor, "resume", None)
        failed = []
        for tenant, stored in await self.store.list_unfinished():
            work = resume(stored.task) if resume is not None else None
            if work is not None:
                await self._resume(tenant, stored.task, stored.version, work)
                continue
            task = stored.task
            note = agent_text(RESTART_MESSAGE, context_id=task.context_id, task_id=task.id)
            status = TaskStatus(state=TaskState.FAILED, message=note, timestamp=_now())
            if await self.store.save(
                _replace(task, status=status, history=[*task.history, note]),
                version=stored.version + 1,
                tenant=tenant,
            ):
                failed.append(task.id)
        if failed:
            log.warning("marked %d task(s) left running by a previous process as failed", len(failed))
        return failed

    async def _resume(self, tenant: str, task: Task, version: int, work: Work) -> None:
        first = next((m for m in task.history if m.role is Role.USER), None) or agent_text(
            "(resumed)", context_id=task.context_id, task_id=task.id
        )
        run = _Run(
            self,
            tenant=tenant,
            task_id=task.id,
            context_id=task.context_id,
            message=first,
            task=task,
            version=version,
            previous=task,
            request=SendMessageRequest(message=first),
            call=CallContext(tenant=tenant),
        )
        run._submitted = version  # nothing new to write: the stored task is the current one
        self._runs[run.key] = run
        await run.start(work, eager=False)
        log.info("resumed task %s", task.id)

    async def stop(self, grace: float = 5.0) -> None:
        """Let running tasks finish for ``grace`` seconds, fail the rest, then end every stream."""
        self._closing = True
        runners = [r.runner for r in self._runs.values() if r.runner is not None and not r.runner.done()]
        if runners and grace > 0:
            await asyncio.wait(runners, timeout=grace)
        for run in list(self._runs.values()):
            if run.runner is None or run.runner.done():
                continue
            if run.task is None or not _settles(run.task.status.state):
                try:
                    await run.stop(TaskState.FAILED, SHUTDOWN_MESSAGE)
                except Exception:
                    log.exception("could not fail task %s at shutdown", run.task_id)
            run.runner.cancel()
        pending = [r.runner for r in self._runs.values() if r.runner is not None]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        self.bus.close()

    def _forget(self, run: _Run) -> None:
        if self._runs.get(run.key) is run:
            del self._runs[run.key]

    @property
    def running(self) -> int:
        return len(self._runs)

    # -- helpers ---------------------------------------------------------------------------------------

    async def _snapshot(self, key: tuple[str, str]) -> tuple[Task, int] | None:
        run = self._runs.get(key)
        if run is not None and run.task is not None:
            return snapshot(run.task), run.version
        stored = await self.store.get(key[1], tenant=key[0])
        return None if stored is None else (stored.task, stored.version)

    async def _begin(self, request: SendMessageRequest, call: CallContext) -> _Run:
        if self._closing:
            raise UnsupportedOperationError("The server is shutting down")
        message = request.message
        if message.role is not Role.USER:
            raise InvalidParamsError(
                f"params.message.role must be ROLE_USER for a message from a client, not {message.role.value}",
                field_violations=[("params.message.role", "must be ROLE_USER")],
            )
        tenant = request.tenant or call.tenant
        if not message.task_id:
            task_id = str(uuid.uuid4())
            context_id = message.context_id or str(uuid.uuid4())
            run = _Run(
                self,
                tenant=tenant,
                task_id=task_id,
                context_id=context_id,
                message=_replace(message, task_id=task_id, context_id=context_id),
                task=None,
                version=0,
                previous=None,
                request=request,
                call=call,
            )
            self._runs[run.key] = run
            return run

        key = (tenant, message.task_id)
        self._refuse_busy(key)
        stored = await self.store.get(message.task_id, tenant=tenant)
        if stored is None:
            raise TaskNotFoundError(f"Task {message.task_id} not found", metadata={"taskId": message.task_id})
        self._refuse_busy(key)
        task = stored.task
        if task.status.state.is_terminal:
            raise UnsupportedOperationError(
                f"Task {task.id} is {task.status.state.value}: a terminal task accepts no more messages."
                " Start a new task in the same context instead.",
                metadata={"taskId": task.id, "state": task.status.state.value},
            )
        if message.context_id and message.context_id != task.context_id:
            raise InvalidParamsError(
                f"message.contextId {message.context_id!r} does not match the context of task {task.id}",
                field_violations=[("params.message.contextId", "does not match the task's contextId")],
            )
        user = _replace(message, context_id=task.context_id)
        run = _Run(
            self,
            tenant=tenant,
            task_id=task.id,
            context_id=task.context_id,
            message=user,
            task=_replace(task, history=[*task.history, user]),
            version=stored.version + 1,
            previous=task,
            request=request,
            call=call,
        )
        self._runs[key] = run
        return run

    def _refuse_busy(self, key: tuple[str, str]) -> None:
        if key in self._runs:
            raise UnsupportedOperationError(
                f"Task {key[1]} is still working on an earlier message; send more input when it asks for it",
                metadata={"taskId": key[1]},
            )

    # -- operations ------------------------------------------------------------------------------------

    async def _admit_and_start(self, run: _Run, *, eager: bool) -> None:
        """The executor's ``admit`` check (if any), before anything is written; then start the run."""
        context = run.request_context()
        try:
            admit = getattr(self.executor, "admit", None)
            if admit is not None:
                await admit(context)
            executor = self.executor
            await run.start(lambda events: executor.execute(context, events), eager=eager)
        except BaseException:
            self._forget(run)
            raise

    async def on_send_message(self, request: SendMessageRequest, call: CallContext) -> SendMessageResponse:
        run = await self._begin(request, call)
        config = request.configuration
        immediate = config is not None and config.return_immediately
        await self._admit_and_start(run, eager=immediate)
        history_length = config.history_length if config is not None else None
        if immediate:
            assert run.task is not None
            result: Task | Message = snapshot(run.task)
        else:
            run.waiters += 1
            try:
                result = await asyncio.shield(run.settled)
            finally:
                run.waiters -= 1
        if isinstance(result, Message):
            return SendMessageResponse(message=result)
        return SendMessageResponse(task=view(result, history_length))

    async def on_send_streaming_message(self, request: SendMessageRequest, call: CallContext) -> EventStream:
        run = await self._begin(request, call)
        sub = self.bus.subscribe(run.key)
        run.observed = True
        try:
            await self._admit_and_start(run, eager=False)
        except BaseException:
            sub.close()
            raise
        return EventStream(sub)

    async def on_get_task(self, request: GetTaskRequest, call: CallContext) -> Task:
        snap = await self._snapshot((request.tenant or call.tenant, request.id))
        if snap is None:
            raise TaskNotFoundError(f"Task {request.id} not found", metadata={"taskId": request.id})
        return view(snap[0], request.history_length)

    async def on_list_tasks(self, request: ListTasksRequest, call: CallContext) -> ListTasksResponse:
        page_size = request.page_size or DEFAULT_PAGE_SIZE
        page = await self.store.list_tasks(
            TaskQuery(
                tenant=request.tenant or call.tenant,
                context_id=request.context_id,
                state=None if request.status is TaskState.UNSPECIFIED else request.status,
                updated_after=request.status_timestamp_after,
                page_size=page_size,
                page_token=request.page_token,
            )
        )
        include = bool(request.include_artifacts)
        return ListTasksResponse(
            tasks=[view(t, request.history_length, include) for t in page.tasks],
            next_page_token=page.next_page_token,
            page_size=page_size,
            total_size=page.total_size,
        )

    async def on_cancel_task(self, request: CancelTaskRequest, call: CallContext) -> Task:
        key = (request.tenant or call.tenant, request.id)
        run = self._runs.get(key)
        if run is not None:
            return await run.stop(TaskState.CANCELED, CANCELED_MESSAGE)
        stored = await self.store.get(request.id, tenant=key[0])
        if stored is None:
            raise TaskNotFoundError(f"Task {request.id} not found", metadata={"taskId": request.id})
        task = stored.task
        if task.status.state.is_terminal:
            raise TaskNotCancelableError(
                f"Task {task.id} is already {task.status.state.value}", metadata={"taskId": task.id}
            )
        note = agent_text(CANCELED_MESSAGE, context_id=task.context_id, task_id=task.id)
        status = TaskStatus(state=TaskState.CANCELED, message=note, timestamp=_now())
        canceled = _replace(task, status=status, history=[*task.history, note])
        version = stored.version + 1
        if not await self.store.save(canceled, version=version, tenant=key[0]):
            raise TaskNotCancelableError(f"Task {task.id} changed while it was being canceled; try again")
        self.bus.publish(
            key,
            version,
            StreamResponse(
                status_update=TaskStatusUpdateEvent(
                    task_id=task.id, context_id=task.context_id, status=status
                )
            ),
        )
        return canceled

    async def on_subscribe_to_task(self, request: SubscribeToTaskRequest, call: CallContext) -> EventStream:
        key = (request.tenant or call.tenant, request.id)
        sub = self.bus.subscribe(key)
        try:
            snap = await self._snapshot(key)
            if snap is None:
                raise TaskNotFoundError(f"Task {request.id} not found", metadata={"taskId": request.id})
            state = snap[0].status.state
            if state.is_terminal:
                raise UnsupportedOperationError(
                    f"Task {request.id} is {state.value}: there is nothing left to subscribe to",
                    metadata={"taskId": request.id, "state": state.value},
                )
        except BaseException:
            sub.close()
            raise
        return EventStream(sub, snap, end_on_interrupt=False)

    async def on_get_extended_agent_card(
        self, request: GetExtendedAgentCardRequest, call: CallContext
    ) -> Any:
        if self.extended_card is None:
            raise ExtendedAgentCardNotConfiguredError()
        return self.extended_card
