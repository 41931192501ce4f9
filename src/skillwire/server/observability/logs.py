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
request with ``request=<id>``; the task and trace ids are bound only when JSON logs are asked for (the
serving option :attr:`~skillwire.server.observability.observe.Observability.json_logs`, which
``skillwire serve --log-format json`` sets beside :func:`use_json`), so text costs nothing more for them.

**A caller cannot forge or flood a line.** Ids, skill names and tenants come from callers and end up in
lines (``skill=``, ``task=``, a warning about a task). Both formats (:class:`TextFormatter`, the default
``skillwire serve`` text lines, and :class:`JsonFormatter`) write every message and every string field
printable: a line break, a carriage return, an escape sequence (ESC), a bidirectional override or any other
character that is not printable is written as its escape (``\n``, ``\x1b``, ``\u202e``), so one record is
one line and a terminal shows it as it is; each string argument of a message and each string field is cut
at :data:`MAX_VALUE` characters, a message at :data:`MAX_MESSAGE`. A traceback keeps its lines, each
indented (text) so that no line of it can pass for a record. The access line
(:mod:`skillwire.server.observability.access`) cuts and cleans its fields itself too, for a process that formats its
logs its own way.
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
    "MAX_MESSAGE",
    "MAX_VALUE",
    "JsonFormatter",
    "TextFormatter",
    "bind_request",
    "bind_task",
    "configure_logging",
    "current_request_id",
    "printable",
    "request_id_of",
]

_request_id: contextvars.ContextVar[str] = contextvars.ContextVar("skillwire_request_id", default="")
_task: contextvars.ContextVar[tuple[str, str]] = contextvars.ContextVar("skillwire_task", default=("", ""))

#: Log record attributes that are not extra fields.
_STANDARD = frozenset(vars(logging.makeLogRecord({}))) | {"message", "asctime", "taskName"}

#: The most characters of one string argument of a message, or of one string field, that a line shows.
MAX_VALUE = 1024
#: The most characters of one message that a line shows.
MAX_MESSAGE = 16 * 1024
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def printable(text: str, limit: int = MAX_VALUE) -> str:
    """``text`` as one printable line of at most ``limit`` characters (and a note of how many more there
    were): every character that is not printable written as its escape.

    >>> printable("a\\nb\\x1b[31m"), printable("x" * 12, 4)
    ('a\\\\nb\\\\x1b[31m', 'xxxx...(8 more)')
    """
    more = len(text) - limit
    if more > 0:
        text = text[:limit]
    if not text.isprintable():
        text = "".join(c if c.isprintable() else _escape(c) for c in text)
    return f"{text}...({more} more)" if more > 0 else text


def _escape(char: str) -> str:
    known = _ESCAPES.get(char)
    if known is not None:
        return known
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def message_of(record: logging.LogRecord) -> str:
    """The record's message with each string argument cut at :data:`MAX_VALUE`, printable, at most
    :data:`MAX_MESSAGE` characters."""
    args = record.args
    if not args:
        return printable(str(record.msg), MAX_MESSAGE)
    cut: Any
    if isinstance(args, Mapping):
        cut = {key: _cut(value) for key, value in args.items()}
    else:
        cut = tuple(_cut(value) for value in args)
    try:
        text = str(record.msg) % cut
    except (TypeError, ValueError, KeyError):  # as logging would report it, from the record itself
        text = record.getMessage()
    return printable(text, MAX_MESSAGE)


def _cut(value: object) -> object:
    return value[:MAX_VALUE] + "..." if isinstance(value, str) and len(value) > MAX_VALUE else value


def _lines(text: str, indent: str) -> str:
    """A traceback's lines, each made printable and, past the first, prefixed with ``indent``."""
    return "\n".join(
        indent * (n > 0) + printable(line, MAX_MESSAGE) for n, line in enumerate(text.split("\n"))
    )


class TextFormatter(logging.Formatter):
    """The text lines of ``skillwire serve`` (``LEVEL logger: message``), which a caller cannot break or
    lengthen past the limits (see the module), with ``request=<id>`` at the end of a line logged for a
    request; a traceback follows on lines of its own, indented."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        text = super().formatMessage(record)
        request_id = _request_id.get()
        return f"{text} request={request_id}" if request_id else text

    def format(self, record: logging.LogRecord) -> str:
        record.message = message_of(record)
        if self.usesTime():
            record.asctime = self.formatTime(record, self.datefmt)
        text = self.formatMessage(record)
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            text += "\n  " + _lines(record.exc_text, "  ")
        if record.stack_info:
            text += "\n  " + _lines(self.formatStack(record.stack_info), "  ")
        return text


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


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time (UTC, ms), level, logger, message, the ids, the record's extra
    fields, and the formatted exception if there is one."""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.datetime.fromtimestamp(record.created, datetime.UTC)
        line: dict[str, Any] = {
            "time": stamp.strftime("%Y-%m-%dT%H:%M:%S.") + f"{stamp.microsecond // 1000:03d}Z",
            "level": record.levelname,
            "logger": record.name,
            "message": message_of(record),
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
                line[key] = printable(value) if isinstance(value, str) else value
        line.update(_trace_ids())
        if record.exc_info:
            line["exception"] = _lines(self.formatException(record.exc_info), "")
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
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())


def configure_logging(level: str, log_format: str = "text") -> None:
    """Show skillwire's log records from ``level`` on (on stderr; ``info`` shows the access log of
    :mod:`skillwire.server.observability.access`; a line logged for a request ends with its ``request=<id>``), unless the
    process has set logging up itself: one line per record, which no caller-supplied value can break or flood
    (:class:`TextFormatter`); ``log_format`` ``json``: every record of the process as
    one JSON line with its request, task and trace ids (this module)."""
    if log_format == "json":
        use_json(level)
        return
    root = logging.getLogger()
    if root.handlers:  # set up by the process (logging.basicConfig does nothing then either)
        return
    handler = logging.StreamHandler()
    handler.setFormatter(TextFormatter("%(levelname)s %(name)s: %(message)s"))
    root.addHandler(handler)
    root.setLevel(level.upper())
