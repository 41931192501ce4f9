"""The v0.3 JSON-RPC objects (types.ts at tag v0.3.0) as msgspec Structs, and their conversion to and from
the v1.0 models; both directions of the codec build on them.

Where the two do not map one to one:

* A v1.0 ``Part.data`` that is not a JSON object becomes ``{"value": x}`` with ``"data_part_compat": true``
  in the part's metadata (the convention of a2a-sdk's compat layer); decoding undoes it, so it round-trips.
* ``mediaType``/``filename`` on text and data parts, and ``ROLE_UNSPECIFIED``, have no v0.3 form: they
  are dropped (an unspecified role is sent as ``agent``). ``TASK_STATE_UNSPECIFIED`` is ``unknown``.
* v0.3 push ``authentication.schemes`` is a list, v1.0 has one ``scheme``: the first one is kept.
* A v0.3 timestamp without a UTC offset is read as UTC.

The HTTP+JSON binding has its own objects (:mod:`skillwire.wire.v03.rest_shapes`) and shares these rules.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta, Struct

from skillwire.errors import InvalidParamsError
from skillwire.protocol import models as m
from skillwire.protocol.states import TaskState
from skillwire.wire.jsonrpc import field_error

__all__ = ["DATA_PART_COMPAT", "PROTOCOL_VERSION"]

PROTOCOL_VERSION = "0.3.0"

Json = dict[str, Any]
NonEmpty = Annotated[str, Meta(min_length=1)]
HistoryLength = Annotated[int, Meta(ge=0)]

#: Metadata key marking a data part whose v1.0 value was not an object (wrapped as ``{"value": x}``).
DATA_PART_COMPAT = "data_part_compat"

_S = TaskState

# -- v0.3 JSON-RPC shapes (types.ts at tag v0.3.0) ---------------------------------------------------------


class _V03(Struct, rename="camel", omit_defaults=True, kw_only=True):
    """A v0.3 JSON object: camelCase names, absent optional members omitted, unknown members ignored."""


class _TextPart(_V03, tag="text", tag_field="kind", kw_only=True):
    text: str
    metadata: Json | None = None


class _FileContent(_V03, kw_only=True):
    name: str | None = None
    mime_type: str | None = None
    content: bytes | None = msgspec.field(default=None, name="bytes")
    uri: str | None = None

    def __post_init__(self) -> None:
        if (self.content is None) == (self.uri is None):
            raise ValueError("a file must have exactly one of `bytes` or `uri`")


class _FilePart(_V03, tag="file", tag_field="kind", kw_only=True):
    file: _FileContent
    metadata: Json | None = None


class _DataPart(_V03, tag="data", tag_field="kind", kw_only=True):
    data: Json
    metadata: Json | None = None


_Part = _TextPart | _FilePart | _DataPart
_Parts = Annotated[list[_Part], Meta(min_length=1)]
_Role = Literal["user", "agent"]
_State = Literal[
    "submitted",
    "working",
    "input-required",
    "completed",
    "canceled",
    "failed",
    "rejected",
    "auth-required",
    "unknown",
]


class _Message(_V03, tag="message", tag_field="kind", kw_only=True):
    message_id: NonEmpty
    context_id: str | None = None
    task_id: str | None = None
    role: _Role
    parts: _Parts
    metadata: Json | None = None
    extensions: list[str] | None = None
    reference_task_ids: list[str] | None = None


class _TaskStatus(_V03, kw_only=True):
    state: _State
    message: _Message | None = None
    timestamp: datetime | None = None


class _Artifact(_V03, kw_only=True):
    artifact_id: NonEmpty
    name: str | None = None
    description: str | None = None
    parts: _Parts
    metadata: Json | None = None
    extensions: list[str] | None = None


class _Task(_V03, tag="task", tag_field="kind", kw_only=True):
    id: str
    context_id: str
    status: _TaskStatus
    artifacts: list[_Artifact] | None = None
    history: list[_Message] | None = None
    metadata: Json | None = None


class _StatusUpdate(_V03, tag="status-update", tag_field="kind", kw_only=True):
    task_id: str
    context_id: str
    status: _TaskStatus
    final: bool
    metadata: Json | None = None


class _ArtifactUpdate(_V03, tag="artifact-update", tag_field="kind", kw_only=True):
    task_id: str
    context_id: str
    artifact: _Artifact
    append: bool | None = None
    last_chunk: bool | None = None
    metadata: Json | None = None


_Event = _Task | _Message | _StatusUpdate | _ArtifactUpdate


class _PushAuth(_V03, kw_only=True):
    schemes: list[str]
    credentials: str | None = None

    def __post_init__(self) -> None:
        if not self.schemes and self.credentials:
            raise ValueError("`schemes` must name the scheme of the `credentials`")


class _PushConfig(_V03, kw_only=True):
    id: str | None = None
    url: NonEmpty
    token: str | None = None
    authentication: _PushAuth | None = None


class _TaskPushConfig(_V03, kw_only=True):
    task_id: NonEmpty
    push_notification_config: _PushConfig


class _SendConfig(_V03, kw_only=True):
    accepted_output_modes: list[str] | None = None
    history_length: HistoryLength | None = None
    push_notification_config: _PushConfig | None = None
    blocking: bool | None = None


class _SendParams(_V03, kw_only=True):
    message: _Message
    configuration: _SendConfig | None = None
    metadata: Json | None = None


class _TaskIdParams(_V03, kw_only=True):
    id: NonEmpty
    metadata: Json | None = None


class _TaskQueryParams(_TaskIdParams, kw_only=True):
    history_length: HistoryLength | None = None


class _GetPushParams(_TaskIdParams, kw_only=True):
    push_notification_config_id: str | None = None


class _DeletePushParams(_TaskIdParams, kw_only=True):
    push_notification_config_id: NonEmpty


# -- v0.3 -> v1.0 ------------------------------------------------------------------------------------------

_STATE_OUT: dict[TaskState, _State] = {
    _S.SUBMITTED: "submitted",
    _S.WORKING: "working",
    _S.INPUT_REQUIRED: "input-required",
    _S.COMPLETED: "completed",
    _S.CANCELED: "canceled",
    _S.FAILED: "failed",
    _S.REJECTED: "rejected",
    _S.AUTH_REQUIRED: "auth-required",
    _S.UNSPECIFIED: "unknown",
}
_STATE_IN: dict[str, TaskState] = {v: k for k, v in _STATE_OUT.items()}


def _unwrap_data(data: Json, metadata: Json | None) -> tuple[Any, Json | None]:
    """Undo the ``{"value": x}`` wrapping of a non-object data value (see DATA_PART_COMPAT)."""
    if metadata is None or metadata.get(DATA_PART_COMPAT) is not True or data.keys() != {"value"}:
        return data, metadata
    rest = {k: v for k, v in metadata.items() if k != DATA_PART_COMPAT}
    return data["value"], rest or None


def _part_in(part: _Part) -> m.Part:
    if isinstance(part, _TextPart):
        return m.Part(text=part.text, metadata=part.metadata)
    if isinstance(part, _FilePart):
        f = part.file
        name, media_type = f.name or "", f.mime_type or ""
        if f.content is not None:
            return m.Part(raw=f.content, filename=name, media_type=media_type, metadata=part.metadata)
        return m.Part(url=f.uri or "", filename=name, media_type=media_type, metadata=part.metadata)
    data, metadata = _unwrap_data(part.data, part.metadata)
    return m.Part(data=data, metadata=metadata)


def _message_in(msg: _Message) -> m.Message:
    return m.Message(
        message_id=msg.message_id,
        context_id=msg.context_id or "",
        task_id=msg.task_id or "",
        role=m.Role.USER if msg.role == "user" else m.Role.AGENT,
        parts=[_part_in(p) for p in msg.parts],
        metadata=msg.metadata,
        extensions=msg.extensions or [],
        reference_task_ids=msg.reference_task_ids or [],
    )


def _utc(ts: datetime | None) -> datetime | None:
    # v0.3 said only "ISO 8601"; a timestamp without an offset is taken as UTC (ProtoJSON needs one).
    return ts.replace(tzinfo=UTC) if ts is not None and ts.tzinfo is None else ts


def _status_in(status: _TaskStatus) -> m.TaskStatus:
    return m.TaskStatus(
        state=_STATE_IN[status.state],
        message=_message_in(status.message) if status.message is not None else None,
        timestamp=_utc(status.timestamp),
    )


def _artifact_in(a: _Artifact) -> m.Artifact:
    return m.Artifact(
        artifact_id=a.artifact_id,
        name=a.name or "",
        description=a.description or "",
        parts=[_part_in(p) for p in a.parts],
        metadata=a.metadata,
        extensions=a.extensions or [],
    )


def _task_in(task: _Task) -> m.Task:
    return m.Task(
        id=task.id,
        context_id=task.context_id,
        status=_status_in(task.status),
        artifacts=[_artifact_in(a) for a in task.artifacts or ()],
        history=[_message_in(h) for h in task.history or ()],
        metadata=task.metadata,
    )


def _push_in(cfg: _PushConfig, task_id: str) -> m.TaskPushNotificationConfig:
    auth = cfg.authentication
    return m.TaskPushNotificationConfig(
        id=cfg.id or "",
        task_id=task_id,
        url=cfg.url,
        token=cfg.token or "",
        authentication=(
            m.AuthenticationInfo(scheme=auth.schemes[0], credentials=auth.credentials or "")
            if auth is not None and auth.schemes
            else None
        ),
    )


def _invalid(exc: msgspec.ValidationError, root: str) -> InvalidParamsError:
    """msgspec's "reason - at `$.a.b`" as an InvalidParamsError naming ``root.a.b``."""
    path, reason = field_error(exc, root)
    return InvalidParamsError(f"Invalid params: {path}: {reason}", field_violations=[(path, reason)])


# -- v1.0 -> v0.3 ------------------------------------------------------------------------------------------


def _wrap_data(data: Any, metadata: Json | None) -> tuple[Json, Json | None]:
    if isinstance(data, dict):
        return data, metadata
    return {"value": data}, {**(metadata or {}), DATA_PART_COMPAT: True}


def _part_out(part: m.Part) -> _Part:
    if isinstance(part.text, str):
        return _TextPart(text=part.text, metadata=part.metadata)
    if isinstance(part.raw, bytes):
        file = _FileContent(name=part.filename or None, mime_type=part.media_type or None, content=part.raw)
        return _FilePart(file=file, metadata=part.metadata)
    if isinstance(part.url, str):
        file = _FileContent(name=part.filename or None, mime_type=part.media_type or None, uri=part.url)
        return _FilePart(file=file, metadata=part.metadata)
    data, metadata = _wrap_data(part.data, part.metadata)
    return _DataPart(data=data, metadata=metadata)


def _message_out(msg: m.Message) -> _Message:
    return _Message(
        message_id=msg.message_id,
        context_id=msg.context_id or None,
        task_id=msg.task_id or None,
        role="user" if msg.role is m.Role.USER else "agent",
        parts=[_part_out(p) for p in msg.parts],
        metadata=msg.metadata,
        extensions=msg.extensions or None,
        reference_task_ids=msg.reference_task_ids or None,
    )


def _status_out(status: m.TaskStatus) -> _TaskStatus:
    return _TaskStatus(
        state=_STATE_OUT[status.state],
        message=_message_out(status.message) if status.message is not None else None,
        timestamp=status.timestamp,
    )


def _artifact_out(a: m.Artifact) -> _Artifact:
    return _Artifact(
        artifact_id=a.artifact_id,
        name=a.name or None,
        description=a.description or None,
        parts=[_part_out(p) for p in a.parts],
        metadata=a.metadata,
        extensions=a.extensions or None,
    )


def _task_out(task: m.Task) -> _Task:
    return _Task(
        id=task.id,
        context_id=task.context_id,
        status=_status_out(task.status),
        artifacts=[_artifact_out(a) for a in task.artifacts] or None,
        history=[_message_out(h) for h in task.history] or None,
        metadata=task.metadata,
    )


def _push_out(cfg: m.TaskPushNotificationConfig) -> _TaskPushConfig:
    auth = cfg.authentication
    return _TaskPushConfig(
        task_id=cfg.task_id,
        push_notification_config=_PushConfig(
            id=cfg.id or None,
            url=cfg.url,
            token=cfg.token or None,
            authentication=(
                _PushAuth(schemes=[auth.scheme], credentials=auth.credentials or None)
                if auth is not None
                else None
            ),
        ),
    )


def _event_out(event: m.StreamResponse, final: bool) -> _Event:
    if event.task is not None:
        return _task_out(event.task)
    if event.message is not None:
        return _message_out(event.message)
    if event.status_update is not None:
        su = event.status_update
        return _StatusUpdate(
            task_id=su.task_id,
            context_id=su.context_id,
            status=_status_out(su.status),
            final=final,
            metadata=su.metadata,
        )
    if event.artifact_update is not None:
        au = event.artifact_update
        return _ArtifactUpdate(
            task_id=au.task_id,
            context_id=au.context_id,
            artifact=_artifact_out(au.artifact),
            append=au.append or None,
            last_chunk=au.last_chunk or None,
            metadata=au.metadata,
        )
    raise ValueError("a StreamResponse must have one member set")


_encoder = msgspec.json.Encoder()
