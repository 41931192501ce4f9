"""One executor invocation on one task (a new task, or a message that resumes an interrupted one).

Commit before visible. The run applies the executor's events to its live task, each as a new version; a
commit writes what changed since the last one (an incremental :class:`~skillwire.stores.base.TaskWrite`) and
only once the store holds it are the events it covers published and the callers waiting on it answered.
Nobody reads the live task: GetTask and ListTasks read the store. Terminal and interrupted states, the
creation of a task someone can already see (a stream, ``returnImmediately``), ``set_metadata`` and
``release`` are committed before the executor's call returns; other changes are written behind, coalesced,
without blocking the executor. One commit at a time per run, so each write is made from the version the
store holds.

When a commit fails, the run is over. The task's state cannot be recorded as it is (the store failed; or the
executor produced content that is not JSON, or more than a task may hold), so the executor is cancelled and
the runtime fails the task from its last committed state, with a reason. If that write succeeds, waiting
callers and streams see the FAILED task; if the store is still failing, they get an internal error (nothing is
reported that the store does not hold) and the runtime retries the repair in the background.

Snapshots: appending a chunk to an artifact extends that artifact's parts in place (so a long stream costs
linear, not quadratic, time); everything that leaves the run (an event, an answer) is a ``snapshot()``, which
copies the lists that change.

Several processes (a store and a bus they share). Every commit is made from the version the run last
committed, so a run whose task was changed by another process finds out at its next commit
(ConcurrentUpdateError): the task was canceled there, taken over after this process's lease lapsed, or
continued there first. The run then ends without writing: its work is cancelled and its callers get the
task as stored (or, when this run had not committed anything yet, the task is busy). So that work which
commits nothing for a while still stops at once when it is canceled through another process, a run on a
shared bus follows its own task's events, and a terminal state it did not produce ends it the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import msgspec

from skillwire.errors import (
    A2AError,
    ConcurrentUpdateError,
    InternalError,
    InvalidAgentResponseError,
    KeyClaimedError,
    ServiceUnavailableError,
    StoreUnavailableError,
    TaskGenerationMismatchError,
    TaskNotCancelableError,
    UnsupportedOperationError,
)
from skillwire.protocol.limits import Limits
from skillwire.protocol.media import refused_part
from skillwire.protocol.models import (
    Artifact,
    Message,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskArtifactUpdateEvent,
    TaskStatus,
    TaskStatusUpdateEvent,
    agent_text,
    generation_of,
)
from skillwire.protocol.states import NAMES, TaskState, can_transition
from skillwire.server.buses.base import Behind, EventBus
from skillwire.server.context import CallContext
from skillwire.server.observability import logs
from skillwire.server.tasks.executor import TaskEvents, Work
from skillwire.server.tasks.lock import RunLock
from skillwire.stores.base import StoredTask, TaskStore, TaskWrite, write_task
from skillwire.stores.idempotency import Claim
from skillwire.stores.push import PushConfigRecord

if TYPE_CHECKING:
    from skillwire.server.notifications.push import PushService
    from skillwire.server.observability.metrics import Metrics
    from skillwire.server.observability.telemetry import Telemetry
    from skillwire.server.tasks.idempotency import Keyed, Keys

__all__ = [
    "RunHost",
    "RunSpec",
    "TaskRun",
    "generation_mismatch",
    "snapshot",
    "status_event",
    "store_failure",
    "view",
    "with_status",
]

log = logging.getLogger("skillwire.runtime")

FAILED_MESSAGE = "The agent failed while working on this task."
CANCELED_MESSAGE = "The task was canceled."
NOT_JSON_MESSAGE = "The agent produced content that is not JSON, so the task was stopped."
STORE_MESSAGE = "The server could not store this task's progress, so the task was stopped."
STORE_FAILED = "The task could not be stored: the server's task store failed. Nothing past the task's last stored state was recorded."
STORE_UNAVAILABLE = "The task store is unavailable: nothing of this request was stored; try again shortly."

_replace = msgspec.structs.replace


def store_failure(exc: Exception, limits: Limits, failed: str = STORE_FAILED) -> A2AError:
    """What the caller is told when a store call failed with ``exc``: the store is unavailable for now (503,
    Retry-After), or it failed (an internal error saying ``failed``)."""
    if isinstance(exc, StoreUnavailableError):
        return ServiceUnavailableError(STORE_UNAVAILABLE, retry_after=limits.retry_after)
    return InternalError(failed)


def generation_mismatch(task: Task, expected: int) -> TaskGenerationMismatchError:
    """The answer to a SendMessage whose ``ifGenerationMatch`` is not the task's generation."""
    return TaskGenerationMismatchError(
        f"Task generation mismatch: expected {expected} but current generation is {task.generation}",
        metadata={"taskId": task.id, "expectedGeneration": expected, "currentGeneration": task.generation},
    )


def _own(artifact: Artifact) -> Artifact:
    """The task's own copy of an artifact it is given: its parts list is appended to by later chunks, while
    the event keeps the caller's object."""
    return _replace(artifact, parts=list(artifact.parts))


def now() -> datetime:
    return datetime.now(UTC)


def view(task: Task, history_length: int | None = None) -> Task:
    """``task`` as a caller asked to see it: the last ``history_length`` messages."""
    history = task.history
    if history_length is None or len(history) <= history_length:
        return task
    return _replace(task, history=history[len(history) - history_length :] if history_length else [])


def snapshot(task: Task) -> Task:
    """A copy of a live task that later changes to it cannot reach."""
    return _replace(
        task,
        artifacts=[_replace(a, parts=list(a.parts)) for a in task.artifacts],
        history=list(task.history),
    )


def status_event(task: Task) -> StreamResponse:
    return StreamResponse(
        status_update=TaskStatusUpdateEvent(
            task_id=task.id, context_id=task.context_id, status=task.status, generation=task.generation
        )
    )


def with_status(task: Task, state: TaskState, message: Message | None) -> Task:
    """``task`` moved to ``state``, with ``message`` as its status message, appended to its history, one
    generation on: the one place a status is applied (a run's events, a cancel or a failure of a task no run
    owns). The state table must allow the move (InvalidAgentResponseError if not)."""
    current = task.status.state
    if not can_transition(current, state):
        raise InvalidAgentResponseError(f"task {task.id} cannot move from {current.value} to {state.value}")
    status = TaskStatus(state=state, message=message, timestamp=now())
    history = [*task.history, message] if message is not None else task.history
    return _replace(task, status=status, history=history, generation=task.generation + 1)


def settles(state: TaskState) -> bool:
    return state.is_terminal or state.is_interrupted


class RunHost(Protocol):
    """What a run uses of the runtime that started it (:class:`~skillwire.server.tasks.runtime.TaskRuntime`),
    named here by what it does so that this module does not import the runtime's, which imports this one."""

    @property
    def limits(self) -> Limits: ...
    @property
    def store(self) -> TaskStore: ...
    @property
    def bus(self) -> EventBus: ...
    @property
    def push(self) -> PushService | None: ...
    @property
    def keys(self) -> Keys | None: ...
    @property
    def telemetry(self) -> Telemetry | None: ...
    @property
    def metrics(self) -> Metrics | None: ...
    @property
    def json_logs(self) -> bool: ...

    async def repair(
        self, key: tuple[str, str], reason: str, fresh: Task | None = None
    ) -> tuple[Task, int] | None: ...
    def forget(self, run: TaskRun) -> None: ...


#: A run hands the event loop on after every this many events (versions) its executor makes: a skill that
#: emits chunk after chunk awaiting nothing else would otherwise hold the loop until it ends (100,000 chunks:
#: about a second in which no other request is served), and its stream would get nothing before then. Its
#: events are committed and sent meanwhile, so storing and sending overlap with making the rest.
YIELD_EVERY = 256
#: ... and after every this many while the bus says this process is not keeping up with its events (a
#: subscriber's queue holds a backlog: its reader, on this loop, takes less per turn than the run makes, say a
#: stream of larger events; see ``EventBus.publish``). The reader then catches up from its queue rather than
#: falling past its bound and reading the rest from the store's log, which costs more per event (a stream of
#: 100,000 chunks did so for 95% of them, at two thirds of the events per second of one of 10,000).
BACKLOG_YIELD_EVERY = 16
#: At those turns, a run with this many events made and not yet committed waits for the commit under way
#: instead: a skill that makes events faster than the store commits them would otherwise run ahead without
#: bound, holding what it made in memory, and each commit would publish more events at once than a
#: subscriber's queue holds (which then reads them from the store's log).
UNCOMMITTED_EVENTS = 1_024

_NO_PUSH: Mapping[str, str] = MappingProxyType({})


class RunSpec(NamedTuple):
    """What a run is built from, whole: the message and its call, the task it continues or takes back, and
    what admission decided (the executor's :class:`~skillwire.server.tasks.executor.Admission`, the push
    configs, the idempotency claim). A named tuple: immutable, and built once per message at a third of a
    frozen dataclass's cost (measured: 0.6 against 1.8 µs)."""

    tenant: str
    message: Message
    request: SendMessageRequest
    call: CallContext
    #: The stored task the message continues, or that is taken back (``resumed``); None: a new task.
    origin: StoredTask | None = None
    resumed: bool = False
    #: Whether the task is taken over from a process sharing the store: its first commit is one version on.
    taken_over: bool = False
    #: Seconds the executor may take (None: no deadline).
    deadline: float | None = None
    #: The skill this run is for: the new task's metadata.skillId, its trace span and metrics label.
    skill_id: str = ""
    #: The task's push configs (id -> delivery shape) as admission found them.
    push: Mapping[str, str] = _NO_PUSH
    #: Configs to store with the first commit (given inline in the SendMessage that creates the task).
    push_records: tuple[PushConfigRecord, ...] = ()
    #: The idempotency claim of the request, made with the first commit.
    claim: Claim | None = None
    #: The key of a claimed request that makes a new task: a direct reply is kept with its claim.
    replying_to: Keyed | None = None
    #: Whether the task id is revealed before the task settles (a stream).
    observed: bool = False


class TaskRun:
    """One executor invocation on one task; it owns the task while it runs."""

    def __init__(self, runtime: RunHost, spec: RunSpec) -> None:
        """A run of a new task (no ``spec.origin``: the message carries its ids), of a message that continues
        the stored task ``origin`` (appended to its history), or of ``origin`` taken back (``resumed``: the
        message is its first, already in its history)."""
        self.runtime = runtime
        self.tenant, self.message, self.request, self.call = (
            spec.tenant,
            spec.message,
            spec.request,
            spec.call,
        )
        self.skill_id, self.deadline = spec.skill_id, spec.deadline
        self._take(spec)
        config = spec.request.configuration
        #: The media types the client accepts in artifacts (empty: any).
        self.accepted_output_modes = config.accepted_output_modes if config is not None else []
        self.lock, self._commit_lock = RunLock(), RunLock()
        #: Events made but not yet committed: published once a commit covers their version.
        self._pending: list[tuple[int, StreamResponse]] = []
        #: artifact index -> the version at which it was last replaced whole (rather than appended to)
        self._replaced: dict[int, int] = {}
        self._loop = loop = asyncio.get_running_loop()  # once: on Python 3.11 each lookup calls getpid()
        #: Resolved with the Task (terminal or interrupted) or the Message reply; or the error that ended it.
        self.settled: asyncio.Future[Task | Message] = loop.create_future()
        self.runner: asyncio.Task[None] | None = None
        #: Blocking SendMessage calls waiting for this run to settle.
        self.waiters = 0
        #: Whether the task id is revealed before the task settles (streaming or returnImmediately).
        self.observed = spec.observed
        self.replied = False
        #: Set once a commit failed: the run is over and every further commit raises it.
        self.failure: A2AError | None = None
        self._dirty = False
        #: The version the commit under way (or the last one) writes: a flush it covers is not needed.
        self._covering = 0
        #: YIELD_EVERY, or BACKLOG_YIELD_EVERY while the bus says a subscriber holds a backlog.
        self._yield_every = YIELD_EVERY
        self._flusher: asyncio.Task[None] | None = None
        self._expiring: asyncio.Future[None] | None = None
        #: The task's push configs (id -> delivery shape): each commit queues its events for them.
        self.push: dict[str, str] = dict(spec.push)
        #: Configs to store with the next commit.
        self.push_records: list[PushConfigRecord] = list(spec.push_records)
        #: On a bus other processes share: follows this task's events for an end made elsewhere.
        self._watcher: asyncio.Task[None] | None = None
        #: The watcher waits for the task's first commit (a task no store holds yet is known to nobody else).
        self._watch_deferred = False
        #: The idempotency claim of the request, made with the next commit (the first, before any work).
        self.claim: Claim | None = spec.claim
        self.replying_to: Keyed | None = spec.replying_to

    def _take(self, spec: RunSpec) -> None:
        """The task before this run (None for a new task); the live task and its version; what the store
        holds of it (``committed``, ``stored``)."""
        origin, message = spec.origin, spec.message
        self.previous = origin.task if origin is not None else None
        self.task = self.previous
        turn = origin is not None and not spec.resumed
        if origin is not None and turn:
            # The message is being worked on from now: stored so, no other process takes the turn too (an
            # interrupted task accepts a message), and a process that dies with it leaves it WORKING, which
            # the others recover.
            self.task = _replace(
                origin.task,
                history=[*origin.task.history, message],
                status=TaskStatus(state=TaskState.WORKING, timestamp=now()),
                generation=origin.task.generation + 1,
            )
        self.committed = origin.version if origin is not None else 0
        #: The generation of the task as the store holds it (0: nothing stored yet).
        self.committed_generation = origin.task.generation if origin is not None else 0
        #: The version the task had when this run took it (0: a new task).
        self.origin_version = self.committed
        self.version = self.committed + (1 if turn or spec.taken_over else 0)
        self.stored = origin.layout if origin is not None else None
        self.task_id = origin.task.id if origin is not None else message.task_id
        self.context_id = origin.task.context_id if origin is not None else message.context_id
        self.key = (spec.tenant, self.task_id)

    # -- committing ---------------------------------------------------------------------------------------

    def _emit(self, event: StreamResponse) -> None:
        self._pending.append((self.version, event))

    async def _commit(self) -> None:
        """Make the store hold the live task, then publish what that covers; raises the run's failure."""
        async with self._commit_lock:
            if self.failure is not None:
                raise self.failure
            task = self.task
            if task is None or self.version <= self.committed:
                return
            version, generation = self.version, task.generation
            self._covering = version
            events = [event for v, event in self._pending if v <= version]
            heard = self._heard()  # before the commit, which may be the task's first
            write = await self._write(task, version, events, heard)
            targets = self.push
            if targets:
                targets = dict(targets)  # as of this write: a config set meanwhile gets the next ones
                service = self.runtime.push
                if events and service is not None:
                    write = msgspec.structs.replace(write, deliveries=service.outgoing(events, targets))
            if self.push_records:
                write = msgspec.structs.replace(write, configs=tuple(self.push_records))
            if self.claim is not None:
                claim = msgspec.structs.replace(self.claim, task_id=self.task_id, generation=generation)
                write = msgspec.structs.replace(write, claim=claim)
            await self._store(write)
            self.committed, self.stored, self.committed_generation = version, write.layout, generation
            self.push_records.clear()
            self.claim = None
            self._publish(events, write.logged, heard)
            if self._watch_deferred:
                self._watch_deferred = False
                if not settles(task.status.state):
                    self.watch()  # the shared buses replay a task's stream to its first subscriber here
            if write.deliveries and self.runtime.push is not None:
                self.runtime.push.ready(self.tenant, self.task_id, targets, len(write.deliveries))

    async def _write(self, task: Task, version: int, events: list[StreamResponse], heard: bool) -> TaskWrite:
        """The write of ``task`` at ``version`` since the last commit; ends the run if what the executor
        produced cannot be stored (not JSON, more than a task may hold). ``heard``: whether the events' JSON
        is kept for the bus."""
        limits = self.runtime.limits
        try:
            write = write_task(
                task,
                version=version,
                base=self.committed,
                tenant=self.tenant,
                stored=self.stored,
                replaced=[i for i, v in self._replaced.items() if v > self.committed],
                events=events,
                max_log_bytes=limits.max_task_log_bytes,
                # kept for the bus only when someone reads them: a blocking call's commit runs faster
                # without (measured: 1% of a SendMessage's instructions)
                keep_logged=heard,
            )
        except (TypeError, ValueError, msgspec.EncodeError) as exc:
            log.error("task %s holds content that is not JSON: %s", self.task_id, exc)
            raise await self._abort(
                InvalidAgentResponseError(NOT_JSON_MESSAGE), NOT_JSON_MESSAGE, content=True
            ) from None
        layout = write.layout
        if layout.size > limits.max_task_bytes or layout.messages > limits.max_history_messages:
            reason = (
                f"The task grew past what one task may hold ({limits.max_task_bytes} bytes,"
                f" {limits.max_history_messages} messages), so it was stopped."
            )
            log.warning("task %s: %s", self.task_id, reason)
            raise await self._abort(InvalidAgentResponseError(reason), reason, content=True)
        return write

    async def _store(self, write: TaskWrite) -> None:
        """Commit ``write``; a failure ends the run (another process changed the task: it ends quietly)."""
        try:
            await self.runtime.store.commit(write)
        except KeyClaimedError:
            raise  # another request with the key was first: this run is dropped, nothing was stored
        except ConcurrentUpdateError:
            raise await self._lost() from None
        except Exception as exc:
            log.error("could not store task %s: %s", self.task_id, exc)
            raise await self._abort(store_failure(exc, self.runtime.limits), STORE_MESSAGE) from None

    def _heard(self) -> bool:
        """Whether the events of the commit under way may have a subscriber: one in this process, or, on a
        bus other processes share, one there. No other process can follow a task before its first commit:
        subscribing reads the task from the store first, and its id reaches the caller only in the answer,
        sent after that commit; except when the request's idempotency key was claimed first, naming the task
        (a retry of the request waits for it on the bus). So a SendMessage that makes and ends its task in
        one commit publishes nothing to Redis (measured: 3 XADDs and a PEXPIRE a request, 11% of the
        server's CPU on PostgreSQL + Redis)."""
        bus = self.runtime.bus
        if bus.subscriber_count(self.key) > 0:
            return True
        return bus.shared and (self.committed > 0 or self.replying_to is not None)

    def _publish(self, events: list[StreamResponse], logged: tuple[bytes, ...], heard: bool) -> None:
        """Publish ``events``, just committed (the oldest pending ones), with their JSON as the log holds it
        (``logged``: the newest of them, all unless the log's budget dropped the oldest), to whoever may hear
        them (see _heard)."""
        if not heard:
            del self._pending[: len(events)]
            return
        bus, key = self.runtime.bus, self.key
        skip = len(events) - len(logged)  # the oldest events the log did not keep have no JSON at hand
        backlog = False
        for i, event in enumerate(events):
            if bus.publish(key, generation_of(event), event, logged[i - skip] if i >= skip else None):
                backlog = True
        self._yield_every = BACKLOG_YIELD_EVERY if backlog else YIELD_EVERY
        del self._pending[: len(events)]

    async def _hand_on(self) -> None:
        """Let the event loop run (see YIELD_EVERY); wait for the commit under way while UNCOMMITTED_EVENTS
        events or more wait for one."""
        flusher = self._flusher
        if self.version - self.committed >= UNCOMMITTED_EVENTS and flusher is not None and not flusher.done():
            await asyncio.wait((flusher,))  # not cancelled with this run's executor: it commits for everyone
        else:
            await asyncio.sleep(0)

    def _write_behind(self) -> None:
        """Commit soon, without waiting; changes made meanwhile merge into one write."""
        if not self._dirty:
            self._dirty = True
            self._loop.call_soon(self._start_flush)

    def _start_flush(self) -> None:
        # Runs after the executor's next pause: a commit it made meanwhile, or one still under way (a store
        # that answers later, as SQLite's and PostgreSQL's do), may cover everything. A change made after
        # such a commit began writes behind again, and finds it covers less.
        if self.version > max(self.committed, self._covering) and (
            self._flusher is None or self._flusher.done()
        ):
            self._flusher = asyncio.create_task(self._flush())
        elif self._flusher is None or self._flusher.done():
            self._dirty = False

    async def _flush(self) -> None:
        while self.version > self.committed and self.failure is None:
            self._dirty = False
            try:
                await self._commit()
            except A2AError:
                break  # the run failed; fail() has told everyone
        self._dirty = False

    async def _lost(self) -> A2AError:
        """The stored task changed since this run's last commit: another process wrote it (the caller holds
        the commit lock). End the run without writing; the error further commits raise."""
        try:
            stored = await self.runtime.store.get(self.task_id, tenant=self.tenant)
        except Exception:
            stored = None
        return self._end_elsewhere(stored)

    def _end_elsewhere(self, stored: StoredTask | None) -> A2AError:
        """End this run because another process changed its task to ``stored`` (None: unknown)."""
        self._pending.clear()
        runner = self.runner
        if runner is not None and runner is not asyncio.current_task() and not runner.done():
            runner.cancel()
        result: Task | None = None
        if self.committed == self.origin_version:
            # this run had not written anything: another process took the message turn (or the task) first
            error = self._turn_taken(stored)
            self.runtime.bus.fail(self.key, error)
        elif stored is not None and stored.task.status.state.is_terminal:
            state = stored.task.status.state.value
            error = TaskNotCancelableError(
                f"Task {self.task_id} is already {state}", metadata={"taskId": self.task_id}
            )
            result = stored.task
            log.info("task %s was ended by another process (%s); its run here stops", self.task_id, state)
        else:
            error = UnsupportedOperationError(
                f"Task {self.task_id} was taken over by another server process",
                metadata={"taskId": self.task_id},
            )
            result = stored.task if stored is not None else None
            log.warning("task %s was taken over by another process; its run here stops", self.task_id)
        self.failure = error
        if stored is not None:
            self.committed, self.committed_generation = stored.version, stored.task.generation
        if not self.settled.done():
            if result is not None:
                self.settled.set_result(result)
            else:
                self.settled.set_exception(error)
                self.settled.exception()
        return error

    def _turn_taken(self, stored: StoredTask | None) -> A2AError:
        """What the caller of a run that wrote nothing is told when another process wrote its task first."""
        config = self.request.configuration
        expected = config.if_generation_match if config is not None else None
        if stored is not None and expected is not None and expected != stored.task.generation:
            return generation_mismatch(stored.task, expected)
        meta = {"taskId": self.task_id}
        if stored is not None and stored.task.status.state.is_terminal:
            state = stored.task.status.state.value
            return UnsupportedOperationError(
                f"Task {self.task_id} is {state}: a terminal task accepts no more messages. Start a new"
                " task in the same context instead.",
                metadata={**meta, "state": state},
            )
        return UnsupportedOperationError(
            f"Task {self.task_id} is still working on an earlier message; send more input when it asks for it",
            metadata=meta,
        )

    def watch(self) -> None:
        """On a bus other processes share, follow this task's events until the run ends: a terminal state
        this run did not produce (a CancelTask served by another process) stops its work at once."""
        bus = self.runtime.bus
        if bus.shared and self._watcher is None:
            floor = self.committed_generation
            sub = bus.subscribe(self.key, after=floor, ends_only=True)
            self._watcher = asyncio.create_task(
                self._watch(sub, floor), name=f"skillwire-watch-{self.task_id}"
            )

    async def _watch(self, sub: Any, floor: int) -> None:
        try:
            while self.failure is None:
                item = await sub.next()
                if item is None:
                    return
                if isinstance(item, Behind):
                    # events were shed (a burst): a terminal one among them is in the store, look there
                    seen = await self._ended_elsewhere()
                    if seen is None:
                        return
                    sub.skip_through(seen)
                    continue
                generation, event = item
                update = event.status_update
                if generation <= floor or update is None or not update.status.state.is_terminal:
                    continue
                task = self.task
                if task is not None and task.status.state.is_terminal:
                    return  # this run's own end
                await self._ended_elsewhere()
                return
        except A2AError:
            return  # the bus failed: the next commit still finds out
        finally:
            sub.close()

    async def _ended_elsewhere(self) -> int | None:
        """None if the store holds a change of the task this run did not make (then the run ends here), else
        the generation the store holds (what the watcher has now seen)."""
        async with self._commit_lock:  # after a commit of this run under way, if any
            if self.failure is not None:
                return None
            try:
                stored = await self.runtime.store.get(self.task_id, tenant=self.tenant)
            except Exception:
                return self.committed_generation  # the next commit finds out
            if stored is None:
                return self.committed_generation
            if stored.version > self.committed:
                self._end_elsewhere(stored)
                return None
            return stored.task.generation

    async def _abort(self, error: A2AError, reason: str, *, content: bool = False) -> A2AError:
        await self.fail(error, reason, content=content)
        return self.failure or error

    async def fail(self, error: A2AError, reason: str, *, content: bool = False) -> None:
        """End the run because its state cannot be stored as it is (the caller holds the commit lock).

        ``content``: the store works, but what the executor produced cannot be stored (not JSON, too large);
        a task of which nothing was stored yet is then stored as failed, with the message that started it."""
        if self.failure is not None:
            return
        self.failure = error
        self._pending.clear()
        runner = self.runner
        if runner is not None and runner is not asyncio.current_task() and not runner.done():
            runner.cancel()
        fresh = None
        if content and self.previous is None:
            fresh = Task(
                id=self.task_id,
                context_id=self.context_id,
                status=TaskStatus(state=TaskState.SUBMITTED, timestamp=now()),
                history=[self.message],
            )
        repaired = await self.runtime.repair(self.key, reason, fresh)
        if repaired is not None:
            self.committed, self.committed_generation = repaired[1], repaired[0].generation
            if not self.settled.done():
                self.settled.set_result(repaired[0])
            return
        self.runtime.bus.fail(self.key, error)
        if not self.settled.done():
            self.settled.set_exception(error)
            self.settled.exception()  # retrieved: a caller that went away must not leave it unobserved

    # -- applying events (the caller holds the lock) -------------------------------------------------------

    async def _materialize(self) -> None:
        task = Task(
            id=self.task_id,
            context_id=self.context_id,
            status=TaskStatus(state=TaskState.SUBMITTED, timestamp=now()),
            history=[self.message],
            generation=1,
            metadata={"skillId": self.skill_id} if self.skill_id else None,  # which skill runs it
        )
        self.task = task
        self.version = 1
        self._emit(StreamResponse(task=snapshot(task)))
        if self.observed:
            # Someone learns the task id now (a stream, an immediate answer): commit it first.
            await self._commit()
        else:
            # A blocking caller learns the id only when the task settles, which commits; until then the
            # creation is written behind and usually merges with that commit.
            self._write_behind()

    async def _apply_status(self, state: TaskState, message: Message | None) -> Task:
        if self.task is None:
            await self._materialize()
        assert self.task is not None
        self.task = task = with_status(self.task, state, message)
        self.version += 1
        self._emit(status_event(task))
        if settles(state):
            await self._commit()
            if not self.settled.done():
                self.settled.set_result(snapshot(task))
        else:
            self._write_behind()
        return task

    # -- the emitter's entry points ------------------------------------------------------------------------

    async def reply(self, message: Message) -> None:
        async with self.lock:
            if self.task is not None or self.replied:
                raise InvalidAgentResponseError("a direct reply must be the only answer to a message")
            try:
                msgspec.json.encode(message)
            except (TypeError, ValueError, msgspec.EncodeError):
                raise InvalidAgentResponseError(NOT_JSON_MESSAGE) from None
            self.replied = True
            keys = self.runtime.keys
            if self.replying_to is not None and keys is not None:  # a retry of the request gets it too
                keyed = self.replying_to
                await keys.store.settle(keyed.scope, keyed.key, msgspec.json.encode(message))
            if self._heard():
                self.runtime.bus.publish(self.key, 0, StreamResponse(message=message))
            if not self.settled.done():
                self.settled.set_result(message)

    async def set_status(self, state: TaskState, message: Message | None) -> None:
        if self.replied:
            raise InvalidAgentResponseError("the agent already replied with a message")
        async with self.lock:
            task = self.task
            if (
                state is TaskState.WORKING
                and message is None
                and task is not None
                and task.status.state is TaskState.WORKING
                and task.status.message is None
            ):
                return  # already so (a continued task works from the moment its message is taken)
            await self._apply_status(state, message)
        if self.version % self._yield_every == 0:
            await self._hand_on()

    async def add_artifact(self, artifact: Artifact, *, append: bool, last_chunk: bool) -> None:
        if self.replied:
            raise InvalidAgentResponseError("the agent already replied with a message")
        if self.accepted_output_modes:
            await self._refuse_unaccepted(artifact)
        lock = self.lock
        if lock.locked() or self.task is None:
            async with lock:
                if self.task is None:
                    await self._materialize()
                self._append_artifact(artifact, append, last_chunk)
        else:
            # Nothing to wait for, and nothing below awaits: taking the lock would change nothing but the
            # cost (a stream's every chunk comes here).
            self._append_artifact(artifact, append, last_chunk)
        if self.version % self._yield_every == 0:
            await self._hand_on()

    def _append_artifact(self, artifact: Artifact, append: bool, last_chunk: bool) -> None:
        """Apply an artifact (or a chunk of one) to the live task, one generation on, and emit its event."""
        if self.failure is not None:
            raise self.failure
        task = self.task
        assert task is not None
        if task.status.state.is_terminal:
            raise InvalidAgentResponseError(f"task {self.task_id} is already {task.status.state.value}")
        self.version += 1
        task.generation += 1
        for i, existing in enumerate(task.artifacts):
            if existing.artifact_id == artifact.artifact_id:
                if append:
                    existing.parts.extend(artifact.parts)
                else:
                    task.artifacts[i] = _own(artifact)
                    self._replaced[i] = self.version
                break
        else:
            task.artifacts.append(_own(artifact))
        event = TaskArtifactUpdateEvent(
            task_id=self.task_id,
            context_id=self.context_id,
            artifact=artifact,
            append=append,
            last_chunk=last_chunk,
            generation=task.generation,
        )
        self._pending.append((self.version, StreamResponse(artifact_update=event)))  # _emit, inline
        if not self._dirty:
            self._write_behind()

    async def _refuse_unaccepted(self, artifact: Artifact) -> None:
        """Fail the task, and stop the executor, if ``artifact`` has a part of a media type the client said it
        does not accept (``acceptedOutputModes``): the part is never delivered. As at a deadline, the task is
        failed first, then the executor is cancelled: this call raises CancelledError in the executor (in
        another task of its own, InvalidAgentResponseError)."""
        refused = refused_part(artifact.parts, self.accepted_output_modes)
        if refused is None:
            return
        index, media_type = refused
        reason = (
            f"The agent produced an artifact part of type {media_type}, which the client does not accept"
            f" (acceptedOutputModes: {', '.join(self.accepted_output_modes)}), so the task was stopped."
        )
        log.warning("task %s: artifact %s part %d: %s", self.task_id, artifact.artifact_id, index, reason)
        with contextlib.suppress(TaskNotCancelableError):  # it ended meanwhile
            await self.stop(TaskState.FAILED, reason)
        if asyncio.current_task() is self.runner:
            await asyncio.sleep(0)  # where the cancellation stop() asked for reaches the executor
        raise InvalidAgentResponseError(reason)

    async def release(self) -> None:
        """Answer a blocking caller now with the task as it is; the work goes on."""
        async with self.lock:
            if self.task is None:
                await self._materialize()
            assert self.task is not None
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
        own = 1 if self._watcher is not None and not self._watcher.done() else 0
        return self.waiters + self.runtime.bus.subscriber_count(self.key) - own

    # -- lifecycle -----------------------------------------------------------------------------------------

    async def start(self, work: Work, *, eager: bool) -> None:
        """Publish the task if it already exists (or ``eager``), then run ``work`` in the background."""
        self.observed = self.observed or eager
        if self.task is not None or eager:  # else a new task, made by its first event: nothing to do yet
            async with self.lock:
                if self.task is not None and self.version > self.committed:
                    # a continued (or taken over) task: its new history is committed, and announced, first
                    previous = self.previous
                    if previous is not None and previous.status.state is not self.task.status.state:
                        self._emit(status_event(self.task))  # a subscriber sees the task work on the message
                    await self._commit()
                elif self.task is None:
                    await self._materialize()
        if self.committed:
            self.watch()
        else:  # no other process can end a task it cannot know yet: watched from its first commit, if it
            # is still going then (a blocking call's task often settles with its first commit, unwatched)
            self._watch_deferred = True
        self.runner = self._loop.create_task(self._drive(work), name=f"skillwire-task-{self.task_id}")

    async def _drive(self, work: Work) -> None:
        telemetry = self.runtime.telemetry
        span = None
        if telemetry is not None:  # this task's context is a copy of the request's: the span is its child
            span = telemetry.run(self.skill_id, self.task_id, self.context_id)
            if span is not None:  # (None: it would not be recorded)
                telemetry.attach(span)  # for this run's own context only: no detach needed
        metrics = self.runtime.metrics
        if metrics is not None:
            began = metrics.run_started()
        if self.runtime.json_logs:  # this run's own context: its lines say which task they are about
            logs.bind_task(self.task_id, self.context_id)
        expiry = None
        if self.deadline is not None:
            expiry = self._loop.call_later(self.deadline, self._expire)
        try:
            await work(TaskEvents(self))
        except asyncio.CancelledError:
            pass  # canceled by CancelTask, the deadline, shutdown or a failed commit: each settles the task
        except InvalidAgentResponseError as exc:
            if self.failure is None:
                log.warning("agent error on task %s: %s", self.task_id, exc.message)
                await self._end(TaskState.FAILED, FAILED_MESSAGE)
        except Exception:
            if self.failure is None:
                log.exception("executor failed on task %s", self.task_id)
                await self._end(TaskState.FAILED, FAILED_MESSAGE)
        else:
            await self._end(TaskState.COMPLETED, None)
        finally:
            if expiry is not None:
                expiry.cancel()
            watcher = self._watcher
            if watcher is not None and not watcher.done():
                watcher.cancel()
            self.runtime.forget(self)
            if span is not None or metrics is not None:
                state = self.task.status.state if self.task is not None else None
                name = NAMES[state] if state is not None else "UNKNOWN"
                if span is not None:
                    assert telemetry is not None
                    telemetry.end_run(span, name, state in (TaskState.FAILED, TaskState.REJECTED))
                if metrics is not None:
                    metrics.run_ended(self.skill_id, name, began)

    def _expire(self) -> None:
        """The deadline passed: fail the task first (so the executor's hooks see FAILED), then cancel it."""
        self._expiring = asyncio.ensure_future(self._fail_at_deadline())

    async def _fail_at_deadline(self) -> None:
        log.warning("task %s passed its deadline of %g s", self.task_id, self.deadline)
        text = f"The task did not finish within its time limit of {self.deadline:g} seconds."
        try:
            await self.stop(TaskState.FAILED, text)
        except (TaskNotCancelableError, InvalidAgentResponseError):
            pass  # it ended meanwhile
        except A2AError:
            pass  # the commit failed: fail() settled the run

    async def _end(self, state: TaskState, text: str | None) -> None:
        """Close the run: a task still SUBMITTED or WORKING moves to ``state``."""
        if self.replied or self.failure is not None:
            return
        async with self.lock:
            if self.task is not None and settles(self.task.status.state):
                if not self.settled.done():
                    self.settled.set_result(snapshot(self.task))
                return
            message = None
            if text is not None:
                message = agent_text(text, context_id=self.context_id, task_id=self.task_id)
            try:
                await self._apply_status(state, message)
            except A2AError:
                pass  # the commit failed: fail() settled the run and told everyone
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
