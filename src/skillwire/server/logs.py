"""Structured logs: ``skillwire serve --log-format json`` writes one JSON object per line, and every line
says which request, task, context and trace it belongs to.

::

    {"time": "2026-12-03T19:50:01.123Z", "level": "INFO", "logger": "skillwire.access",
     "message": "JSONRPC SendMessage skill=greet task=0190c2... COMPLETED 3.2 ms",
     "request_id": "7f3a9c0e12b44d5e", "task_id": "0190c2...", "binding": "JSONRPC",
     "operation": "SendMessage", "outcome": "COMPLETED", "duration_ms": 3.2,
     "trace_id": "4bf92f3577b34da6a3ce929d0e0e4736", "span_id": "00f067aa0ba902b7"}

- ``request_id``: the request's ``X-Request-Id`` header (or gRPC metadata) when it is a short printable
  token, else one made up for it; every line logged while the request is served carries it, and so do the
  lines of the task run it started. The handler sees the same id (``CallContext.request_id``,
  ``SkillContext.request_id``), and so does the request's span (``a2a.request_id``).
- ``task_id`` and ``context_id``: on the lines of a task run (an executor's or a skill's own log records
  included) and on the access line.
- ``trace_id`` and ``span_id``: the current OpenTelemetry span's, when tracing is on (``--otel``).
- The access line's fields (binding, operation, skill, outcome, duration) are fields of their own.

Messages hold what they held before: skillwire never logs message contents or credentials. The ids are
kept in context variables. The default text format (:class:`TextFormatter`) ends a line logged for a
request with ``request=<id>``; the task and trace ids are bound only while JSON logs are on
(:data:`enabled`), so text costs nothing more for them.
"""

from __future__ import annotations

import contextvars
import datetime
import json
import logging
import random
import sys
from collections.abc import Mapping
from typing import Any

__all__ = [
    "JsonFormatter",
    "TextFormatter",
    "bind_request",
    "bind_task",
    "current_request_id",
    "enabled",
    "request_id_of",
]

#: Whether JSON logs are on in this process (set by :func:`use_json`): the bindings and the runtime bind
#: ids only then.
enabled = False

_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("skillwire_request_id", default="")
_task: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar("skillwire_task", default=("", ""))

#: Log record attributes that are not extra fields.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}


def request_id_of(headers: Mapping[str, str]) -> str:
    """The caller's ``x-request-id`` when it is a token of 1 to 64 printable ASCII characters without
    spaces or quotes; else a new random one (16 hex digits)."""
    given = headers.get("x-request-id", "")
    if (
        0 < len(given) <= 64
        and given.isascii()
        and given.isprintable()
        and not any(c in given for c in ' "\\')
    ):
        return given
    # Not a secret, only a label that must not repeat: the module's generator, reseeded in each process a
    # fork makes, costs a third of secrets.token_hex on every request.
    return f"{random.getrandbits(64):016x}"


def bind_request(request_id: str) -> contextvars.Token[str]:
    """Set the current request's id for the lines logged while it is served (and by the runs it starts)."""
    return _request_id.set(request_id)


def current_request_id() -> str:
    """The id of the request being served in this context ("" outside any)."""
    return _request_id.get()


def unbind_request(token: contextvars.Token[str]) -> None:
    _request_id.reset(token)


def bind_task(task_id: str, context_id: str) -> None:
    """Set the task of the current (run's own) context: every line of the run carries it."""
    _task.set((task_id, context_id))


class TextFormatter(logging.Formatter):
    """The default text format, with ``request=<id>`` at the end of a line logged for a request."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(record)
        request_id = _request_id.get()
        return f"{text} request={request_id}" if request_id else text


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ms), level, logger, message, the ids, the record's extra
    fields, and the formatted exception if there is one."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        line: dict[str, Any] = {
            "time": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        request_id = _request_id.get()
        if request_id:
            line["request_id"] = request_id
        task_id, context_id = _task.get()
        if task_id:
            line["task_id"] = task_id
        if context_id:
            line["context_id"] = context_id
        for key, value in vars(record).items():
            if key not in _STANDARD and not key.startswith("_"):
                line[key] = value
        line.update(_trace_ids())
        if record.exc_info:
            line["exception"] = self.formatException(record.exc_info)
        return json.dumps(line, default=str, ensure_ascii=False)


def _trace_ids() -> dict[str, str]:
    trace = sys.modules.get("opentelemetry.trace")  # only when OpenTelemetry is in use: never imported here
    if trace is None:
        return {}
    context = trace.get_current_span().get_span_context()
    if not context.is_valid:
        return {}
    return {"trace_id": f"{context.trace_id:032x}", "span_id": f"{context.span_id:016x}"}


def use_json(level: str) -> None:
    """Send every log record of the process to stderr as JSON lines, from ``level`` on."""
    global enabled
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    enabled = True
