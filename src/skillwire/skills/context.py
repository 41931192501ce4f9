"""What a skill handler sees: ``ctx``, the request and its progress sink.

What the call is: ``ctx.request_id`` (the caller's ``X-Request-Id``, or the id made up for the request: the
one on its log lines and span), ``ctx.deadline`` and ``ctx.time_left()`` (the run's time limit or the
caller's gRPC deadline, whichever is first), ``ctx.principal``, ``ctx.tenant``.

Progress tells the handler when it reached no one: ``ctx.working``, ``ctx.artifact`` and the others raise
:class:`~skillwire.errors.TaskClosedError` when the task has already ended (canceled, past its deadline,
ended by another process) and :class:`~skillwire.errors.ProgressNotStoredError` when the store could not
record the update (the run is then over and the task failed). Both are :class:`~skillwire.errors.ProgressError`:
a handler may catch them to clean up; one it lets go ends the run quietly (one line in the log, the task
keeps the state it has). Terminal states belong to the framework: the handler returns (completed), raises a
:class:`SkillError` (failed or rejected) or raises anything else (failed, with a generic message).

Multi-turn, by replay: ``answer = await ctx.ask("Which city?")`` puts the task in INPUT_REQUIRED and ends the
run. When the client answers (a message with the task's id), the handler runs again from the start;
``ctx.ask`` now returns the recorded answers in order, and progress calls are silent until the handler has
caught up with the last answer (what it reported then is already in the task). Because every turn replays
from the task's history, a task waiting for input survives a server restart. The contract: a handler must
reach the same ``ask`` calls in the same order when given the same answers, and work done before an
``ask`` may run again.

Delegation: ``await ctx.delegate(ref)`` hands the task to work that goes on elsewhere (a job, a release, a
pipeline). The blocking caller is answered at once with the WORKING task; the skill's ``follow(ref, ctx)``
then follows the external work and its result completes the task. ``ref`` is committed with the task, so
after a restart following resumes where the server left it.

Values a handler hands over (its result, a data artifact) must be JSON: ``dict`` with string keys,
``list``/``tuple``, ``str``, ``int``, finite ``float``, ``bool``, ``None`` (a msgspec Struct result is converted
first). Anything else (``object()``, a set, bytes, NaN) fails the task with :class:`NotJson`'s reason, which
says where the value stops being JSON, instead of a task that cannot be stored.

Output modes: a skill's declared ``outputModes`` (else the agent's ``defaultOutputModes``) are honoured by
:func:`fit_output`, for results and ``ctx.artifact`` alike. A text that the modes do not take but that
``application/json`` does becomes a data part holding the same string (exact: the JSON string is the
text); any other part the modes do not take fails the task with :class:`NotInOutputModes`'s reason.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from msgspec import UNSET

from skillwire.errors import A2AError, ProgressNotStoredError, SkillwireError, TaskClosedError
from skillwire.protocol.media import accepts, media_type_of
from skillwire.protocol.models import Artifact, Message, Part, Role, Task
from skillwire.protocol.states import TaskState
from skillwire.security.principal import Principal
from skillwire.server.context import CallContext
from skillwire.server.tasks.executor import TaskEvents

if TYPE_CHECKING:
    from skillwire.skills.calls import SkillCalls
    from skillwire.skills.registry import Skill

__all__ = [
    "ASK_KEY",
    "AUTH_KEY",
    "Answer",
    "AuthNeeded",
    "InputNeeded",
    "NotInOutputModes",
    "NotJson",
    "SkillContext",
    "fit_output",
    "json_problem",
]

log = logging.getLogger("skillwire.skills")

#: Metadata key marking an agent message as the prompt of the n-th ``ctx.ask`` of a task.
ASK_KEY = "skillwireAsk"
#: Metadata key of the status message of ``ctx.require``: what the task waits for (scheme names, scopes).
AUTH_KEY = "skillwireAuthRequired"
_PROGRESS_STATES = frozenset({TaskState.WORKING, TaskState.INPUT_REQUIRED, TaskState.AUTH_REQUIRED})


@dataclass(frozen=True, slots=True)
class Answer:
    """The client's reply to ``ctx.ask``."""

    message: Message

    @property
    def text(self) -> str:
        return self.message.text()

    @property
    def data(self) -> Any:
        """The value of the reply's first data part, or None."""
        return next((p.data for p in self.message.parts if p.data is not UNSET), None)


class InputNeeded(Exception):
    """Raised by ``ctx.ask`` when the answer is not known yet; the executor turns it into INPUT_REQUIRED."""

    def __init__(self, prompt: Message) -> None:
        super().__init__(prompt.text())
        self.prompt = prompt


class AuthNeeded(Exception):
    """Raised by ``ctx.require`` when the caller's credentials fall short; the executor turns it into
    AUTH_REQUIRED."""

    def __init__(self, prompt: Message) -> None:
        super().__init__(prompt.text())
        self.prompt = prompt


class NotJson(TypeError):
    """A value from a skill that JSON cannot carry; ``reason`` is what the client is told."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotInOutputModes(NotJson):
    """A result or artifact part of a media type the skill's output modes do not include."""


def fit_output(content: str | Sequence[Part], modes: Sequence[str], what: str) -> str | list[Part]:
    """``content`` (a text, or parts) in a form ``modes`` take: unchanged when they take it; a text as a
    JSON string data part when only ``application/json`` takes it; else :class:`NotInOutputModes`. No
    modes: anything goes. ``what`` names the content in the reason ("a result")."""
    if not modes:
        return content if isinstance(content, str) else list(content)
    parts = [Part(text=content)] if isinstance(content, str) else list(content)
    for i, part in enumerate(parts):
        media_type = media_type_of(part)
        if accepts(modes, media_type):
            continue
        if part.text is not UNSET and not part.media_type and accepts(modes, "application/json"):
            parts[i] = Part(data=part.text, media_type="application/json", metadata=part.metadata)
            continue
        raise NotInOutputModes(
            f"The skill produced {what} of type {media_type}, which its outputModes"
            f" ({', '.join(modes)}) do not include."
        )
    return content if isinstance(content, str) and parts[0].text is not UNSET else parts


_SCALARS = (str, int, bool, type(None))


def json_problem(value: Any) -> str | None:
    """Where ``value`` stops being JSON (``/items/2 is a set``), or None when it is JSON.

    >>> json_problem({"tags": {"a"}})
    '/tags is a Python set, not a JSON value'
    """
    if isinstance(value, _SCALARS):
        return None  # the common result, a string, costs one check
    pending: list[tuple[Any, str]] = [(value, "")]
    while pending:
        item, where = pending.pop()
        if isinstance(item, _SCALARS):
            continue
        if isinstance(item, float):
            if not math.isfinite(item):
                return f"{where or '/'} is {item!r}, which JSON has no number for"
        elif isinstance(item, dict):
            for key, member in item.items():
                if not isinstance(key, str):
                    return f"{where or '/'} has a key that is not a string: {type(key).__name__} {key!r:.40}"
                pending.append((member, f"{where}/{key.replace('~', '~0').replace('/', '~1')}"))
        elif isinstance(item, list | tuple):
            pending.extend((member, f"{where}/{i}") for i, member in enumerate(item))
        else:
            return f"{where or '/'} is a Python {type(item).__name__}, not a JSON value"
    return None


def recorded_answers(history: Sequence[Message]) -> list[Message]:
    """The client's answer to each ``ask`` prompt in ``history``, in order (as far as answered)."""
    answers: list[Message] = []
    waiting = False
    for message in history:
        if message.role is Role.AGENT and message.metadata and ASK_KEY in message.metadata:
            waiting = True
        elif message.role is Role.USER and waiting:
            answers.append(message)
            waiting = False
    return answers


class SkillContext:
    __slots__ = (
        "_answers",
        "_asked",
        "call",
        "delegated",
        "events",
        "message",
        "output_modes",
        "params",
        "skill",
        "skills",
        "task",
    )

    def __init__(
        self,
        skill: Skill,
        events: TaskEvents,
        *,
        message: Message,
        call: CallContext,
        task: Task | None,
        params: Any,
        answers: Sequence[Message] = (),
        output_modes: Sequence[str] | None = None,
        skills: SkillCalls | None = None,
    ) -> None:
        self.skill = skill
        #: The agent's other skills, to call from this one (a model-backed skill's tools; see
        #: :mod:`skillwire.skills.calls`); None where the runner offers none (a test kit of one's own).
        self.skills = skills
        self.events = events
        #: The message that started this run (for a resumed conversation: the latest answer).
        self.message = message
        self.call = call
        #: The task before this message, when the message continues one.
        self.task = task
        self.params = params
        self._answers = list(answers)
        self._asked = 0
        self.delegated: Any = None
        #: The media types the skill's results and artifacts must be (its outputModes, else the agent's
        #: defaultOutputModes; empty: any).
        self.output_modes = list(skill.agent_skill.output_modes if output_modes is None else output_modes)

    # -- what was asked -------------------------------------------------------------------------------

    @property
    def skill_id(self) -> str:
        return self.skill.id

    @property
    def task_id(self) -> str:
        return self.events.task_id

    @property
    def context_id(self) -> str:
        return self.events.context_id

    @property
    def principal(self) -> Principal:
        """Who is calling: subject, scheme, scopes and claims (anonymous when the agent declares no
        security). Work delegated with :meth:`delegate` keeps the principal that started it."""
        return self.call.principal

    @property
    def tenant(self) -> str:
        return self.call.tenant

    @property
    def request_id(self) -> str:
        """The request's id: the caller's ``X-Request-Id`` (a short printable token), else one made up for
        it; the id on the request's log lines and span (``""`` for a task taken back at start-up)."""
        return self.call.request_id

    @property
    def deadline(self) -> float | None:
        """When this run must be done, as a ``time.monotonic()`` value: the skill's ``timeoutSeconds`` (else
        the agent's ``task_timeout``) counted from the run's start, or the caller's gRPC deadline, whichever
        is first; None when there is neither. At the time limit the task is failed and the run cancelled."""
        return getattr(self.events, "deadline", None)

    def time_left(self) -> float | None:
        """Seconds until :attr:`deadline` (0 once it passed), or None without one::

        left = ctx.time_left()
        answer = await model.complete(prompt, timeout=min(left, 30) if left is not None else 30)
        """
        deadline = self.deadline
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    @property
    def accepted_output_modes(self) -> list[str]:
        """The media types the client accepts in artifacts (its ``acceptedOutputModes``; empty: any). An
        artifact, or a result, with a part of another type fails the task: choose the form with
        :meth:`accepts_output`."""
        return self.events.accepted_output_modes

    def accepts_output(self, media_type: str) -> bool:
        """Whether the client accepts an artifact part of ``media_type`` (``"image/png"``); a result string is
        ``text/plain``, any other result ``application/json``."""
        return accepts(self.events.accepted_output_modes, media_type)

    @property
    def files(self) -> list[Part]:
        """The message's file parts (``raw`` bytes or ``url``)."""
        return [p for p in self.message.parts if p.raw is not UNSET or p.url is not UNSET]

    @property
    def hints(self) -> Any:
        """The manifest's execution hints, or None."""
        return self.skill.card.execution_hints if self.skill.card is not None else None

    def prompt(self, variables: Mapping[str, Any] | None = None) -> str:
        """The manifest's body rendered with the params (and ``variables``, which take precedence)."""
        card = self.skill.card
        if card is None:
            raise SkillwireError(f"skill {self.skill.id!r} has no manifest template")
        values: dict[str, Any] = dict(self.params) if isinstance(self.params, Mapping) else {}
        values.update(variables or {})
        return card.render(values)

    @property
    def replaying(self) -> bool:
        """True while the handler is re-running turns the client already answered (progress is silent)."""
        return self._asked < len(self._answers)

    # -- progress -------------------------------------------------------------------------------------

    async def _report(self, what: str, call: Callable[[], Awaitable[Any]]) -> None:
        """Make the update ``call``; a refusal by the runtime is a ProgressError saying why."""
        if self.replaying:
            return
        try:
            await call()
        except A2AError as exc:
            state = self.events.state
            if state is not None and state.is_terminal:
                raise TaskClosedError(
                    f"{what} was not recorded: task {self.task_id} is already {state.name}",
                    task_id=self.task_id,
                    state=state.name,
                ) from exc
            raise ProgressNotStoredError(
                f"{what} was not recorded on task {self.task_id}: {exc.message}", task_id=self.task_id
            ) from exc

    async def set_state(self, state: TaskState, message: Message | str | None = None) -> None:
        """Move the task to WORKING, INPUT_REQUIRED or AUTH_REQUIRED; terminal states are the framework's.
        Raises TaskClosedError or ProgressNotStoredError when the update reached no one."""
        if state not in _PROGRESS_STATES:
            raise ValueError(f"a skill may set WORKING, INPUT_REQUIRED or AUTH_REQUIRED, not {state.value}")
        await self._report(f"the {state.name} status", lambda: self.events.status(state, message))

    async def working(self, message: Message | str | None = None) -> None:
        await self.set_state(TaskState.WORKING, message)

    async def input_required(self, message: Message | str | None = None) -> None:
        await self.set_state(TaskState.INPUT_REQUIRED, message)

    async def auth_required(self, message: Message | str | None = None) -> None:
        await self.set_state(TaskState.AUTH_REQUIRED, message)

    async def artifact(
        self,
        content: Artifact | str | Sequence[Part] | Any,
        *,
        artifact_id: str | None = None,
        name: str = "",
        append: bool = False,
        last_chunk: bool = False,
    ) -> None:
        """Emit an artifact or a chunk of one: text, parts, an Artifact, or any JSON value (a data part).

        A value that is not JSON raises :class:`NotJson`, a part the skill's output modes do not include
        :class:`NotInOutputModes` (the task then fails with its reason; see :func:`fit_output`); an artifact
        that reached no one raises TaskClosedError or ProgressNotStoredError."""
        if not isinstance(content, Artifact | str) and not _is_parts(content):
            content = [Part(data=content, media_type="application/json")]
        if not isinstance(content, str):
            parts = content.parts if isinstance(content, Artifact) else content
            for i, part in enumerate(parts):
                problem = None if part.data is UNSET else json_problem(part.data)
                if problem is not None:
                    raise NotJson(f"The skill produced an artifact that is not JSON: part {i}: {problem}")
        if isinstance(content, Artifact):
            fitted = fit_output(content.parts, self.output_modes, "an artifact part")
            if not isinstance(fitted, str) and fitted != content.parts:
                content = Artifact(
                    artifact_id=content.artifact_id,
                    name=content.name,
                    description=content.description,
                    parts=list(fitted),
                    metadata=content.metadata,
                    extensions=content.extensions,
                )
        else:
            content = fit_output(content, self.output_modes, "an artifact part")
        await self._report(
            "an artifact",
            lambda: self.events.artifact(
                content, artifact_id=artifact_id, name=name, append=append, last_chunk=last_chunk
            ),
        )

    @property
    def streaming(self) -> bool:
        """Whether a stream follows this task now (SendStreamingMessage, or SubscribeToTask): artifact
        chunks then reach a client as they are made. A blocking call or a poller only sees the end."""
        try:
            return self.events.streams > 0
        except Exception:  # events of a test kit of one's own, without streams
            return False

    def client_connected(self) -> bool:
        """Whether any client still waits on this task (a blocking call or an open stream)."""
        try:
            return self.events.watchers > 0
        except Exception:
            return False

    # -- turns and delegation -------------------------------------------------------------------------

    async def ask(self, prompt: str | Message) -> Answer:
        """The client's answer to ``prompt``: recorded (replay) or, if not given yet, asked for now."""
        index = self._asked
        if index < len(self._answers):
            self._asked += 1
            return Answer(self._answers[index])
        raise InputNeeded(self._marked(prompt, ASK_KEY, index))

    def _marked(self, content: str | Message, key: str, value: Any) -> Message:
        """An agent message for the task's status, marked in its metadata with ``key: value`` (what the
        task waits for, read back when the conversation replays)."""
        base = self.events.agent_message(content)
        return Message(
            message_id=base.message_id,
            context_id=base.context_id,
            task_id=base.task_id,
            role=Role.AGENT,
            parts=base.parts,
            metadata={**(base.metadata or {}), key: value},
        )

    async def require(
        self,
        scopes: Sequence[str] = (),
        *,
        schemes: Sequence[str] = (),
        message: str | None = None,
    ) -> Principal:
        """The caller's principal if it grants every one of ``scopes`` (through one of ``schemes`` when
        given); else the task moves to AUTH_REQUIRED with ``message`` (or one saying what is missing) and the
        run ends, as for :meth:`ask`. The client gets credentials that grant more (out of band: a new token
        with more scopes) and sends a message on the task with them; the handler then runs again from the
        start, as after an answer, and this call now returns. Entering AUTH_REQUIRED grants nothing by
        itself: the check is made on the new message's credentials, and the task stays its owner's (a token
        for another subject or scheme does not reach it)."""
        principal = self.call.principal
        wanted = frozenset(scopes)
        granted = (
            [principal.granted[n] for n in schemes if n in principal.granted]
            if schemes
            else [principal.scopes]
        )
        if principal.authenticated and any(wanted <= g for g in granted):
            return principal
        needed = ", ".join(sorted(wanted)) or "authenticated credentials"
        via = f" through {' or '.join(schemes)}" if schemes else ""
        text = (
            message
            or f"This step needs {needed}{via}: send a message on this task with credentials that grant it."
        )
        raise AuthNeeded(self._marked(text, AUTH_KEY, {"scopes": sorted(wanted), "schemes": list(schemes)}))

    async def delegate(self, ref: Any, message: str | Message | None = None) -> None:
        """Hand the task to external work identified by ``ref`` (JSON); the caller is answered now and the
        skill's ``follow(ref, ctx)`` carries the task to its end, across restarts too."""
        if self.skill.follow is None:
            raise SkillwireError(f"skill {self.skill.id!r} delegates but has no follow() to follow the work")
        delegation: dict[str, Any] = {"skillId": self.skill.id, "ref": ref}
        if self.call.principal.scopes:  # what follow() may rely on after a restart (the owner is the task's)
            delegation["scopes"] = sorted(self.call.principal.scopes)
        await self.events.set_metadata("delegation", delegation)
        await self.events.working(message or "The work continues elsewhere.")
        await self.events.release()
        self.delegated = ref


def _is_parts(value: Any) -> bool:
    return isinstance(value, list | tuple) and bool(value) and all(isinstance(p, Part) for p in value)
