"""The access log: one line per request at info level on the ``skillwire.access`` logger, the same on every
binding::

    INFO skillwire.access: JSONRPC SendMessage skill=greet task=0190c2... COMPLETED 3.2 ms
    INFO skillwire.access: GRPC GetTask task=0190c2... TASK_NOT_FOUND 0.4 ms

binding, operation, the skill asked for (``message.metadata.skillId``), the task, how the request ended (the
task's state, ``MESSAGE`` for a direct reply, the error's reason, ``OK`` otherwise) and how long it took
(a stream: until it ended). ``skillwire serve`` shows it at its default ``--log-level info``; ``--log-level
warning`` hides it. A binding asks :data:`log`'s ``isEnabledFor(INFO)`` once per request and calls
:func:`line` only then, so a disabled access log costs one check.
"""

from __future__ import annotations

import logging
import time
from collections.abc import AsyncIterator
from typing import Any

from skillwire.errors import A2AError
from skillwire.protocol.models import Message, StreamResponse, Task
from skillwire.protocol.operations import Operation
from skillwire.protocol.states import NAMES

__all__ = ["Tracked", "line", "log"]

log = logging.getLogger("skillwire.access")


def line(
    binding: str,
    operation: Operation,
    params: Any,
    outcome: Any,
    started: float,
    caller: str = "",
    *,
    json_fields: bool = False,
) -> None:
    """Log one request: ``outcome`` is its result, the A2AError it answered with, or a :class:`Tracked`
    stream; ``started`` its ``time.perf_counter()`` at the start; ``caller`` the principal's owner key
    (``scheme:subject``) when the agent has security; ``json_fields``: the record also carries them as fields, for
    JSON logs (the serving option ``Observability.json_logs``)."""
    elapsed = (time.perf_counter() - started) * 1000
    task_id, state = ending(params, outcome)
    fields = [binding, operation.value]
    if caller:
        fields.append(f"caller={_printable(caller)}")
    skill = _printable(skill_of(params))
    if skill:
        fields.append(f"skill={skill}")
    task_id = _printable(task_id)
    if task_id:
        fields.append(f"task={task_id}")
    fields.append(state)
    if not json_fields:
        log.info("%s %.1f ms", " ".join(fields), elapsed)
        return
    extra: dict[str, Any] = {"binding": binding, "operation": operation.value, "outcome": state}
    if skill:
        extra["skill_id"] = skill
    if task_id:
        extra["task_id"] = task_id
    if caller:
        extra["caller"] = _printable(caller)
    extra["duration_ms"] = round(elapsed, 3)
    log.info("%s %.1f ms", " ".join(fields), elapsed, extra=extra)


def ending(params: Any, outcome: Any) -> tuple[str, str]:
    """The task a request was about (from its outcome, else its params) and how it ended: the task's state,
    ``MESSAGE``, ``OK``, or the error's reason. The access line, the span and the metrics all say this."""
    task_id, state = _ending(outcome)
    return task_id or getattr(params, "id", "") or _message_task(params), state


def refused(binding: str, error: Any, started: float, operation: str = "") -> None:
    """Log a request answered before it became a call (no or wrong credentials, a body past its budget, a
    body that is not a request): its operation when the path said it (HTTP+JSON), else ``-``, and the
    reason, so failed attempts show in the access log."""
    if log.isEnabledFor(logging.INFO):
        elapsed = (time.perf_counter() - started) * 1000
        reason = getattr(error, "reason", "REFUSED")
        log.info("%s %s %s %.1f ms", binding, operation or "-", reason, elapsed)


def _printable(text: str, limit: int = 100) -> str:
    """A caller's value (a name from a credential, a skill id, a task id) as one log field: no spaces or
    characters that are not printable, at most ``limit`` characters (a longer one ends in ``...``)."""
    if len(text) <= limit and text.isprintable() and " " not in text:  # the common case, at no cost
        return text
    cut = "".join(c if c.isprintable() and not c.isspace() else "?" for c in text[:limit])
    return cut + "..." if len(text) > limit else cut


class Tracked:
    """A stream's events passed on as they come, remembering the last task id and state seen."""

    def __init__(self, events: AsyncIterator[StreamResponse], first: StreamResponse | None = None) -> None:
        self._events = events
        self.task_id = ""
        self.state = "OK"
        if first is not None:  # pulled before the stream was handed over
            self.task_id, self.state = _event_ending(first, "", "OK")

    def __aiter__(self) -> Tracked:
        return self

    async def __anext__(self) -> StreamResponse:
        try:
            event = await anext(self._events)
        except A2AError as exc:
            self.state = exc.reason
            raise
        self.task_id, self.state = _event_ending(event, self.task_id, self.state)
        return event

    def next_nowait(self) -> StreamResponse | None:
        """The wrapped stream's next event if it is at hand now; None if not, or if it cannot tell."""
        poll = getattr(self._events, "next_nowait", None)
        event = poll() if poll is not None else None
        if event is not None:
            self.task_id, self.state = _event_ending(event, self.task_id, self.state)
        return event

    def logged(self, event: StreamResponse) -> bytes | None:
        """The wrapped stream's logged JSON of ``event``, if it can tell."""
        logged = getattr(self._events, "logged", None)
        return logged(event) if logged is not None else None

    async def aclose(self) -> None:
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()


def _ending(outcome: Any) -> tuple[str, str]:
    task = getattr(outcome, "task", None)  # a SendMessageResponse (the most frequent answer, first)
    if isinstance(task, Task):
        return task.id, NAMES[task.status.state]
    if isinstance(outcome, Tracked):
        return outcome.task_id, outcome.state
    if isinstance(outcome, A2AError):
        return "", outcome.reason
    if isinstance(outcome, Task):
        return outcome.id, NAMES[outcome.status.state]
    if isinstance(outcome, Message):
        return outcome.task_id or "", "MESSAGE"
    if isinstance(getattr(outcome, "message", None), Message):
        return "", "MESSAGE"
    return "", "OK"


def _event_ending(event: StreamResponse, task_id: str, state: str) -> tuple[str, str]:
    if event.task is not None:
        return event.task.id, NAMES[event.task.status.state]
    if event.status_update is not None:
        return event.status_update.task_id, NAMES[event.status_update.status.state]
    if event.artifact_update is not None:
        return event.artifact_update.task_id, state
    if event.message is not None:
        return event.message.task_id or task_id, "MESSAGE"
    return task_id, state


def skill_of(params: Any) -> str:
    """The skill a request's message asked for (``metadata.skillId``), or "" for none."""
    message = getattr(params, "message", None)
    metadata = getattr(message, "metadata", None)
    skill = metadata.get("skillId") if isinstance(metadata, dict) else None
    return skill if isinstance(skill, str) else ""


def _message_task(params: Any) -> str:
    task_id = getattr(getattr(params, "message", None), "task_id", "")
    return task_id if isinstance(task_id, str) else ""
