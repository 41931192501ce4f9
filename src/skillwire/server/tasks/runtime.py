"""The task runtime: the default request handler.

It creates tasks for incoming messages, runs the executor for each (one :class:`~skillwire.server.tasks.run.TaskRun`
per invocation, which owns the task while it runs), answers reads from the store, and keeps the promises of
docs/durability.md: nothing is shown before the store has committed it, a task whose state cannot be stored
is failed from its last committed state, and tasks left running by a previous process are recovered in the
background, in batches, while the server already serves.

Budgets (``Limits``): running tasks per process (ServerBusyError beyond it), a deadline per run, the size and
length of a task's history, and the size of a ListTasks page.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import logging
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import Any, TypeVar

import msgspec

from skillwire.errors import (
    A2AError,
    ConcurrentUpdateError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidParamsError,
    KeyClaimedError,
    PushNotificationNotSupportedError,
    ServerBusyError,
    StoreError,
    StoreUnavailableError,
    StreamDroppedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnauthenticatedError,
    UnsupportedOperationError,
)
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import (
    AgentCard,
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskPushNotificationConfig,
    TaskStatus,
    agent_text,
    generation_of,
    new_id,
)
from skillwire.protocol.operations import Operation
from skillwire.protocol.states import TaskState
from skillwire.security.principal import Principal
from skillwire.server.buses.base import Behind, EventBus, Subscription
from skillwire.server.buses.memory import InProcessEventBus
from skillwire.server.context import CallContext, partition
from skillwire.server.handler import BaseRequestHandler, TypedStream
from skillwire.server.notifications.push import PushService
from skillwire.server.observability.metrics import Metrics
from skillwire.server.observability.observe import Observability
from skillwire.server.observability.telemetry import Telemetry
from skillwire.server.tasks.executor import Executor, RequestContext, Work
from skillwire.server.tasks.idempotency import Keyed, Keys, config_id
from skillwire.server.tasks.recovery import RECOVERY_BATCH, RESTART_MESSAGE, Recovery
from skillwire.server.tasks.retention import Pruner
from skillwire.server.tasks.run import (
    CANCELED_MESSAGE,
    RunSpec,
    TaskRun,
    generation_mismatch,
    settles,
    snapshot,
    store_failure,
    view,
    with_status,
)
from skillwire.stores.base import (
    UNFINISHED_STATES,
    StoredTask,
    TaskQuery,
    TaskStore,
    write_task,
)
from skillwire.stores.idempotency import Claim, IdempotencyStore
from skillwire.stores.push import PushConfigRecord
from skillwire.stores.retention import RetentionStore

__all__ = ["RECOVERY_BATCH", "RESTART_MESSAGE", "EventStream", "TaskRuntime"]

log = logging.getLogger("skillwire.runtime")

SHUTDOWN_MESSAGE = "The server shut down before this task finished."
DEFAULT_PAGE_SIZE = 50
#: Reads and writes a CancelTask tries while another process keeps writing the task.
CANCEL_ATTEMPTS = 5
#: Events a stream that fell behind reads from the store's event log per read.
CATCH_UP_EVENTS = 256
#: Seconds between two looks at a claimed request whose first call has stored nothing yet.
CLAIM_POLL = 1.0
UNSTORED_MESSAGE = (
    "The server process working on this request stopped before it stored anything; the request was not run"
    " again."
)

_replace = msgspec.structs.replace
_encode = msgspec.json.Encoder().encode

Key = tuple[str, str]
T = TypeVar("T")


class EventStream(TypedStream):
    """The events of one stream: an optional snapshot, then live events until the task ends.

    A SendStreamingMessage stream ends at a terminal or interrupted state (the client's turn has come); a
    SubscribeToTask stream follows the task through interruptions and ends at a terminal state. The Task is
    only ever the first event, but for one case: a stream that fell behind its task (its bus queue shed
    events: a burst committed at once, a slow reader) catches up from the store's event log, exactly, and
    where the log does not hold what it missed it gets the task as stored instead, a Task event in the middle
    of the stream that supersedes what was missed (its generation says how far it goes). A stream whose task
    could not be stored ends by raising that error. Closing it (``aclose``) releases its bus subscription
    even if it was never iterated.
    """

    def __init__(
        self,
        sub: Subscription,
        first: tuple[Task, int] | None = None,
        *,
        end_on_interrupt: bool = True,
        floor: int = 0,
        store: TaskStore | None = None,
        key: Key = ("", ""),
        resume: bool = False,
    ) -> None:
        """``first``: the snapshot the stream starts with, and its generation. ``floor``: events of this
        generation and older are dropped (what the client has). ``store`` and ``key``: where the stream
        catches up from when it falls behind. ``resume``: catch up from the log at once (a client resuming
        after ``floor``)."""
        self._sub = sub
        self._first = first
        self._ends: Callable[[TaskState], bool] = settles if end_on_interrupt else _is_terminal
        self._seen = first[1] if first is not None else floor
        self._started = resume
        self._done = False
        self._store = store
        self._key = key
        self._backlog: collections.deque[StreamResponse] = collections.deque()
        self._behind = resume
        #: The event taken from the bus last, and its logged JSON (see :meth:`logged`).
        self._last: StreamResponse | None = None
        self._data: bytes | None = None
        #: Whether the first event is at hand (a snapshot, a replay, a task being created): a binding waits
        #: for it before it answers, so that an error up front is a plain error. A client that resumes
        #: with nothing missed waits for the task's next event, which may be a long way off.
        self.opens_at_once = first is not None or resume or floor == 0

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> StreamResponse:
        if self._first is not None:
            task, self._first = self._first[0], None
            self._started = True
            return self._deliver(StreamResponse(task=task))
        while not self._done:
            event = self._take()
            if event is not None:
                return self._deliver(event)
            if self._behind:
                self._behind = False
                snapshot = await self._catch_up()
                if snapshot is not None:
                    return self._deliver(snapshot)
                continue
            try:
                item = await self._sub.next()
            except A2AError:
                self._close()
                raise
            if item is None:
                break
            if isinstance(item, Behind):
                self._behind = True
                continue
            self._last, self._data = item[1], self._sub.data
            if self._accepts(*item):
                return self._deliver(item[1])
        self._close()
        raise StopAsyncIteration

    def next_nowait(self) -> StreamResponse | None:
        """The next event if it is at hand now (in the backlog read from the store, or queued on the bus),
        else None: ``__anext__`` then waits for it, catches up, or ends the stream. A stream's pump takes a
        burst this way, one plain call an event instead of a chain of awaits."""
        if self._first is not None or self._done:
            return None
        event = self._take()
        if event is None or event.artifact_update is not None:  # (a chunk never ends a stream)
            return event
        return self._deliver(event)

    def logged(self, event: StreamResponse) -> bytes | None:
        """The JSON of ``event`` as the store's log holds it, when it is the event this stream took from
        the bus last and the bus carried that JSON (a stream's encoder then reuses it); else None."""
        return self._data if event is self._last else None

    def _take(self) -> StreamResponse | None:
        """The next event to deliver that is at hand without waiting, or None."""
        while True:
            if self._backlog:
                event = self._backlog.popleft()
                generation = generation_of(event)
            elif self._behind:
                return None
            else:
                item = self._sub.next_nowait()
                if item is None:
                    return None
                generation, event = item
                self._last, self._data = event, self._sub.data
                if generation > self._seen and event.task is None:  # a new update: _accepts, inline
                    self._seen, self._started = generation, True
                    return event
            if self._accepts(generation, event):
                return event

    def _accepts(self, generation: int, event: StreamResponse) -> bool:
        """Whether ``event`` (of ``generation``) is new to the client: events it holds are dropped, and a
        Task only opens a stream."""
        if (generation and generation <= self._seen) or (event.task is not None and self._started):
            return False
        if generation:
            self._seen = generation
        self._started = True
        return True

    def _deliver(self, event: StreamResponse) -> StreamResponse:
        """``event``, closing the stream first if it is the stream's last."""
        update = event.status_update
        state = update.status.state if update is not None else event.task.status.state if event.task else None
        if event.message is not None or (state is not None and self._ends(state)):
            self._close()
        return event

    async def _catch_up(self) -> StreamResponse | None:
        """Read what the stream missed from the store's event log into the backlog; None, or the task as
        stored when the log does not hold it."""
        store, (tenant, task_id) = self._store, self._key
        if store is None:
            raise await self._dropped("this stream fell behind its task")
        try:
            page = await store.events(task_id, tenant=tenant, after=self._seen, limit=CATCH_UP_EVENTS)
            if page and generation_of(page[0]) == self._seen + 1:
                self._backlog.extend(page)
                self._sub.skip_through(generation_of(page[-1]))
                # A full page may stop short of where the bus took over (what was committed before the
                # subscription never comes on it): read on once this page is out.
                self._behind = len(page) >= CATCH_UP_EVENTS
                return None
            stored = await store.get(task_id, tenant=tenant)
        except StoreError as exc:
            log.error("a stream of task %s could not catch up from the store: %s", task_id, exc)
            raise await self._dropped("the task store could not be read") from None
        if stored is None or stored.task.generation <= self._seen:
            raise await self._dropped("the task is not in the store")
        self._seen = stored.task.generation
        self._sub.skip_through(self._seen)
        self._started = True
        return StreamResponse(task=stored.task)

    async def _dropped(self, why: str) -> StreamDroppedError:
        self._close()
        return StreamDroppedError(f"{why}; subscribe to task {self._key[1]} again to catch up")

    async def aclose(self) -> None:
        self._close()

    def _close(self) -> None:
        if not self._done:
            self._done = True
            self._sub.close()


def _is_terminal(state: TaskState) -> bool:
    return state.is_terminal


class TaskRuntime(Recovery, BaseRequestHandler):
    """The default request handler: tasks, executor runs, store and bus."""

    def __init__(
        self,
        executor: Executor,
        store: TaskStore,
        bus: EventBus | None = None,
        *,
        extended_card: AgentCard | Callable[[Principal], AgentCard] | None = None,
        limits: Limits | None = None,
        input_modes: Sequence[str] = (),
        push: PushService | None = None,
        observability: Observability | None = None,
    ) -> None:
        """``input_modes`` are the agent's defaultInputModes: a message part of another media type is refused
        (unless the executor's ``input_modes`` says otherwise for that message); empty: any. ``push``: push
        notifications (None: the push-config operations are not offered). ``observability``: the runs'
        spans, metrics and log fields (default: none)."""
        self.push = push
        observability = observability or Observability()
        #: where run spans go (:mod:`skillwire.server.observability.telemetry`); None: no tracing
        self.telemetry: Telemetry | None = observability.telemetry
        #: what runs are counted in (:mod:`skillwire.server.observability.metrics`); None: not counted
        self.metrics: Metrics | None = observability.metrics
        #: whether a run's log records name its task (JSON logs)
        self.json_logs = observability.json_logs
        self.executor = executor
        self.input_modes = list(input_modes)
        self.store = store
        self.limits = limits = limits or Limits()
        self.bus: EventBus = bus or InProcessEventBus(
            max_events=limits.stream_buffer_events, max_bytes=limits.stream_buffer_bytes
        )
        self.extended_card = extended_card
        self._runs: dict[Key, TaskRun] = {}
        #: Tasks whose message is being admitted: resolved with the run once it is built (None: refused).
        self._admitting: dict[Key, _Admitting] = {}
        self._closing = False
        self._init_recovery(store)
        #: GetTask long-polls waiting now (``Limits.max_long_polls``).
        self._polls = 0
        #: Idempotency keys, with a store that keeps their claims (every store skillwire ships).
        self.keys = Keys(store, limits.idempotency_window) if isinstance(store, IdempotencyStore) else None
        #: This runtime's id, on the claims it makes (the store's owner id when processes share it).
        self.instance = self.shared.owner if self.shared is not None else uuid.uuid4().hex
        #: Prunes finished tasks past ``limits.task_retention`` (and reads the store's statistics for the
        #: metrics) once started; None with a store that cannot prune (skillwire.server.tasks.retention).
        self.pruner: Pruner | None = None

    # -- lifecycle -------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Recover tasks a previous process left SUBMITTED or WORKING: the first batch now, the rest in the
        background while the server serves. ``await runtime.recovered()`` waits for all of it and returns the
        ids marked failed.

        The executor's ``resume(task)`` may take a task back (work delegated elsewhere that can be followed
        again): it returns the work to run for it, or None. Every other such task is failed with a reason,
        since the work it stood for died with the process.

        Then finished tasks older than ``limits.task_retention`` are pruned in the background
        (:mod:`skillwire.server.tasks.retention`).
        """
        if self._recovery is not None:
            return
        await self._start_recovery()
        self._start_pruner()

    def _start_pruner(self) -> None:
        retention = self.limits.task_retention
        if not isinstance(self.store, RetentionStore) or (retention is None and self.metrics is None):
            return
        self.pruner = Pruner(self.store, retention=retention, metrics=self.metrics)
        self.pruner.start()

    # -- leases (a store several processes share) ---------------------------------------------------------

    async def stop(self, grace: float = 5.0) -> None:
        """Let running tasks finish for ``grace`` seconds, fail the rest, then end every stream."""
        self._closing = True
        if self.pruner is not None:
            await self.pruner.stop()
        for background in (self._recovery, self._repairer, self._leaser):
            if background is not None and not background.done():
                background.cancel()
                with contextlib.suppress(BaseException):
                    await background
        runners = [r.runner for r in self._runs.values() if r.runner is not None and not r.runner.done()]
        if runners and grace > 0:
            await asyncio.wait(runners, timeout=grace)
        for run in list(self._runs.values()):
            if run.runner is None or run.runner.done():
                continue
            if run.failure is None and (run.task is None or not settles(run.task.status.state)):
                try:
                    await run.stop(TaskState.FAILED, SHUTDOWN_MESSAGE)
                except Exception:
                    log.exception("could not fail task %s at shutdown", run.task_id)
            run.runner.cancel()
        pending = [r.runner for r in self._runs.values() if r.runner is not None]
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
        if self.shared is not None:
            try:  # what this process still owns is failed above: nothing is left for others to take over
                await self.shared.release_lease()
            except Exception as exc:
                log.warning("could not release this process's lease (%s); it lapses by itself", exc)
        self.bus.close()
        closing = getattr(self.bus, "aclose", None)
        if closing is not None:  # a bus with connections of its own (Redis, PostgreSQL)
            await closing()
        if self.push is not None:
            await self.push.stop()  # what is not delivered yet stays in the store, for the next start

    def forget(self, run: TaskRun) -> None:
        if self._runs.get(run.key) is run:
            del self._runs[run.key]

    @property
    def running(self) -> int:
        """Runs of this process, with those whose message is being admitted."""
        return len(self._runs) + len(self._admitting)

    def _owns(self, key: Key) -> bool:
        return key in self._runs or key in self._admitting

    async def _run_of(self, key: Key) -> TaskRun | None:
        """The run that owns the task ``key`` here, once its message is admitted (None: none, or refused):
        a cancel or a push config that arrives meanwhile reaches the run admission builds, before it starts."""
        admitting = self._admitting.get(key)
        if admitting is None:
            return self._runs.get(key)
        if admitting.run is None:  # the first call to wait for this run (most runs have none)
            admitting.run = asyncio.get_running_loop().create_future()
            admitting.served = asyncio.Event()
        admitting.waiting += 1
        try:
            return await asyncio.shield(admitting.run)
        finally:
            admitting.waiting -= 1
            if not admitting.waiting and admitting.served is not None:
                admitting.served.set()

    async def _open(self, key: Key, building: Awaitable[tuple[TaskRun, Work]]) -> tuple[TaskRun, Work]:
        """The run ``building`` makes for ``key`` and its work; this process owns the task from now on (the
        busy check and the lookups of a cancel or a push config find it while it is built). Returned once the
        calls that waited for it have reached it (a cancel holds its lock, a push config is in its targets)."""
        admitting = _Admitting()
        self._admitting[key] = admitting
        built = None
        try:
            built = await building
        finally:
            del self._admitting[key]
            if built is not None:
                self._runs[key] = built[0]
            if admitting.run is not None:
                admitting.run.set_result(built[0] if built is not None else None)
        if admitting.waiting and admitting.served is not None:
            await admitting.served.wait()
        return built

    def _new_run(self, spec: RunSpec) -> TaskRun:
        return TaskRun(self, spec)

    async def _launch(self, run: TaskRun, work: Work, *, eager: bool) -> None:
        try:
            await run.start(work, eager=eager)
        except BaseException:
            self.forget(run)
            raise

    # -- failing a stored task ---------------------------------------------------------------------------

    # -- starting runs -----------------------------------------------------------------------------------

    def _at_the_door(self, request: SendMessageRequest) -> None:
        """Refuse a message before anything is read: the server is stopping, the message is not a user's,
        the running budget is spent, an inline push config is refused."""
        if self._closing:
            raise UnsupportedOperationError("The server is shutting down")
        message = request.message
        if message.role is not Role.USER:
            raise InvalidParamsError(
                f"params.message.role must be ROLE_USER for a message from a client, not {message.role.value}",
                field_violations=[("params.message.role", "must be ROLE_USER")],
            )
        if self.running >= self.limits.max_running_tasks:
            raise ServerBusyError(
                f"This server is running {self.running} tasks, its limit: try again shortly",
                retry_after=self.limits.retry_after,
                metadata={"budget": "max_running_tasks", "limit": self.limits.max_running_tasks},
            )
        inline = request.configuration.task_push_notification_config if request.configuration else None
        if inline is not None:
            self._push_service().check(inline, "params.configuration.taskPushNotificationConfig")

    async def _turn(self, request: SendMessageRequest, tenant: str) -> tuple[StoredTask, Message]:
        """The stored task a message continues and the message as it joins it; refused if it cannot."""
        message = request.message
        key = (tenant, message.task_id)
        self._refuse_busy(key)
        stored = await self._read(self.store.get(message.task_id, tenant=tenant))
        if stored is None:
            raise TaskNotFoundError.for_task(message.task_id)
        self._refuse_busy(key)
        task = stored.task
        config = request.configuration
        expected = config.if_generation_match if config is not None else None
        if expected is not None and expected != task.generation:
            raise generation_mismatch(task, expected)
        state = task.status.state
        if state.is_terminal:
            raise UnsupportedOperationError(
                f"Task {task.id} is {state.value}: a terminal task accepts no more messages."
                " Start a new task in the same context instead.",
                metadata={"taskId": task.id, "state": state.value},
            )
        if state in UNFINISHED_STATES:  # no run owns it here: it is being recovered or repaired
            raise _busy(key)
        if message.context_id and message.context_id != task.context_id:
            raise InvalidParamsError(
                f"message.contextId {message.context_id!r} does not match the context of task {task.id}",
                field_violations=[("params.message.contextId", "does not match the task's contextId")],
            )
        user = _replace(message, context_id=task.context_id)
        self._check_room(task, stored, user)
        return stored, user

    def _check_room(self, task: Task, stored: StoredTask, message: Any) -> None:
        """Refuse a message the task has no room for (its history or size limit), leaving room in the
        history for the agent's answer."""
        limits = self.limits
        layout = stored.layout
        count = layout.messages if layout is not None else len(task.history)
        if count + 2 > limits.max_history_messages:
            raise InvalidParamsError(
                f"Task {task.id} holds {count} messages: with this one and an answer it would pass the"
                f" {limits.max_history_messages} messages, the most one task may hold. Start a new task in the"
                " same context instead",
                field_violations=[
                    ("params.message", f"the task's history is at its limit of {count} messages")
                ],
                metadata={"taskId": task.id, "maxHistoryMessages": limits.max_history_messages},
            )
        if layout is not None:
            size = layout.size + len(_encode(message))
            if size > limits.max_task_bytes:
                raise InvalidParamsError(
                    f"Task {task.id} would grow to {size} bytes with this message, past the"
                    f" {limits.max_task_bytes} bytes one task may hold: start a new task in the same context"
                    " instead",
                    field_violations=[("params.message", "the task has no room for this message")],
                    metadata={"taskId": task.id, "maxTaskBytes": limits.max_task_bytes},
                )

    def _refuse_busy(self, key: Key) -> None:
        if self._owns(key):
            raise _busy(key)

    async def _admitted(
        self,
        request: SendMessageRequest,
        call: CallContext,
        tenant: str,
        origin: StoredTask | None,
        message: Message,
        *,
        stream: bool,
        turn: Claim | None,
        claim: Claim | None,
        keyed: Keyed | None,
    ) -> tuple[TaskRun, Work]:
        """The run of ``message`` (continuing ``origin``, or a new task), built whole from the executor's one
        answer (:class:`Admission`) and the task's push configs before anything is written; then ``claim``
        made, when given (KeyClaimedError if another request has its key). The work to run: the answer's, or
        else the executor's ``execute``."""
        context = RequestContext(
            message=message,
            task_id=message.task_id,
            context_id=message.context_id,
            call=call,
            task=origin.task if origin is not None else None,
            configuration=request.configuration,
            metadata=request.metadata,
        )
        admission = await self.executor.admission(context, self.input_modes)
        push, records = (
            ({}, ())
            if self.push is None
            else await self._push_of(request, call, tenant, message.task_id, origin)
        )
        keys = self.keys
        if claim is not None and keys is not None and await self._read(keys.store.claim(claim)) is not None:
            raise KeyClaimedError("the request's idempotency key is claimed already")
        spec = RunSpec(
            tenant=tenant,
            message=message,
            request=request,
            call=call,
            origin=origin,
            deadline=self.limits.task_timeout if admission.timeout is None else admission.timeout,
            skill_id=admission.skill_id,
            push=push,
            push_records=records,
            claim=turn,
            replying_to=keyed,
            observed=stream,
        )
        return TaskRun(self, spec), admission.work or functools.partial(self.executor.execute, context)

    async def _push_of(
        self,
        request: SendMessageRequest,
        call: CallContext,
        tenant: str,
        task_id: str,
        origin: StoredTask | None,
    ) -> tuple[dict[str, str], tuple[PushConfigRecord, ...]]:
        """The run's push configs (id -> delivery shape), with push on: those its task has, with the one its
        SendMessage gives inline, which is stored with a new task's first write (the record returned) or now
        for a task that exists."""
        push = self.push
        assert push is not None  # (the caller skips this with push off)
        targets = await push.targets(tenant, task_id) if origin is not None else {}
        config = request.configuration
        inline = config.task_push_notification_config if config is not None else None
        if inline is None:
            return targets, ()
        await self._read(push.admit(tenant))
        if origin is None:
            stored, record = push.record(inline, tenant, task_id, call)
            return {stored.id: record.shape}, (record,)
        stored, shape = await self._read(push.put(inline, tenant, task_id, call))
        return {**targets, stored.id: shape}, ()

    async def _read(self, read: Awaitable[T]) -> T:
        """Await a store read; a failing store is an internal error for the caller, an unreachable one a
        ServiceUnavailableError (503, Retry-After)."""
        try:
            return await read
        except StoreError as exc:
            unavailable = isinstance(exc, StoreUnavailableError)
            log.error("the task store %s: %s", "is unavailable" if unavailable else "could not be read", exc)
            raise store_failure(exc, self.limits, "The task store could not be read; try again") from None

    # -- operations ------------------------------------------------------------------------------------

    # -- idempotency keys (skillwire.server.tasks.idempotency) -------------------------------------------------

    def _keyed(self, operation: Operation, request: Any, call: CallContext) -> Keyed | None:
        """The key a call came with (None: none, or a store that keeps no claims)."""
        if self.keys is None:
            return None
        return self.keys.keyed(operation, request, _partition(request, call), call.headers)

    async def _recall(self, keyed: Keyed | None) -> Claim | None:
        return None if keyed is None or self.keys is None else await self._read(self.keys.recall(keyed))

    async def _start(
        self,
        request: SendMessageRequest,
        call: CallContext,
        keyed: Keyed | None,
        *,
        eager: bool,
        stream: bool,
    ) -> tuple[TaskRun, Subscription | None]:
        """Admit and start a run (subscribed first, for a stream). With a key, the request is claimed before
        any work: a message that continues a task in the write that stores its turn, one that makes a new
        task on its own, naming the task's id; KeyClaimedError means another request with the key was first."""
        if keyed is None or self.keys is None:
            return await self._started(request, call, eager=eager, stream=stream)
        async with self.keys.claiming(keyed):
            if request.message.task_id:
                turn = self.keys.claim(keyed)
                return await self._started(request, call, eager=eager, stream=stream, turn=turn)
            task_id = new_id()
            claim = self.keys.claim(keyed, task_id=task_id, owner=self.instance)
            return await self._started(
                request, call, eager=eager, stream=stream, task_id=task_id, claim=claim, keyed=keyed
            )

    async def _started(
        self,
        request: SendMessageRequest,
        call: CallContext,
        *,
        eager: bool,
        stream: bool,
        task_id: str = "",
        turn: Claim | None = None,
        claim: Claim | None = None,
        keyed: Keyed | None = None,
    ) -> tuple[TaskRun, Subscription | None]:
        """The run of ``request``, built whole once its message is admitted, then started. ``turn``: the
        claim the turn's first write makes; ``claim``: made before the run starts (a new task's)."""
        self._at_the_door(request)
        tenant = _partition(request, call)
        origin, message = None, request.message
        if message.task_id:
            origin, message = await self._turn(request, tenant)
        else:
            message = _replace(
                message, task_id=task_id or new_id(), context_id=message.context_id or new_id()
            )
        key = (tenant, message.task_id)
        sub = self.bus.subscribe(key, after=origin.task.generation if origin else 0) if stream else None
        try:
            admitted = self._admitted(
                request, call, tenant, origin, message, stream=stream, turn=turn, claim=claim, keyed=keyed
            )
            run, work = await self._open(key, admitted)
            await self._launch(run, work, eager=eager)
        except BaseException:
            if sub is not None:
                sub.close()
            raise
        return run, sub

    async def _settled_after(self, key: Key, generation: int) -> Task:
        """The task once it settles (terminal, or waiting for the client) past ``generation``: what a call
        made again with its key waits for, as the first call did."""
        while True:
            sub = self.bus.subscribe(key, after=None)  # before the read: a change after it wakes the wait
            try:
                stored = await self._read(self.store.get(key[1], tenant=key[0]))
                if stored is None:
                    raise TaskNotFoundError.for_task(key[1])
                task = stored.task
                if settles(task.status.state) and task.generation > generation:
                    return task
                sub.skip_through(task.generation)
                if await sub.next() is None:  # the bus closed: the server is stopping
                    return task
            finally:
                sub.close()

    async def _answered(self, claim: Claim, request: SendMessageRequest) -> Task | Message:
        """What the first request with ``claim``'s key made: its task as stored, or its direct reply. While
        neither is stored and the process that made the claim is at work, this waits; if that process is gone,
        the request's task is stored as failed (its work is not done again)."""
        key = (claim.scope, claim.task_id)
        while True:
            sub = self.bus.subscribe(key, after=None)  # a reply, or the task's first event, wakes the wait
            try:
                stored = await self._read(self.store.get(key[1], tenant=key[0]))
                if stored is not None:
                    return stored.task
                again = await self._recall_claim(claim)
                if again is not None and again.result:
                    return _decode_message(again.result)
                if not await self._alive(claim):
                    failed = await self._fail_unstored(claim, request)
                    if failed is not None:
                        return failed
                    continue  # stored meanwhile
                with contextlib.suppress(TimeoutError, A2AError):
                    async with asyncio.timeout(CLAIM_POLL):  # a process that dies says nothing: look again
                        await sub.next()
            finally:
                sub.close()

    async def _recall_claim(self, claim: Claim) -> Claim | None:
        assert self.keys is not None
        return await self._read(self.keys.store.recall(claim.scope, claim.key, time.time_ns() // 1_000))

    async def _alive(self, claim: Claim) -> bool:
        """Whether the process that made ``claim`` may still store its task or reply."""
        if claim.owner == self.instance:
            return self._owns((claim.scope, claim.task_id))
        if self.shared is not None and claim.owner:
            return await self._read(self.shared.alive(claim.owner))
        return False  # made by an earlier process of this store, which stopped

    async def _fail_unstored(self, claim: Claim, request: SendMessageRequest) -> Task | None:
        """Store the task of a claimed request whose process stopped before it stored anything, as failed:
        the work may have begun there, so it is not begun again. None if it got stored meanwhile."""
        message = _replace(
            request.message, task_id=claim.task_id, context_id=request.message.context_id or new_id()
        )
        task = Task(
            id=claim.task_id,
            context_id=message.context_id,
            status=TaskStatus(state=TaskState.SUBMITTED),
            history=[message],
        )
        failed = with_status(
            task, TaskState.FAILED, agent_text(UNSTORED_MESSAGE, context_id=task.context_id, task_id=task.id)
        )
        try:
            await self.store.commit(
                write_task(failed, version=1, tenant=claim.scope, events=[StreamResponse(task=failed)])
            )
        except ConcurrentUpdateError:
            return None
        except StoreError as exc:
            raise store_failure(exc, self.limits) from None
        return failed

    async def _send_again(self, claim: Claim, request: SendMessageRequest) -> SendMessageResponse:
        """The answer to a message sent again with its key: what its first call made or continued."""
        answered = await self._answered(claim, request)
        if isinstance(answered, Message):
            return SendMessageResponse(message=answered)
        config = request.configuration
        if not (config is not None and config.return_immediately):
            answered = await self._settled_after((claim.scope, claim.task_id), claim.generation)
        return SendMessageResponse(task=view(answered, config.history_length if config is not None else None))

    async def _claimed(self, keyed: Keyed | None) -> Claim:
        claim = await self._recall(keyed)
        if claim is None:  # pragma: no cover - a KeyClaimedError names a live claim
            raise InternalError("The request's Idempotency-Key is claimed, but its claim cannot be read")
        return claim

    # -- operations (continued) ---------------------------------------------------------------------------

    async def _recall_turn(self, keyed: Keyed | None, request: SendMessageRequest) -> Claim | None:
        """The claim of a message sent again that continues a task (its turn may still be under way here).
        A message that makes a new task needs no look first: its claim, made before any work, finds it."""
        return await self._recall(keyed) if request.message.task_id else None

    async def on_send_message(self, request: SendMessageRequest, call: CallContext) -> SendMessageResponse:
        keyed = self._keyed(Operation.SEND_MESSAGE, request, call)
        claim = await self._recall_turn(keyed, request)
        if claim is not None:
            return await self._send_again(claim, request)
        config = request.configuration
        immediate = config is not None and config.return_immediately
        try:
            run, _ = await self._start(request, call, keyed, eager=immediate, stream=False)
        except KeyClaimedError:
            return await self._send_again(await self._claimed(keyed), request)
        history_length = config.history_length if config is not None else None
        if immediate:
            assert run.task is not None
            result: Any = snapshot(run.task)
        else:
            run.waiters += 1
            try:
                result = await asyncio.shield(run.settled)
            finally:
                run.waiters -= 1
        if isinstance(result, Task):
            return SendMessageResponse(task=view(result, history_length))
        return SendMessageResponse(message=result)

    async def on_send_streaming_message(
        self, request: SendMessageRequest, call: CallContext
    ) -> AsyncIterator[StreamResponse]:
        keyed = self._keyed(Operation.SEND_MESSAGE, request, call)
        claim = await self._recall_turn(keyed, request)
        if claim is not None:
            return await self._stream_again(claim, request, call)
        try:
            run, sub = await self._start(request, call, keyed, eager=False, stream=True)
        except KeyClaimedError:
            return await self._stream_again(await self._claimed(keyed), request, call)
        assert sub is not None
        floor = run.previous.generation if run.previous is not None else 0  # before this message
        first = None
        if run.previous is not None and run.task is not None:
            # a continued task: the stream starts with the task as this message's turn stored it (the run's
            # work has not begun yet, so the live task is what the store holds)
            first = (snapshot(run.task), run.committed_generation)
        return EventStream(sub, first, floor=floor, store=self.store, key=run.key)

    async def on_get_task(self, request: GetTaskRequest, call: CallContext) -> Task:
        tenant = _partition(request, call)
        if request.current_generation is not None:
            return await self._long_poll(request, (tenant, request.id), request.current_generation)
        return await self._get(request, tenant)

    async def _get(self, request: GetTaskRequest, tenant: str) -> Task:
        stored = await self._read(
            self.store.get(request.id, tenant=tenant, history_length=request.history_length)
        )
        if stored is None:
            raise TaskNotFoundError.for_task(request.id)
        return stored.task

    async def _long_poll(self, request: GetTaskRequest, key: Key, current: int) -> Task:
        """The task once its generation is past ``current`` (at once if it already is), or as it is after
        ``long_poll_timeout`` seconds; a new waiter past ``max_long_polls`` is refused as busy."""
        limits = self.limits
        if self._polls >= limits.max_long_polls:
            raise ServerBusyError(
                f"This server holds {self._polls} long-polls, its limit: try again shortly",
                retry_after=limits.retry_after,
                metadata={"budget": "max_long_polls", "limit": limits.max_long_polls},
            )
        self._polls += 1
        sub = self.bus.subscribe(key, after=current)  # before the read: a change after it wakes the wait
        try:
            task = await self._get(request, key[0])
            if task.generation > current or task.status.state.is_terminal:
                return task
            with contextlib.suppress(TimeoutError, A2AError):  # a bus that failed: answer what is stored
                async with asyncio.timeout(limits.long_poll_timeout):
                    await sub.next()  # an event past ``current``, or word that some were shed
            return await self._get(request, key[0])
        finally:
            self._polls -= 1
            sub.close()

    async def on_list_tasks(self, request: ListTasksRequest, call: CallContext) -> ListTasksResponse:
        page_size = request.page_size or DEFAULT_PAGE_SIZE
        history_length = request.history_length
        page = await self._read(
            self.store.list_tasks(
                TaskQuery(
                    tenant=_partition(request, call),
                    context_id=request.context_id,
                    state=None if request.status is TaskState.UNSPECIFIED else request.status,
                    updated_after=request.status_timestamp_after,
                    page_size=page_size,
                    page_token=request.page_token,
                    history_length=self.limits.list_history_length
                    if history_length is None
                    else history_length,
                    include_artifacts=bool(request.include_artifacts),
                    max_bytes=self.limits.max_page_bytes,
                )
            )
        )
        return ListTasksResponse(
            tasks=page.tasks,
            next_page_token=page.next_page_token,
            page_size=page_size,
            total_size=page.total_size,
        )

    async def on_cancel_task(self, request: CancelTaskRequest, call: CallContext) -> Task:
        key = (_partition(request, call), request.id)
        run = await self._run_of(key)
        if run is not None:
            return await run.stop(TaskState.CANCELED, CANCELED_MESSAGE)
        # No run of this process owns the task: end it in the store, from the version read. Another process
        # may be running it and commit meanwhile: read again and retry (its run stops when it sees the end).
        for _ in range(CANCEL_ATTEMPTS):
            stored = await self._read(self.store.get(request.id, tenant=key[0]))
            if stored is None:
                raise TaskNotFoundError.for_task(request.id)
            task = stored.task
            if task.status.state.is_terminal:
                raise TaskNotCancelableError(
                    f"Task {task.id} is already {task.status.state.value}", metadata={"taskId": task.id}
                )
            try:
                canceled, _ = await self._end_stored(key[0], stored, TaskState.CANCELED, CANCELED_MESSAGE)
            except ConcurrentUpdateError:
                continue
            except StoreError as exc:
                log.error("could not store the cancellation of task %s: %s", task.id, exc)
                raise store_failure(exc, self.limits) from None
            return canceled
        raise TaskNotCancelableError(
            f"Task {request.id} kept changing while it was being canceled; try again",
            metadata={"taskId": request.id},
        )

    async def _stream_again(
        self, claim: Claim, request: SendMessageRequest, call: CallContext
    ) -> EventStream | AsyncIterator[StreamResponse]:
        """The stream of a message sent again with its key: its task from where the client is (after its
        ``Last-Event-ID``), or from the task as it is now, until the task settles; or the first call's reply."""
        answered = await self._answered(claim, request)
        if isinstance(answered, Message):
            return _one(StreamResponse(message=answered))
        key = (claim.scope, claim.task_id)
        return await self._follow(key, _cursor(call.headers.get("last-event-id")), end_on_interrupt=True)

    async def on_subscribe_to_task(self, request: SubscribeToTaskRequest, call: CallContext) -> EventStream:
        key = (_partition(request, call), request.id)
        after = request.after_generation
        if after is None:
            after = _cursor(call.headers.get("last-event-id"))
        return await self._follow(key, after, end_on_interrupt=False)

    async def _follow(self, key: Key, after: int | None, *, end_on_interrupt: bool) -> EventStream:
        """A stream of the task ``key``: its snapshot then what follows, or (``after``) what followed that
        generation; a task that ended with nothing left to send is refused."""
        task_id = key[1]
        sub = self.bus.subscribe(key, after=after)  # before the read: what follows it is not missed
        try:
            stored = await self._read(self.store.get(task_id, tenant=key[0]))
            if stored is None:
                raise TaskNotFoundError.for_task(task_id)
            generation = stored.task.generation
            if after is None:
                sub.skip_through(generation)  # a replay of what the snapshot holds takes no room
            elif after > generation:
                raise InvalidParamsError(
                    f"Task {task_id} is at generation {generation}: it has no generation {after} to resume after",
                    field_violations=[("params.afterGeneration", f"at most {generation}")],
                    metadata={"taskId": task_id, "currentGeneration": generation},
                )
            state = stored.task.status.state
            if state.is_terminal and (after is None or after >= generation) and not end_on_interrupt:
                raise UnsupportedOperationError(
                    f"Task {task_id} is {state.value}: there is nothing left to subscribe to",
                    metadata={"taskId": task_id, "state": state.value},
                )
        except BaseException:
            sub.close()
            raise
        if after is not None and (after < generation or not settles(state)):
            return EventStream(
                sub,
                floor=after,
                end_on_interrupt=end_on_interrupt,
                store=self.store,
                key=key,
                resume=after < generation,
            )
        first = (stored.task, generation)
        return EventStream(sub, first, end_on_interrupt=end_on_interrupt, store=self.store, key=key)

    # -- push notification configs --------------------------------------------------------------------

    def _push_service(self) -> PushService:
        if self.push is None:
            raise PushNotificationNotSupportedError()
        return self.push

    async def _push_task(self, request: Any, call: CallContext) -> tuple[PushService, str]:
        """The push service and the caller's partition, once the task is known to be there."""
        push = self._push_service()
        tenant = _partition(request, call)
        if await self._read(self.store.get(request.task_id, tenant=tenant, history_length=0)) is None:
            raise TaskNotFoundError.for_task(request.task_id)
        return push, tenant

    async def on_create_task_push_notification_config(
        self, request: TaskPushNotificationConfig, call: CallContext
    ) -> TaskPushNotificationConfig:
        if not request.task_id:
            raise InvalidParamsError(
                "params.taskId is required: the task the config is for",
                field_violations=[("params.taskId", "required")],
            )
        push = self._push_service()
        push.check(request)
        keyed = self._keyed(Operation.CREATE_PUSH_CONFIG, request, call)
        claim = await self._claim_alone(keyed)
        if claim is not None and claim.result:  # made by the first call with this key
            return _decode_config(claim.result)
        if keyed is not None and not request.id:  # the same id on every try: storing it again is harmless
            request = _replace(request, id=config_id(keyed))
        push, tenant = await self._push_task(request, call)
        await self._read(push.admit(tenant))
        stored, shape = await self._read(push.put(request, tenant, request.task_id, call))
        run = await self._run_of((tenant, request.task_id))
        if run is not None:
            run.push[stored.id] = shape
        if keyed is not None and self.keys is not None:
            await self._read(self.keys.store.settle(keyed.scope, keyed.key, _encode(stored)))
        return stored

    async def _claim_alone(self, keyed: Keyed | None) -> Claim | None:
        """Claim ``keyed`` on its own (a push-config call): None when this call made the claim, else the
        claim there (its ``result`` empty while its first call is under way, or if that call died)."""
        if keyed is None or self.keys is None:
            return None
        claim = await self._recall(keyed)
        if claim is None:
            claim = await self._read(self.keys.store.claim(self.keys.claim(keyed)))
            if claim is not None and claim.digest != keyed.digest:
                claim = await self._recall(keyed)  # raises IdempotencyKeyReusedError
        return claim

    async def on_get_task_push_notification_config(
        self, request: GetTaskPushNotificationConfigRequest, call: CallContext
    ) -> TaskPushNotificationConfig:
        push, tenant = await self._push_task(request, call)
        return await self._read(push.get(request, tenant, v03=call.protocol_version.startswith("0.")))

    async def on_list_task_push_notification_configs(
        self, request: ListTaskPushNotificationConfigsRequest, call: CallContext
    ) -> ListTaskPushNotificationConfigsResponse:
        push, tenant = await self._push_task(request, call)
        return await self._read(push.list_configs(request, tenant))

    async def on_delete_task_push_notification_config(
        self, request: DeleteTaskPushNotificationConfigRequest, call: CallContext
    ) -> None:
        keyed = self._keyed(Operation.DELETE_PUSH_CONFIG, request, call)
        claim = await self._claim_alone(keyed)
        if claim is not None and claim.result:  # deleted by the first call with this key
            return
        push, tenant = await self._push_task(request, call)
        await self._read(push.delete(request, tenant))
        run = await self._run_of((tenant, request.task_id))
        if run is not None:
            run.push.pop(request.id, None)
        if keyed is not None and self.keys is not None:
            await self._read(self.keys.store.settle(keyed.scope, keyed.key, b"{}"))

    async def on_get_extended_agent_card(
        self, request: GetExtendedAgentCardRequest, call: CallContext
    ) -> Any:
        if self.extended_card is None:
            raise ExtendedAgentCardNotConfiguredError()
        if not call.principal.authenticated:  # the spec: it MUST require authentication
            raise UnauthenticatedError("The extended agent card is served to authenticated callers only")
        card = self.extended_card
        return card(call.principal) if callable(card) else card


class _Admitting:
    """A task whose message is being admitted: the calls waiting for its run, and the run once built (the
    future and the event are made by the first call that waits)."""

    __slots__ = ("run", "served", "waiting")

    def __init__(self) -> None:
        self.run: asyncio.Future[TaskRun | None] | None = None
        self.waiting = 0
        self.served: asyncio.Event | None = None


def _partition(request: Any, call: CallContext) -> str:
    """Where the tasks a call may reach are kept: its tenant and, when the agent has security, its
    principal (see :func:`skillwire.server.context.partition`)."""
    return partition(request.tenant or call.tenant, call.principal)


_decode_config = msgspec.json.Decoder(TaskPushNotificationConfig).decode
_decode_message = msgspec.json.Decoder(Message).decode


async def _one(event: StreamResponse) -> AsyncIterator[StreamResponse]:
    yield event


def _cursor(value: str | None) -> int | None:
    """A resume cursor sent as ``Last-Event-ID`` (an SSE event id, on HTTP; gRPC metadata of that name): a
    generation, or None when there is none."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if not (value.isascii() and value.isdigit()) or len(value) > 18:
        raise InvalidParamsError(
            f"Last-Event-ID {value[:40]!r} is not an event id of this server: send back the id of the last"
            " event received (a task generation)",
            field_violations=[("Last-Event-ID", "a non-negative integer")],
        )
    return int(value)


def _busy(key: Key) -> UnsupportedOperationError:
    return UnsupportedOperationError(
        f"Task {key[1]} is still working on an earlier message; send more input when it asks for it",
        metadata={"taskId": key[1]},
    )
