"""A2A 1.1 generations on gRPC, whose ``lf.a2a.v1`` messages (a2a-sdk's, v1.0) have no fields for them.

The 1.1 draft numbers them: ``Task.generation`` 7, ``TaskStatusUpdateEvent.generation`` 5,
``TaskArtifactUpdateEvent.generation`` 7, ``GetTaskRequest.current_generation`` 4 and
``SendMessageConfiguration.if_generation_match`` 5, all varints. A protobuf message keeps the fields it does
not know (its *unknown fields*) and writes them back when it is serialized, so :func:`put_generations` gives
a v1.0 message its 1.1 fields by merging their bytes into it, and :func:`read_generations` reads them back
from its unknown fields. The bytes on the wire are exactly 1.1's, and a v1.0 peer skips them, as protobuf
skips any field it does not know. Why by hand: no published ``lf.a2a.v1`` module has the 1.1 fields yet,
and building a second descriptor pool for five integers would fork the whole message set::

    message = struct_to_message(without_generations(task), a2a_pb2.Task)
    put_generations(task, message)              # field 7 = task.generation, when asked for
"""

from __future__ import annotations

from typing import Any

from google.protobuf.unknown_fields import UnknownFieldSet  # type: ignore[import-untyped]

from skillwire.protocol.models import (
    GetTaskRequest,
    ListTasksResponse,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    Task,
)

__all__ = ["put_generations", "read_generations"]

TASK_GENERATION = 7
STATUS_UPDATE_GENERATION = 5
ARTIFACT_UPDATE_GENERATION = 7
GET_TASK_CURRENT_GENERATION = 4
SEND_IF_GENERATION_MATCH = 5


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if value:
            out.append(low | 0x80)
        else:
            out.append(low)
            return bytes(out)


def _put(message: Any, number: int, value: int | None) -> None:
    if value:  # 0 and unset are the same on the wire: absent
        message.MergeFromString(_varint(number << 3) + _varint(value))


def _get(message: Any, number: int) -> int | None:
    for field in UnknownFieldSet(message):
        if field.field_number == number and field.wire_type == 0:
            return int(field.data)
    return None


def put_generations(struct: Any, message: Any) -> None:
    """Add the 1.1 generation fields of ``struct`` (a task, an event, an answer holding tasks, a GetTask or
    SendMessage request) to ``message``, the v1.0 message converted from it."""
    kind = type(struct)
    if kind is Task:
        _put(message, TASK_GENERATION, struct.generation)
    elif kind is StreamResponse:
        if struct.status_update is not None:
            _put(message.status_update, STATUS_UPDATE_GENERATION, struct.status_update.generation)
        elif struct.artifact_update is not None:
            _put(message.artifact_update, ARTIFACT_UPDATE_GENERATION, struct.artifact_update.generation)
        elif struct.task is not None:
            _put(message.task, TASK_GENERATION, struct.task.generation)
    elif kind is SendMessageResponse:
        if struct.task is not None:
            _put(message.task, TASK_GENERATION, struct.task.generation)
    elif kind is ListTasksResponse:
        for task, task_message in zip(struct.tasks, message.tasks, strict=True):
            _put(task_message, TASK_GENERATION, task.generation)
    elif kind is GetTaskRequest:
        _put(message, GET_TASK_CURRENT_GENERATION, struct.current_generation)
    elif kind is SendMessageRequest and struct.configuration is not None:
        _put(message.configuration, SEND_IF_GENERATION_MATCH, struct.configuration.if_generation_match)


def read_generations(message: Any, struct: Any) -> Any:
    """``struct``, converted from ``message``, with the 1.1 generation fields ``message`` carries (the
    same object, changed, for the mutable Structs; a copy for the frozen events)."""
    import msgspec

    replace = msgspec.structs.replace
    kind = type(struct)
    if kind is Task:
        struct.generation = _get(message, TASK_GENERATION) or 0
    elif kind is StreamResponse:
        if struct.status_update is not None:
            generation = _get(message.status_update, STATUS_UPDATE_GENERATION) or 0
            return replace(struct, status_update=replace(struct.status_update, generation=generation))
        if struct.artifact_update is not None:
            generation = _get(message.artifact_update, ARTIFACT_UPDATE_GENERATION) or 0
            return replace(struct, artifact_update=replace(struct.artifact_update, generation=generation))
        if struct.task is not None:
            struct.task.generation = _get(message.task, TASK_GENERATION) or 0
    elif kind is SendMessageResponse:
        if struct.task is not None:
            struct.task.generation = _get(message.task, TASK_GENERATION) or 0
    elif kind is ListTasksResponse:
        for task, task_message in zip(struct.tasks, message.tasks, strict=True):
            task.generation = _get(task_message, TASK_GENERATION) or 0
    elif kind is GetTaskRequest:
        struct.current_generation = _get(message, GET_TASK_CURRENT_GENERATION)
    elif (
        kind is SendMessageRequest and struct.configuration is not None and message.HasField("configuration")
    ):
        struct.configuration.if_generation_match = _get(message.configuration, SEND_IF_GENERATION_MATCH)
    return struct
