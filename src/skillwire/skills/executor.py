"""The skill executor: plugs a registry of skills into the task runtime's executor seam.

Routing: the skill is named by ``message.metadata.skillId``; with no skillId and exactly one skill, that
skill; otherwise -32602 listing the skill ids. A message continuing a task goes to the skill that task
started with (its first message is routed again by the same rules). In read-only mode the skills that are
not read-only are absent: they are not listed, not counted, and naming one is the same -32602 as naming a
skill that does not exist.

Params: the value of the message's first data part if it has one, otherwise ``{"text": <text parts>}``, or
``{<skill.text_input>: <text parts>}`` for a skill that names the property text fills. When a message
without a data part fails the input schema, the -32602 says how its text arrived and how to send data.
Input that fails the skill's input schema is refused in ``admit`` with -32602 (location and reason), before
any task exists; so is input whose validation would take more than ``schema_steps`` schema steps. Input of a
request larger than ``offload_bytes`` is validated on a worker thread, so that the event loop serves others
meanwhile. A result string becomes a text artifact, any other JSON value a data artifact; output that fails
the output schema fails the task with a clear message (details in the log), and a result that is not JSON
fails it with a reason saying where.

Deadlines: ``timeout(context)`` is the routed skill's ``executionHints.timeoutSeconds`` (None when it has
none), for the runtime to enforce. When a run is cancelled (a deadline, CancelTask, shutdown), the hooks see
the state the runtime gave the task before cancelling it (FAILED at a deadline or shutdown, CANCELED for
CancelTask); CANCELED if it gave none.

Progress that reached no one (:class:`~skillwire.errors.ProgressError`: the task ended meanwhile, or the store
could not record it) and that the handler lets go ends the run with one warning line: the task keeps the
state it has (its end, or FAILED once the runtime recorded the store's failure), and the hooks see that
state with the error.

Hooks (observers) are called after every run, in order, with an :class:`Outcome`; a failing hook is logged
and changes nothing. After a run that left the task waiting for its client (INPUT_REQUIRED, AUTH_REQUIRED)
the hooks run once the run has ended, so that a client answering at once is not refused because an
observer is still busy; the hooks of one task still see its outcomes in order.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec import UNSET

from skillwire.errors import (
    A2AError,
    InvalidParamsError,
    ProgressError,
    SkillError,
    SkillRejectedError,
    ValidationError,
)
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import Message, Part, Task
from skillwire.protocol.states import TaskState
from skillwire.security.policy import Security
from skillwire.server.tasks.executor import (
    Admission,
    Executor,
    RequestContext,
    TaskEvents,
    Work,
    refuse_parts,
)
from skillwire.skills.calls import SkillCalls
from skillwire.skills.context import (
    AuthNeeded,
    InputNeeded,
    NotJson,
    SkillContext,
    fit_output,
    json_problem,
    recorded_answers,
)
from skillwire.skills.registry import Skill, SkillRegistry

__all__ = ["Outcome", "OutcomeHook", "SkillExecutor", "params_of", "routed_skill_id"]

log = logging.getLogger("skillwire.skills")

GENERIC_FAILURE = "The skill failed while working on this task."
OUTPUT_MISMATCH = "The skill produced output that does not match its outputSchema."
NOT_JSON = "The skill returned a value that is not JSON: "
_DEFAULTS = Limits()
#: Runs a retryable skill's task gets in all: the first, and again each time the process running it died.
MAX_ATTEMPTS = 3


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How one run of a skill ended."""

    skill_id: str
    task_id: str
    context_id: str
    state: TaskState
    result: Any = None
    error: BaseException | None = None
    #: Seconds the run took, from the handler's start to its outcome.
    duration: float = 0.0

    @property
    def ok(self) -> bool:
        return self.error is None and self.state is not TaskState.FAILED


OutcomeHook = Callable[[Outcome], Awaitable[None] | None]


def _outcome(
    skill: Skill, ctx: SkillContext, state: TaskState, result: Any, error: BaseException | None, began: float
) -> Outcome:
    return Outcome(
        skill_id=skill.id,
        task_id=ctx.task_id,
        context_id=ctx.context_id,
        state=state,
        result=result,
        error=error,
        duration=time.monotonic() - began,
    )


class _OutputMismatch(Exception):
    def __init__(self, error: ValidationError) -> None:
        super().__init__(str(error))
        self.error = error


def params_of(message: Message, text_input: str | None = None) -> Any:
    """The skill's input: the first data part's value, else ``{text_input or "text": <the text parts>}``."""
    for part in message.parts:
        if part.data is not UNSET:
            return part.data
    return {text_input or "text": message.text()}


def routed_skill_id(message: Message, skill_ids: Sequence[str]) -> str:
    """The id, among the served ``skill_ids``, of the skill that ``message`` (a task's first message) goes
    to: :meth:`SkillExecutor.route`'s rules, for whoever must route as it does (``MockAgent``)."""
    wanted = (message.metadata or {}).get("skillId")
    if wanted is not None:
        if not isinstance(wanted, str) or wanted not in skill_ids:
            raise _unknown_skill(f"unknown skillId {wanted!r}", skill_ids)
        return wanted
    if len(skill_ids) == 1:
        return skill_ids[0]
    raise _unknown_skill("message.metadata.skillId is required: this agent has several skills", skill_ids)


def _unknown_skill(reason: str, skill_ids: Sequence[str]) -> InvalidParamsError:
    ids = sorted(skill_ids)
    return InvalidParamsError(
        f"{reason}; skills: {', '.join(ids) or '(none)'}",
        field_violations=[("params.message.metadata.skillId", f"one of: {', '.join(ids)}")],
        metadata={"skills": ",".join(ids)},
    )


def _has_data(message: Message) -> bool:
    return any(part.data is not UNSET for part in message.parts)


def _text_hint(skill: Skill, text: str) -> str:
    """How a text message's input arrived, and how to send data instead (for a refused text message)."""
    shown = text if len(text) <= 40 else text[:40] + "..."
    arrived = json.dumps({skill.text_input or "text": shown}, ensure_ascii=False)
    return (
        f" (a message without a data part arrives as {arrived}; to send the input as data, put it in a data"
        f" part: skillwire send URL --skill {skill.id} --data '{{...}}', or"
        f" client.send(skill={skill.id!r}, data={{...}}))"
    )


class SkillExecutor(Executor):
    """Runs the skills of ``registry`` for the task runtime.

    ``schema_steps`` bounds each validation of a skill's input or output (``Limits.schema_steps``; None: the
    compiled schema's own default); ``offload_bytes`` is the request size above which input is validated on
    a worker thread (``Limits.offload_decode_bytes``; None: never); ``default_output_modes`` are the
    agent's, for the skills that declare no outputModes (see :func:`~skillwire.skills.context.fit_output`).
    """

    def __init__(
        self,
        registry: SkillRegistry,
        *,
        hooks: Sequence[OutcomeHook] = (),
        read_only: bool = False,
        schema_steps: int | None = _DEFAULTS.schema_steps,
        offload_bytes: int | None = _DEFAULTS.offload_decode_bytes,
        security: Security | None = None,
        default_output_modes: Sequence[str] = (),
    ) -> None:
        self.registry = registry
        #: the agent's defaultOutputModes: what a skill that declares no outputModes must produce
        self.default_output_modes = list(default_output_modes)
        #: the agent's policy: a skill's securityRequirements are checked with it when the skill is chosen
        self.security = security
        self.hooks = list(hooks)
        #: per task, the hooks still running for an outcome that left it waiting for its client
        self._pending_hooks: dict[str, asyncio.Task[None]] = {}
        self.read_only = read_only
        self.schema_steps = schema_steps
        self.offload_bytes = offload_bytes
        #: the skills as one skill calls another (``ctx.skills``: a model-backed skill's tools)
        self.calls = SkillCalls(registry, read_only=read_only, security=security, schema_steps=schema_steps)

    # -- routing ----------------------------------------------------------------------------------------

    def serves(self, skill: Skill) -> bool:
        """Whether ``skill`` is served: every skill, or in read-only mode only the read-only ones."""
        return skill.read_only or not self.read_only

    def served(self) -> list[Skill]:
        return [skill for skill in self.registry if self.serves(skill)]

    def route(self, message: Message) -> Skill:
        wanted = (message.metadata or {}).get("skillId")
        if wanted is not None:
            skill = self.registry.get(wanted) if isinstance(wanted, str) else None
            if skill is None or not self.serves(skill):
                raise self._unknown(f"unknown skillId {wanted!r}")
            return skill
        if not self.read_only and len(self.registry) == 1:
            return next(iter(self.registry))
        served = self.served() if self.read_only else []
        if len(served) == 1:
            return served[0]
        raise self._unknown("message.metadata.skillId is required: this agent has several skills")

    def _unknown(self, reason: str) -> InvalidParamsError:
        return _unknown_skill(reason, [s.id for s in self.served()])

    def _skill_for(self, context: RequestContext) -> Skill:
        origin = (
            context.task.history[0] if context.task is not None and context.task.history else context.message
        )
        return self.route(origin)

    def timeout(self, context: RequestContext) -> float | None:
        """Seconds the run for ``context`` may take: its skill's ``executionHints.timeoutSeconds``, or None
        (no hint, or no skill to route to) for the runtime's agent-wide default."""
        try:
            return self._skill_for(context).timeout_seconds
        except A2AError:
            return None

    def skill_id(self, context: RequestContext) -> str:
        """The routed skill's id ("" when the message routes to none)."""
        try:
            return self._skill_for(context).id
        except A2AError:
            return ""

    def output_modes(self, skill: Skill) -> list[str]:
        """The media types ``skill``'s results and artifacts must be: its outputModes, else the agent's
        defaultOutputModes (empty: any)."""
        return skill.agent_skill.output_modes or self.default_output_modes

    def input_modes(self, context: RequestContext) -> list[str] | None:
        """The media types the routed skill accepts (its inputModes), or None for the agent's
        defaultInputModes; a routing error (no such skill) is raised as ``admit`` would."""
        return self._skill_for(context).agent_skill.input_modes or None

    # -- the executor seam --------------------------------------------------------------------------------

    async def admission(self, context: RequestContext, input_modes: Sequence[str] = ()) -> Admission:
        """Route the message once, then check its parts against the skill's inputModes (else the agent's
        ``input_modes``) and its input, before any task exists: the work that runs the skill, with the
        skill's timeout and id."""
        skill = self._skill_for(context)
        refuse_parts(context.message, skill.agent_skill.input_modes or input_modes)
        work = await self._admitted(skill, context)
        return Admission(work=work, timeout=skill.timeout_seconds, skill_id=skill.id)

    async def admit(self, context: RequestContext) -> Work:
        """Route the message and check its input before any task exists; the work that runs the skill."""
        return await self._admitted(self._skill_for(context), context)

    async def _admitted(self, skill: Skill, context: RequestContext) -> Work:
        if self.security is not None and skill.security_sets:
            # on top of the agent's requirements, which the request met at the door; on every turn
            self.security.authorize(context.call.principal, skill.security_sets, f"Skill {skill.id!r}")
        if context.task is not None:
            return functools.partial(self._next_turn, skill, context)
        params = await self._checked_input(skill, context)
        return functools.partial(self._first_turn, skill, context, params)

    async def execute(self, context: RequestContext, events: TaskEvents) -> None:
        work = await self.admit(context)
        await work(events)

    async def _checked_input(self, skill: Skill, context: RequestContext) -> Any:
        """The message's params, validated against the skill's input schema (InvalidParamsError if not)."""
        raw = params_of(context.message, skill.text_input)
        try:
            if self.offload_bytes is not None and context.call.request_bytes > self.offload_bytes:
                return await asyncio.to_thread(skill.validate_input, raw, max_steps=self.schema_steps)
            return skill.validate_input(raw, max_steps=self.schema_steps)
        except ValidationError as exc:
            where = exc.instance_path or "/"
            hint = "" if _has_data(context.message) else _text_hint(skill, context.message.text())
            raise InvalidParamsError(
                f"Invalid input for skill {skill.id!r}: {where}: {exc.reason}{hint}",
                field_violations=[(f"params.message.input{exc.instance_path}", exc.reason)],
                metadata={"skillId": skill.id, "instancePath": where, "schemaPath": exc.schema_path or "/"},
            ) from None

    async def _first_turn(
        self, skill: Skill, context: RequestContext, params: Any, events: TaskEvents
    ) -> None:
        ctx = SkillContext(
            skill,
            events,
            message=context.message,
            call=context.call,
            task=None,
            params=params,
            output_modes=self.output_modes(skill),
            skills=self.calls,
        )
        await self._run(skill, ctx, skill.handler, params)

    async def _next_turn(self, skill: Skill, context: RequestContext, events: TaskEvents) -> None:
        """An answer to a question: the task works again, and the handler runs from the first message with
        every recorded answer (it reads them through ``ctx.ask``)."""
        task = context.task
        assert task is not None
        await events.working()
        first = task.history[0] if task.history else context.message
        params = skill.validate_input(params_of(first, skill.text_input), max_steps=self.schema_steps)
        ctx = SkillContext(
            skill,
            events,
            message=context.message,
            call=context.call,
            task=task,
            params=params,
            answers=recorded_answers([*task.history, context.message]),
            output_modes=self.output_modes(skill),
            skills=self.calls,
        )
        await self._run(skill, ctx, skill.handler, params)

    def resume(self, task: Task) -> Work | None:
        """Take back a task whose skill delegated its work, so following goes on after a restart; or run a
        retryable skill's task again from its first message (at most MAX_ATTEMPTS runs in all)."""
        delegation = (task.metadata or {}).get("delegation")
        if not isinstance(delegation, dict):
            return self._retry(task)
        skill = self.registry.get(str(delegation.get("skillId")))
        if skill is None or skill.follow is None or not self.serves(skill):
            return None
        follow = skill.follow
        ref = delegation.get("ref")

        async def carry_on(events: TaskEvents) -> None:
            first = task.history[0] if task.history else None
            call = events.call  # the task's owner, as the runtime knows it from where the task is stored
            scopes = delegation.get("scopes")
            if call.principal.authenticated and isinstance(scopes, list):
                granted = frozenset(str(s) for s in scopes)
                principal = msgspec.structs.replace(
                    call.principal, scopes=granted, granted={call.principal.scheme: granted}
                )
                call = msgspec.structs.replace(call, principal=principal)
            ctx = SkillContext(
                skill,
                events,
                message=first or events.agent_message("(resumed)"),
                call=call,
                task=task,
                params=params_of(first, skill.text_input) if first is not None else None,
                output_modes=self.output_modes(skill),
                skills=self.calls,
            )
            ctx.delegated = ref
            await self._run(skill, ctx, follow, ref, resumed=True)

        return carry_on

    def _retry(self, task: Task) -> Work | None:
        if not task.history:
            return None
        try:
            skill = self.route(task.history[0])
        except A2AError:
            return None
        attempt = (task.metadata or {}).get("attempt", 1)
        if not skill.retryable or not isinstance(attempt, int) or attempt >= MAX_ATTEMPTS:
            return None

        async def again(events: TaskEvents) -> None:
            await events.set_metadata("attempt", attempt + 1)
            first = task.history[0]
            params = skill.validate_input(params_of(first, skill.text_input), max_steps=self.schema_steps)
            ctx = SkillContext(
                skill,
                events,
                message=first,
                call=events.call,
                task=task,
                params=params,
                answers=recorded_answers(task.history),
                output_modes=self.output_modes(skill),
                skills=self.calls,
            )
            await self._run(skill, ctx, skill.handler, params)

        return again

    # -- running a handler to its outcome -----------------------------------------------------------------

    async def _run(
        self,
        skill: Skill,
        ctx: SkillContext,
        handler: Callable[[Any, SkillContext], Awaitable[Any]],
        argument: Any,
        *,
        resumed: bool = False,
    ) -> None:
        """Run ``handler(argument, ctx)`` (the skill's handler, or its follower) to an outcome: the result
        becomes an artifact and the task completes, unless the handler left it waiting for the client."""
        events = ctx.events
        state = TaskState.COMPLETED
        result: Any = None
        error: BaseException | None = None
        began = time.monotonic()
        try:
            result = await handler(argument, ctx)
            if ctx.delegated is not None and not resumed:
                assert skill.follow is not None
                result = await skill.follow(ctx.delegated, ctx)
            if result is not None:
                await self._result(skill, ctx, result)
            current = events.state
            if current is not None and current.is_interrupted:
                state = current  # the handler asked for input or authorization and returned
            elif self.hooks:
                await events.complete()  # hooks run once the task has its final state
            # (without hooks, returning lets the runtime complete the task: one step fewer)
        except _OutputMismatch as bad:
            error = bad.error
            state = TaskState.FAILED
            log.error(
                "skill %s output does not match its outputSchema on task %s: %s",
                skill.id,
                ctx.task_id,
                bad.error,
            )
            await events.fail(OUTPUT_MISMATCH)
        except NotJson as bad:
            error = bad
            state = TaskState.FAILED
            log.error("skill %s on task %s: %s", skill.id, ctx.task_id, bad.reason)
            await events.fail(bad.reason)
        except InputNeeded as need:
            state = TaskState.INPUT_REQUIRED
            await events.status(TaskState.INPUT_REQUIRED, need.prompt)
        except AuthNeeded as need:
            state = TaskState.AUTH_REQUIRED
            await events.status(TaskState.AUTH_REQUIRED, need.prompt)
        except SkillError as exc:
            error = exc
            state = TaskState.REJECTED if isinstance(exc, SkillRejectedError) else TaskState.FAILED
            await events.status(state, exc.message)
        except ProgressError as lost:
            # The task ended meanwhile, or its store failed (the runtime fails it): nothing is left to report.
            error = lost
            current = events.state
            state = current if current is not None and current.is_terminal else TaskState.FAILED
            log.warning("skill %s on task %s stopped: %s", skill.id, ctx.task_id, lost.message)
        except asyncio.CancelledError as exc:
            if self.hooks:
                # The runtime ends the task before it cancels the run (a deadline or shutdown: FAILED,
                # CancelTask: CANCELED): the hooks see that state, never a success.
                current = events.state
                ended = current if current is not None and current.is_terminal else TaskState.CANCELED
                await self._notify(_outcome(skill, ctx, ended, None, exc, began))
            raise
        except Exception as exc:
            error = exc
            state = TaskState.FAILED
            log.exception("skill %s failed on task %s", skill.id, ctx.task_id)
            await events.fail(GENERIC_FAILURE)
        if not self.hooks:
            return
        outcome = _outcome(skill, ctx, state, result, error, began)
        if state.is_interrupted:  # the client may answer at once: the run ends now, its observers after
            self._notify_later(outcome)
        else:
            await self._notify(outcome)

    async def _result(self, skill: Skill, ctx: SkillContext, result: Any) -> None:
        """The result as the task's artifact: JSON (as the return type says), valid against the output
        schema, in a form the output modes take."""
        result = skill.output_json(result)
        problem = json_problem(result)
        if problem is not None:
            raise NotJson(NOT_JSON + problem)
        try:
            skill.validate_output(result, max_steps=self.schema_steps)
        except ValidationError as exc:
            raise _OutputMismatch(exc) from None
        content = result if isinstance(result, str) else [Part(data=result, media_type="application/json")]
        await ctx.events.artifact(fit_output(content, ctx.output_modes, "a result"), name="result")

    def _notify_later(self, outcome: Outcome) -> None:
        """Call the hooks once this run has ended (after the task's earlier outcomes)."""
        task_id = outcome.task_id
        earlier = self._pending_hooks.get(task_id)
        notified = asyncio.get_running_loop().create_task(
            self._notify(outcome, after=earlier), name=f"skillwire-hooks-{task_id}"
        )
        self._pending_hooks[task_id] = notified

        def done(finished: asyncio.Task[None]) -> None:
            if self._pending_hooks.get(task_id) is finished:
                del self._pending_hooks[task_id]

        notified.add_done_callback(done)

    async def _notify(self, outcome: Outcome, *, after: asyncio.Task[None] | None = None) -> None:
        """Call the hooks with ``outcome``, once those of the task's previous outcome (``after``; by default
        the ones still running) are done."""
        earlier = after if after is not None else self._pending_hooks.get(outcome.task_id)
        if earlier is not None and earlier is not asyncio.current_task():
            await asyncio.shield(earlier)  # the hooks of this task's previous outcome come first
        for hook in self.hooks:
            try:
                maybe = hook(outcome)
                if maybe is not None:
                    await maybe
            except Exception:
                log.exception("outcome hook %r failed for task %s", hook, outcome.task_id)
