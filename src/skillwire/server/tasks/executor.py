"""The executor seam: where agent logic plugs into the task runtime.

An executor is a subclass of :class:`Executor` with ``async execute(context, events)``, or a plain ``async def
f(context, events)``. ``context`` says what was asked; ``events`` is how the executor reports back: a direct
reply, or task states and artifacts. When ``execute`` returns, a task still in SUBMITTED or WORKING is
completed for it; an exception fails the task with a generic message (the traceback goes to the log, never to
the client). Cancellation arrives as ``asyncio.CancelledError`` inside ``execute``.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, NamedTuple, Protocol

import msgspec

from skillwire.errors import ContentTypeNotSupportedError
from skillwire.protocol.media import refused_part
from skillwire.protocol.models import (
    Artifact,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    Task,
    new_id,
)
from skillwire.protocol.states import TaskState
from skillwire.server.context import CallContext

__all__ = [
    "Admission",
    "Executor",
    "ExecutorFunction",
    "RequestContext",
    "RunHandle",
    "TaskEvents",
    "Work",
    "as_executor",
    "refuse_parts",
]


class RequestContext(msgspec.Struct, frozen=True):
    """One SendMessage as the executor sees it."""

    message: Message
    task_id: str
    context_id: str
    call: CallContext
    #: The task as it was before this message, when the message continues an existing task.
    task: Task | None = None
    configuration: SendMessageConfiguration | None = None
    metadata: dict[str, Any] | None = None

    @property
    def text(self) -> str:
        """The message's text parts joined by newlines."""
        return self.message.text()

    @property
    def tenant(self) -> str:
        return self.call.tenant

    @property
    def accepted_output_modes(self) -> list[str]:
        """The media types the client accepts in the answer (``configuration.acceptedOutputModes``); empty:
        any. The runtime fails a task whose artifact has a part of another type."""
        return self.configuration.accepted_output_modes if self.configuration is not None else []


Work = Callable[["TaskEvents"], Awaitable[None]]


class Admission(NamedTuple):
    """The executor's one answer about a message, before any task exists: what the run for it is built from.

    ``work``: what answers the message (None: the executor's ``execute``); ``timeout``: the seconds the run
    may take (None: the agent's ``Limits.task_timeout``); ``skill_id``: the skill the run is for ("": none,
    or not known), on the new task's ``metadata.skillId``, its trace span and its metrics. A named tuple
    (immutable; made for every message, at a third of a frozen dataclass's cost).
    """

    work: Work | None = None
    timeout: float | None = None
    skill_id: str = ""


def refuse_parts(message: Message, modes: Sequence[str]) -> None:
    """Refuse ``message`` (ContentTypeNotSupportedError) if it has a part of a media type outside ``modes``
    (empty: any)."""
    refused = refused_part(message.parts, modes)
    if refused is None:
        return
    index, media_type = refused
    listed = ", ".join(modes)
    raise ContentTypeNotSupportedError(
        f"Message part {index} is {media_type}, which this agent does not accept here; it accepts: {listed}",
        field_violations=[(f"params.message.parts[{index}]", f"media type must be one of: {listed}")],
        metadata={"mediaType": media_type, "inputModes": ",".join(modes)},
    )


class Executor(ABC):
    """Runs the agent's logic for one message: subclass it and write ``execute``.

    The other methods are optional hooks, and their defaults change nothing. The runtime asks one question
    of a message before any task exists, ``async admission(context, input_modes)``, and builds the run from
    its answer (an :class:`Admission`); by default that answer is made of the hooks below, asked in this
    order (an executor that routes a message, as the skill executor does, overrides ``admission`` to route
    it once):

    * ``input_modes(context)``: the media types the message's target accepts (a skill's inputModes); a part
      of another type is refused with ContentTypeNotSupportedError before any task exists. None (the
      default) for the agent's ``defaultInputModes``.
    * ``async admit(context)`` runs before any task exists. It may raise an A2AError to refuse the message
      (nothing is written then). It may return the ``Work`` (``async work(events)``) that answers this
      message, carrying what it learnt (a parsed input, a route) to the run in its own types; None (the
      default) runs ``execute(context, events)``.
    * ``timeout(context)``: the seconds the run for ``context`` may take; None (the default) for the agent's
      ``Limits.task_timeout``.
    * ``skill_id(context)``: the skill the run is for ("": none).
    * ``resume(task)`` is asked at start-up about each task a previous process left SUBMITTED or WORKING and
      may return the ``Work`` that carries it on, or None (the default) to let it be failed.

    ::

        class Echo(Executor):
            async def execute(self, context: RequestContext, events: TaskEvents) -> None:
                await events.reply(context.text)
    """

    async def admission(self, context: RequestContext, input_modes: Sequence[str] = ()) -> Admission:
        """Admit the message of ``context`` or refuse it (an A2AError; nothing is written then): the one
        answer the run is built from. ``input_modes``: the agent's defaultInputModes (empty: any), for a
        target that declares none."""
        modes = self.input_modes(context)
        refuse_parts(context.message, input_modes if modes is None else modes)
        work = await self.admit(context)
        return Admission(work=work, timeout=self.timeout(context), skill_id=self.skill_id(context))

    async def admit(self, context: RequestContext) -> Work | None:
        return None

    def timeout(self, context: RequestContext) -> float | None:
        return None

    def input_modes(self, context: RequestContext) -> Sequence[str] | None:
        return None

    def skill_id(self, context: RequestContext) -> str:
        """The id of the skill ``context``'s run is for, for its trace span ("": none, or not known)."""
        return ""

    def resume(self, task: Task) -> Work | None:
        return None

    @abstractmethod
    async def execute(self, context: RequestContext, events: TaskEvents) -> None: ...


ExecutorFunction = Callable[[RequestContext, "TaskEvents"], Awaitable[None]]


class _FunctionExecutor(Executor):
    def __init__(self, fn: ExecutorFunction) -> None:
        self._fn = fn

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        await self._fn(context, events)


def as_executor(obj: Executor | ExecutorFunction) -> Executor:
    """``obj`` as an Executor: an Executor as it is, an ``async def f(context, events)`` wrapped."""
    if isinstance(obj, Executor):
        return obj
    if callable(obj):
        return _FunctionExecutor(obj)
    raise TypeError(
        f"{obj!r} is neither an Executor (a subclass of skillwire.Executor) nor an async function"
    )


MessageLike = Message | str | None


class RunHandle(Protocol):
    """What :class:`TaskEvents` drives: the run of one task (:class:`~skillwire.server.tasks.run.TaskRun`),
    named here by what it does so that this module does not import the run's, which imports this one."""

    @property
    def task_id(self) -> str: ...
    @property
    def context_id(self) -> str: ...
    @property
    def call(self) -> CallContext: ...
    @property
    def task(self) -> Task | None: ...
    @property
    def accepted_output_modes(self) -> list[str]: ...
    @property
    def watchers(self) -> int: ...
    @property
    def waiters(self) -> int: ...

    async def reply(self, message: Message) -> None: ...
    async def set_status(self, state: TaskState, message: Message | None) -> None: ...
    async def add_artifact(self, artifact: Artifact, *, append: bool, last_chunk: bool) -> None: ...
    async def release(self) -> None: ...
    async def set_metadata(self, key: str, value: Any) -> None: ...


class TaskEvents:
    """The event emitter handed to an executor. Every method is a coroutine; calls are applied in order."""

    def __init__(self, run: RunHandle) -> None:
        self._run = run
        # made as the run starts: its time limit counts from now
        limit = getattr(run, "deadline", None)
        expires = None if limit is None else time.monotonic() + limit
        caller = run.call.deadline
        self._deadline = caller if expires is None else expires if caller is None else min(expires, caller)

    @property
    def deadline(self) -> float | None:
        """When this run must be done, as a ``time.monotonic()`` value: its time limit (the skill's
        ``timeoutSeconds``, else ``Limits.task_timeout``) or the caller's gRPC deadline, whichever comes
        first; None when there is neither. At the time limit the task is failed and the run cancelled."""
        return self._deadline

    @property
    def task_id(self) -> str:
        return self._run.task_id

    @property
    def context_id(self) -> str:
        return self._run.context_id

    @property
    def call(self) -> CallContext:
        """The call this run serves: its principal and tenant (for a task taken back after a restart, its
        owner as the store keeps it)."""
        return self._run.call

    @property
    def state(self) -> TaskState | None:
        """The task's current state, or None while no task exists yet."""
        task = self._run.task
        return None if task is None else task.status.state

    @property
    def accepted_output_modes(self) -> list[str]:
        """The media types the client accepts in artifacts (empty: any); an artifact with a part of another
        type fails the task."""
        return self._run.accepted_output_modes

    def agent_message(self, content: Message | str | Sequence[Part]) -> Message:
        """An agent message in this task's context (text, parts or a ready Message)."""
        if isinstance(content, Message):
            return content
        parts = [Part(text=content)] if isinstance(content, str) else list(content)
        return Message(
            message_id=new_id(),
            context_id=self.context_id,
            task_id=self.task_id,
            role=Role.AGENT,
            parts=parts,
        )

    # -- replies and states --------------------------------------------------------------------------

    async def reply(self, content: Message | str | Sequence[Part]) -> None:
        """Answer with a Message and no task. Once a task exists, this completes it with the message."""
        message = self.agent_message(content)
        if self._run.task is None:
            await self._run.reply(
                Message(
                    message_id=message.message_id,
                    context_id=self.context_id,
                    role=Role.AGENT,
                    parts=message.parts,
                    metadata=message.metadata,
                    extensions=message.extensions,
                )
            )
        else:
            await self.status(TaskState.COMPLETED, message)

    async def status(self, state: TaskState, message: MessageLike = None) -> None:
        await self._run.set_status(state, None if message is None else self.agent_message(message))

    async def submit(self, message: MessageLike = None) -> None:
        await self.status(TaskState.SUBMITTED, message)

    async def working(self, message: MessageLike = None) -> None:
        await self.status(TaskState.WORKING, message)

    async def input_required(self, message: MessageLike = None) -> None:
        await self.status(TaskState.INPUT_REQUIRED, message)

    async def auth_required(self, message: MessageLike = None) -> None:
        await self.status(TaskState.AUTH_REQUIRED, message)

    async def complete(self, message: MessageLike = None) -> None:
        await self.status(TaskState.COMPLETED, message)

    async def fail(self, message: MessageLike = None) -> None:
        await self.status(TaskState.FAILED, message)

    async def reject(self, message: MessageLike = None) -> None:
        await self.status(TaskState.REJECTED, message)

    async def release(self) -> None:
        """Answer a blocking SendMessage now, with the task as it is (typically WORKING); the work and any
        streams go on until the task ends."""
        await self._run.release()

    async def set_metadata(self, key: str, value: Any) -> None:
        """Set ``task.metadata[key]`` (committed before this returns; not a stream event)."""
        await self._run.set_metadata(key, value)

    @property
    def watchers(self) -> int:
        """How many clients are still waiting on this task: blocking callers plus open streams."""
        return self._run.watchers

    @property
    def streams(self) -> int:
        """How many open streams follow this task (SendStreamingMessage, SubscribeToTask): they see each
        event as it is made, where a blocking caller sees only the end."""
        run = self._run
        return run.watchers - run.waiters

    # -- artifacts ------------------------------------------------------------------------------------

    async def artifact(
        self,
        content: Artifact | str | Sequence[Part],
        *,
        artifact_id: str | None = None,
        name: str = "",
        description: str = "",
        append: bool = False,
        last_chunk: bool = False,
        metadata: dict[str, Any] | None = None,
    ) -> str:
        """Emit an artifact (or a chunk of one, with ``append``/``last_chunk``); returns its id."""
        if isinstance(content, Artifact):
            artifact = content
        else:
            parts = [Part(text=content)] if isinstance(content, str) else list(content)
            artifact = Artifact(
                artifact_id=artifact_id or new_id(),
                name=name,
                description=description,
                parts=parts,
                metadata=metadata,
            )
        await self._run.add_artifact(artifact, append=append, last_chunk=last_chunk)
        return artifact.artifact_id
