"""Every budget a caller can make the server spend, in one place.

A public deployment can keep every default. Each budget, when exceeded, is answered with a clear protocol
error on every binding (431 for headers, 413 for bodies, -32602/400 for shapes, 503 with ``Retry-After``
when busy), and costs the server no more than the budget itself. ``docs/limits.md`` lists them all::

    from skillwire import Agent, Limits

    agent.asgi(limits=Limits(max_connections=5000, max_running_tasks=200))

``skillwire serve --limit NAME=VALUE`` sets any of them from the command line (``None`` as ``none``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Any

__all__ = ["Limits", "describe_duration", "parse_duration", "parse_limit"]

KiB = 1024
MiB = 1024 * KiB


@dataclass(frozen=True, slots=True, kw_only=True)
class Limits:
    # -- HTTP connections -------------------------------------------------------------------------------
    #: Request line plus headers, in bytes (431 beyond it).
    max_header_bytes: int = 32 * KiB
    #: Seconds from a connection's first byte of a request to the end of its headers (408 beyond it).
    header_timeout: float = 10.0
    #: Seconds to receive a whole request body once its headers are in (408 beyond it).
    body_timeout: float = 30.0
    #: Seconds an idle keep-alive connection (or a new one that sends nothing) stays open.
    keepalive_timeout: float = 5.0
    #: Open connections per listener (HTTP, and gRPC when served); beyond it a new HTTP connection gets 503
    #: with Retry-After and is closed (a gRPC one UNAVAILABLE).
    max_connections: int = 1000
    #: Calls at once on one HTTP/2 (gRPC) connection; more wait until one ends.
    max_streams_per_connection: int = 100
    #: Request body in bytes (413 beyond it); also gRPC's largest request message.
    max_body_bytes: int = 10 * MiB
    #: Largest answer in bytes (a task, a page, a stream event); also gRPC's largest response message.
    max_response_bytes: int = 64 * MiB

    # -- decoded JSON (any binding) ---------------------------------------------------------------------
    #: Nesting of arrays and objects.
    max_json_depth: int = 100
    #: Values (objects, arrays, strings, numbers, literals; object keys count too) in one request.
    max_json_nodes: int = 100_000
    #: Characters in one string (text parts, keys, metadata values, base64 file contents).
    max_string_length: int = 8 * MiB
    #: Parts in one message.
    max_parts: int = 256
    #: Keys in one ``metadata`` object (message, request, task, artifact, part).
    max_metadata_keys: int = 128
    #: Bodies larger than this are decoded and validated on a worker thread, off the event loop.
    offload_decode_bytes: int = 256 * KiB

    # -- JSON Schema validation -------------------------------------------------------------------------
    #: Subschema applications per validation (``$ref``/``anyOf``/``oneOf``/``allOf`` fan-out).
    schema_steps: int = 100_000

    # -- tasks and answers ------------------------------------------------------------------------------
    #: Messages in one task's history (the message that would pass it is refused with -32602).
    max_history_messages: int = 10_000
    #: Encoded size of one task (history plus artifacts).
    max_task_bytes: int = 32 * MiB
    #: Bytes of one task's event log a store keeps (a stream that fell behind catches up from it); past it
    #: the oldest events are dropped, and a reader behind them gets the task's snapshot instead. An artifact
    #: replaced again and again grows the log, not the task.
    max_task_log_bytes: int = 32 * MiB
    #: Bytes of tasks in one ListTasks page; a page that would pass it ends early with a nextPageToken.
    max_page_bytes: int = 4 * MiB
    #: Messages of history in each ListTasks entry when the request gives no historyLength.
    list_history_length: int = 10

    # -- streams ------------------------------------------------------------------------------------------
    #: Events queued for one subscriber that is not reading; beyond it the subscriber is dropped.
    stream_buffer_events: int = 10_000
    #: Approximate bytes queued for one subscriber (text, file and data contents) before it is dropped.
    stream_buffer_bytes: int = 8 * MiB
    #: Seconds a stream's client may take nothing before the stream is dropped (docs/streaming.md).
    write_timeout: float = 30.0
    #: Seconds a GetTask with ``currentGeneration`` (a long-poll) waits for the task to move on before it
    #: answers with the task as it is.
    long_poll_timeout: float = 30.0
    #: Long-polls waiting at once in one process; beyond it a new one gets 503 with Retry-After.
    max_long_polls: int = 1000
    #: Seconds an ``Idempotency-Key`` is remembered: a request sent again within it gets the first one's
    #: result and is not run again (docs/streaming.md).
    idempotency_window: float = 86_400.0

    # -- work ---------------------------------------------------------------------------------------------
    #: Tasks running at once in one process; beyond it a new task gets 503 with Retry-After.
    max_running_tasks: int = 1000
    #: Seconds a busy caller is told to wait (``Retry-After``).
    retry_after: int = 1
    #: Seconds one executor run may take unless a skill's ``executionHints.timeoutSeconds`` says otherwise
    #: (``None``: no deadline). At the deadline the work is cancelled and the task fails with a reason.
    task_timeout: float | None = 3600.0
    #: Seconds a process's lease on the tasks it runs lasts without renewal, with a store several processes
    #: share (PostgreSQL). It is renewed every third of this; once it lapses (the process died) another process
    #: takes its tasks over within about 4/3 of it (docs/deploy.md).
    lease_seconds: float = 15.0
    #: Finished tasks the memory store keeps (the oldest are forgotten first).
    memory_store_finished_tasks: int = 10_000
    #: Seconds a finished task (completed, failed, canceled, rejected) is kept after its last status change;
    #: then it is pruned in the background with everything attached to it, and answers TASK_NOT_FOUND
    #: (``None``: kept forever). The default equals ``idempotency_window``: a request sent again with its
    #: key still finds its task (docs/retention.md). Unfinished tasks are never pruned by age.
    task_retention: float | None = 86_400.0

    def replace(self, **changes: Any) -> Limits:
        return dataclasses.replace(self, **changes)


def parse_limit(text: str, limits: Limits | None = None) -> Limits:
    """``limits`` with one ``NAME=VALUE`` applied (``--limit max_connections=5000``); ValueError if bad."""
    base = limits or Limits()
    name, sep, raw = text.partition("=")
    name = name.strip().replace("-", "_")
    fields = {f.name: f for f in dataclasses.fields(Limits)}
    if not sep or name not in fields:
        known = ", ".join(sorted(fields))
        raise ValueError(f"--limit wants NAME=VALUE with NAME one of: {known}")
    current = getattr(base, name)
    raw = raw.strip()
    value: Any
    if name == "task_retention":  # a duration: 7d, 12h, none
        value = parse_duration(raw)
    elif raw.lower() == "none" and "None" in str(fields[name].type):
        value = None
    else:
        kind = float if isinstance(current, float) or "float" in str(fields[name].type) else int
        try:
            value = kind(raw)
        except ValueError:
            raise ValueError(f"--limit {name}: {raw!r} is not a number") from None
        if value < 0:
            raise ValueError(f"--limit {name}: must not be negative")
    return base.replace(**{name: value})


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86_400.0, "w": 604_800.0}
_DURATION = re.compile(r"(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w)?")
_FOREVER = frozenset({"none", "never", "forever", "off"})


def parse_duration(text: str) -> float | None:
    """Seconds from ``90``, ``90s``, ``15m``, ``12h``, ``7d``, ``2w``, ``1.5h`` or ``500ms``; ``None`` from
    ``none`` (also ``never``, ``forever``, ``off``): no limit. ValueError if it is neither, or not above 0."""
    word = text.strip().lower()
    if word in _FOREVER:
        return None
    found = _DURATION.fullmatch(word)
    if found is None:
        raise ValueError(f"{text!r} is not a duration: write 90s, 15m, 12h, 7d, 2w (or none)")
    seconds = float(found.group(1)) * _UNITS[found.group(2) or "s"]
    if seconds <= 0:
        raise ValueError(f"{text!r}: a duration must be above 0 (none keeps forever)")
    return seconds


def describe_duration(seconds: float | None) -> str:
    """``seconds`` in words, in the largest unit that divides it: ``1 day``, ``36 hours``, ``45 s``;
    ``forever`` for None."""
    if seconds is None:
        return "forever"
    for unit, size in (("week", 604_800), ("day", 86_400), ("hour", 3600), ("minute", 60)):
        count = seconds / size
        if count >= 1 and count == int(count):
            return f"{int(count)} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} s"
