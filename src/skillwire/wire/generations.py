"""A2A 1.1 generations on the wire: who gets them, and taking them out for everyone else.

The runtime stamps every task and every status and artifact update event with the task's generation (1 at
creation, one more per event; the A2A 1.1 draft's ``generation`` fields). They reach the clients that ask
for them: ``A2A-Version: 1.1``, or a v1.0 call that activates the generations extension
(:data:`GENERATIONS_URI`, declared on the card). For every other client the v1.0 codecs take them out
before encoding (:func:`without_generations`), so a v1.0 client that parses strictly never meets a field
it does not know::

    codec = jsonrpc_codec(codec_version("1.0", activated))   # "1.1" when the extension is activated

The idempotency-keys extension (:data:`IDEMPOTENCY_URI`) needs no activation: a card that declares it tells
clients that an ``Idempotency-Key`` sent with a message or a push-config call makes a retry safe
(:mod:`skillwire.server.tasks.idempotency`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import msgspec

from skillwire.protocol.models import ListTasksResponse, SendMessageResponse, StreamResponse, Task

__all__ = ["GENERATIONS_URI", "IDEMPOTENCY_URI", "codec_version", "without_generations"]

#: The extension that gives a v1.0 client the 1.1 generation fields, cursors and long-polls
#: (docs/streaming.md).
GENERATIONS_URI = "https://skillwire.dev/extensions/generations/v1"
#: The extension an agent declares when it honours ``Idempotency-Key`` (docs/streaming.md).
IDEMPOTENCY_URI = "https://skillwire.dev/extensions/idempotency-keys/v1"

_replace = msgspec.structs.replace


def codec_version(version: str, extensions: Collection[str]) -> str:
    """The codec a call at ``version`` with ``extensions`` activated is encoded with: 1.1's for a 1.0 call
    that activated the generations extension, else its own."""
    return "1.1" if version == "1.0" and GENERATIONS_URI in extensions else version


def _task(task: Task) -> Task:
    return _replace(task, generation=0) if task.generation else task


def _event(event: StreamResponse) -> StreamResponse:
    update = event.status_update
    if update is not None:
        return _replace(event, status_update=_replace(update, generation=0)) if update.generation else event
    chunk = event.artifact_update
    if chunk is not None:
        return _replace(event, artifact_update=_replace(chunk, generation=0)) if chunk.generation else event
    task = event.task
    if task is not None and task.generation:
        return _replace(event, task=_replace(task, generation=0))
    return event


def without_generations(value: Any) -> Any:
    """``value`` (a Task, an event, or an answer holding tasks) without its generation fields: copies where
    one is set, the same object otherwise."""
    kind = type(value)
    if kind is StreamResponse:
        return _event(value)
    if kind is SendMessageResponse:
        task = value.task
        return (
            _replace(value, task=_replace(task, generation=0))
            if task is not None and task.generation
            else value
        )
    if kind is Task:
        return _task(value)
    if kind is ListTasksResponse:
        if any(t.generation for t in value.tasks):
            return _replace(value, tasks=[_task(t) for t in value.tasks])
        return value
    return value
