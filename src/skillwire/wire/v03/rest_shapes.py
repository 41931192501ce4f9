"""The v0.3 HTTP+JSON (REST) objects, ProtoJSON of the v0.3 gRPC messages (package ``a2a.v1``), as msgspec
Structs, and their conversion to and from the v1.0 models; both directions of the REST codec build on them.

Data parts, push authentication and timestamps convert as in :mod:`skillwire.wire.v03.shapes`. Besides:

* ``fileWithBytes`` is the file content, base64 once, as the v0.3 proto says (a2a-python's v0.3
  gRPC/REST code stores the base64 *text* there, so its JSON holds base64 twice; that is not followed).
* The v0.3 REST ``Message`` has no ``referenceTaskIds``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from skillwire.protocol import models as m
from skillwire.protocol.states import TaskState
from skillwire.wire.v03.shapes import HistoryLength, Json, NonEmpty, _unwrap_data, _utc, _wrap_data

_S = TaskState

# -- v0.3 HTTP+JSON (REST): ProtoJSON of the v0.3 gRPC messages (package a2a.v1) ----------------------------


class _Pb(Struct, rename="camel", omit_defaults=True, kw_only=True):
    """ProtoJSON of a v0.3 ``a2a.v1`` message: default values omitted, proto names accepted on input."""


class _PbFile(_Pb, kw_only=True):
    file_with_uri: str | UnsetType = UNSET
    file_with_bytes: bytes | UnsetType = UNSET
    mime_type: str = ""
    name: str = ""

    def __post_init__(self) -> None:
        if (self.file_with_uri is UNSET) == (self.file_with_bytes is UNSET):
            raise ValueError("a file must have exactly one of `fileWithUri` or `fileWithBytes`")


class _PbData(_Pb, kw_only=True):
    data: Json | None = None


class _PbPart(_Pb, kw_only=True):
    text: str | UnsetType = UNSET
    file: _PbFile | None = None
    data: _PbData | None = None
    metadata: Json | None = None

    def __post_init__(self) -> None:
        if (self.text is not UNSET) + (self.file is not None) + (self.data is not None) != 1:
            raise ValueError("a part must have exactly one of `text`, `file` or `data`")


_PB_ROLE_OUT = {m.Role.USER: "ROLE_USER", m.Role.AGENT: "ROLE_AGENT", m.Role.UNSPECIFIED: "ROLE_UNSPECIFIED"}
_PB_ROLE_IN: dict[str | int, m.Role] = {
    **{v: k for k, v in _PB_ROLE_OUT.items()},
    0: m.Role.UNSPECIFIED,
    1: m.Role.USER,
    2: m.Role.AGENT,
}


class _PbMessage(_Pb, kw_only=True):
    message_id: NonEmpty
    context_id: str = ""
    task_id: str = ""
    role: str | int = "ROLE_UNSPECIFIED"
    content: Annotated[list[_PbPart], Meta(min_length=1)]
    metadata: Json | None = None
    extensions: list[str] = []

    def __post_init__(self) -> None:
        if self.role not in _PB_ROLE_IN:
            raise ValueError("`role` must be ROLE_USER or ROLE_AGENT")


class _PbStatus(_Pb, kw_only=True):
    state: str = "TASK_STATE_UNSPECIFIED"
    update: _PbMessage | None = msgspec.field(default=None, name="message")
    timestamp: datetime | None = None


class _PbArtifact(_Pb, kw_only=True):
    artifact_id: str
    name: str = ""
    description: str = ""
    parts: list[_PbPart] = []
    metadata: Json | None = None
    extensions: list[str] = []


class _PbTask(_Pb, kw_only=True):
    id: str = ""
    context_id: str = ""
    status: _PbStatus | None = None
    artifacts: list[_PbArtifact] = []
    history: list[_PbMessage] = []
    metadata: Json | None = None


class _PbStatusUpdate(_Pb, kw_only=True):
    task_id: str = ""
    context_id: str = ""
    status: _PbStatus | None = None
    final: bool = False
    metadata: Json | None = None


class _PbArtifactUpdate(_Pb, kw_only=True):
    task_id: str = ""
    context_id: str = ""
    artifact: _PbArtifact | None = None
    append: bool = False
    last_chunk: bool = False
    metadata: Json | None = None


class _PbSendResponse(_Pb, kw_only=True):
    task: _PbTask | None = None
    msg: _PbMessage | None = msgspec.field(default=None, name="message")


class _PbStreamResponse(_Pb, kw_only=True):
    task: _PbTask | None = None
    msg: _PbMessage | None = msgspec.field(default=None, name="message")
    status_update: _PbStatusUpdate | None = None
    artifact_update: _PbArtifactUpdate | None = None


class _PbAuth(_Pb, kw_only=True):
    schemes: list[str] = []
    credentials: str = ""

    def __post_init__(self) -> None:
        if not self.schemes and self.credentials:
            raise ValueError("`schemes` must name the scheme of the `credentials`")


class _PbPushConfig(_Pb, kw_only=True):
    id: str = ""
    url: NonEmpty
    token: str = ""
    authentication: _PbAuth | None = None


class _PbTaskPushConfig(_Pb, kw_only=True):
    name: str = ""
    push_notification_config: _PbPushConfig | None = None


class _PbListPushResponse(_Pb, kw_only=True):
    configs: list[_PbTaskPushConfig] = []
    next_page_token: str = ""


class _PbSendConfig(_Pb, kw_only=True):
    accepted_output_modes: list[str] = []
    push_notification: _PbPushConfig | None = None
    history_length: HistoryLength = 0
    blocking: bool | None = None


class _PbSendRequest(_Pb, kw_only=True):
    request: _PbMessage = msgspec.field(name="message")
    configuration: _PbSendConfig | None = None
    metadata: Json | None = None


class _PbCreatePushBody(_Pb, kw_only=True):
    """CreateTaskPushNotificationConfigRequest {parent, configId, config}, or its bare ``config``
    (TaskPushNotificationConfig {name, pushNotificationConfig}), which the proto's HTTP rule names."""

    parent: str = ""
    config_id: str = ""
    config: _PbTaskPushConfig | None = None
    name: str = ""
    push_notification_config: _PbPushConfig | None = None


_PB_STATE_OUT: dict[TaskState, str] = {s: s.value for s in TaskState} | {_S.CANCELED: "TASK_STATE_CANCELLED"}

_PB_STATE_IN: dict[str, TaskState] = {v: k for k, v in _PB_STATE_OUT.items()} | {
    _S.CANCELED.value: _S.CANCELED
}

_PUSH = "pushNotificationConfigs"

# -- v0.3 -> v1.0 ------------------------------------------------------------------------------------------


def _pb_part_in(part: _PbPart) -> m.Part:
    if isinstance(part.text, str):
        return m.Part(text=part.text, metadata=part.metadata)
    f = part.file
    if f is not None:
        if isinstance(f.file_with_bytes, bytes):
            return m.Part(
                raw=f.file_with_bytes, filename=f.name, media_type=f.mime_type, metadata=part.metadata
            )
        url = f.file_with_uri if isinstance(f.file_with_uri, str) else ""
        return m.Part(url=url, filename=f.name, media_type=f.mime_type, metadata=part.metadata)
    data, metadata = _unwrap_data((part.data.data if part.data else None) or {}, part.metadata)
    return m.Part(data=data, metadata=metadata)


def _pb_message_in(msg: _PbMessage) -> m.Message:
    return m.Message(
        message_id=msg.message_id,
        context_id=msg.context_id,
        task_id=msg.task_id,
        role=_PB_ROLE_IN[msg.role],
        parts=[_pb_part_in(p) for p in msg.content],
        metadata=msg.metadata,
        extensions=msg.extensions,
    )


def _pb_push_in(cfg: _PbPushConfig, task_id: str, config_id: str) -> m.TaskPushNotificationConfig:
    auth = cfg.authentication
    return m.TaskPushNotificationConfig(
        id=config_id,
        task_id=task_id,
        url=cfg.url,
        token=cfg.token,
        authentication=(
            m.AuthenticationInfo(scheme=auth.schemes[0], credentials=auth.credentials)
            if auth is not None and auth.schemes
            else None
        ),
    )


def _pb_status_in(status: _PbStatus | None) -> m.TaskStatus:
    if status is None:
        return m.TaskStatus(state=_S.UNSPECIFIED)
    state = _PB_STATE_IN.get(status.state)
    if state is None:
        raise ValueError(f"not a valid A2A v0.3 result: unknown task state {status.state[:50]!r}")
    return m.TaskStatus(
        state=state,
        message=_pb_message_in(status.update) if status.update is not None else None,
        timestamp=_utc(status.timestamp),
    )


def _pb_artifact_in(a: _PbArtifact) -> m.Artifact:
    return m.Artifact(
        artifact_id=a.artifact_id,
        name=a.name,
        description=a.description,
        parts=[_pb_part_in(p) for p in a.parts],
        metadata=a.metadata,
        extensions=a.extensions,
    )


def _pb_task_in(task: _PbTask) -> m.Task:
    return m.Task(
        id=task.id,
        context_id=task.context_id,
        status=_pb_status_in(task.status),
        artifacts=[_pb_artifact_in(a) for a in task.artifacts],
        history=[_pb_message_in(h) for h in task.history],
        metadata=task.metadata,
    )


def _pb_push_result_in(resource: _PbTaskPushConfig) -> m.TaskPushNotificationConfig:
    """``{"name": "tasks/{t}/pushNotificationConfigs/{c}", "pushNotificationConfig": {...}}`` in v1.0."""
    cfg = resource.push_notification_config
    if cfg is None:
        raise ValueError("not a valid A2A v0.3 result: `pushNotificationConfig` is missing")
    task_part, _, config_id = resource.name.partition(f"/{_PUSH}/")
    task_id = task_part.removeprefix("tasks/")
    return _pb_push_in(cfg, task_id, cfg.id or config_id or task_id)


# -- v1.0 -> v0.3 ------------------------------------------------------------------------------------------


def _pb_part_out(part: m.Part) -> _PbPart:
    if isinstance(part.text, str):
        return _PbPart(text=part.text, metadata=part.metadata)
    if isinstance(part.raw, bytes):
        file = _PbFile(file_with_bytes=part.raw, mime_type=part.media_type, name=part.filename)
        return _PbPart(file=file, metadata=part.metadata)
    if isinstance(part.url, str):
        file = _PbFile(file_with_uri=part.url, mime_type=part.media_type, name=part.filename)
        return _PbPart(file=file, metadata=part.metadata)
    data, metadata = _wrap_data(part.data, part.metadata)
    return _PbPart(data=_PbData(data=data), metadata=metadata)


def _pb_message_out(msg: m.Message) -> _PbMessage:
    return _PbMessage(
        message_id=msg.message_id,
        context_id=msg.context_id,
        task_id=msg.task_id,
        role=_PB_ROLE_OUT[msg.role],
        content=[_pb_part_out(p) for p in msg.parts],
        metadata=msg.metadata,
        extensions=msg.extensions,
    )


def _pb_status_out(status: m.TaskStatus) -> _PbStatus:
    return _PbStatus(
        state=_PB_STATE_OUT[status.state],
        update=_pb_message_out(status.message) if status.message is not None else None,
        timestamp=status.timestamp,
    )


def _pb_artifact_out(a: m.Artifact) -> _PbArtifact:
    return _PbArtifact(
        artifact_id=a.artifact_id,
        name=a.name,
        description=a.description,
        parts=[_pb_part_out(p) for p in a.parts],
        metadata=a.metadata,
        extensions=a.extensions,
    )


def _pb_task_out(task: m.Task) -> _PbTask:
    return _PbTask(
        id=task.id,
        context_id=task.context_id,
        status=_pb_status_out(task.status),
        artifacts=[_pb_artifact_out(a) for a in task.artifacts],
        history=[_pb_message_out(h) for h in task.history],
        metadata=task.metadata,
    )


def _pb_push_out(cfg: m.TaskPushNotificationConfig) -> _PbTaskPushConfig:
    auth = cfg.authentication
    return _PbTaskPushConfig(
        name=f"tasks/{cfg.task_id}/{_PUSH}/{cfg.id}",
        push_notification_config=_PbPushConfig(
            id=cfg.id,
            url=cfg.url,
            token=cfg.token,
            authentication=_PbAuth(schemes=[auth.scheme], credentials=auth.credentials) if auth else None,
        ),
    )
