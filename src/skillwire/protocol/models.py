"""The A2A v1.0 data model as msgspec Structs.

Encoding a Struct gives exactly the ProtoJSON of the matching ``lf.a2a.v1`` message: lowerCamelCase names,
enum names as strings, default values omitted (fields with presence use ``None``/``UNSET`` for "not set"),
timestamps as RFC 3339 in UTC with ``Z``, bytes as base64. Unknown fields are ignored on decode, as the
specification asks. Field order follows the proto.

Event objects (status and artifact updates) are frozen; Task and its parts are mutable because the runtime
builds them up.
"""

from __future__ import annotations

import enum
import os
import threading
import time
from datetime import datetime
from typing import Annotated, Any

import msgspec
from msgspec import UNSET, Meta, Struct, UnsetType

from skillwire.protocol.states import TaskState

__all__ = [
    "AgentCapabilities",
    "AgentCard",
    "AgentCardSignature",
    "AgentExtension",
    "AgentInterface",
    "AgentProvider",
    "AgentSkill",
    "Artifact",
    "AuthenticationInfo",
    "CancelTaskRequest",
    "DeleteTaskPushNotificationConfigRequest",
    "GetExtendedAgentCardRequest",
    "GetTaskPushNotificationConfigRequest",
    "GetTaskRequest",
    "ListTaskPushNotificationConfigsRequest",
    "ListTaskPushNotificationConfigsResponse",
    "ListTasksRequest",
    "ListTasksResponse",
    "Message",
    "Part",
    "Role",
    "SecurityRequirement",
    "SendMessageConfiguration",
    "SendMessageRequest",
    "SendMessageResponse",
    "StreamResponse",
    "SubscribeToTaskRequest",
    "Task",
    "TaskArtifactUpdateEvent",
    "TaskPushNotificationConfig",
    "TaskState",
    "TaskStatus",
    "TaskStatusUpdateEvent",
]

Json = dict[str, Any]


class Role(enum.StrEnum):
    UNSPECIFIED = "ROLE_UNSPECIFIED"
    USER = "ROLE_USER"
    AGENT = "ROLE_AGENT"


class _Proto(Struct, rename="camel", omit_defaults=True, kw_only=True, gc=False):
    """Base of every protocol message: ProtoJSON naming and presence rules.

    ``gc=False``: the garbage collector does not track these objects. They form trees (a task holds lists
    of messages, which hold parts), never cycles among themselves, and a server makes many of them per
    request: untracked, they neither trigger collections nor lengthen them (full collections of tracked
    tasks were the long tail of SendMessage latency)."""


class _Event(Struct, rename="camel", omit_defaults=True, kw_only=True, frozen=True, gc=False):
    """Base of the immutable event messages."""


# -- Parts, messages, artifacts --------------------------------------------------------------------------


class Part(_Proto, kw_only=True):
    """One piece of content: exactly one of ``text``, ``raw`` (bytes), ``url`` or ``data`` (any JSON)."""

    text: str | UnsetType = UNSET
    raw: bytes | UnsetType = UNSET
    url: str | UnsetType = UNSET
    data: Any | UnsetType = UNSET
    metadata: Json | None = None
    filename: str = ""
    media_type: str = ""

    def __post_init__(self) -> None:
        present = (
            (self.text is not UNSET)
            + (self.raw is not UNSET)
            + (self.url is not UNSET)
            + (self.data is not UNSET)
        )
        if present != 1:
            raise ValueError("a Part must have exactly one of `text`, `raw`, `url` or `data`")


NonEmptyParts = Annotated[list[Part], Meta(min_length=1)]


class Message(_Proto, kw_only=True):
    message_id: Annotated[str, Meta(min_length=1)]
    context_id: str = ""
    task_id: str = ""
    role: Role
    parts: NonEmptyParts
    metadata: Json | None = None
    extensions: list[str] = []
    reference_task_ids: list[str] = []

    def text(self) -> str:
        """The text parts joined by newlines (a convenience for agents)."""
        return "\n".join(p.text for p in self.parts if isinstance(p.text, str))


class Artifact(_Proto, kw_only=True):
    artifact_id: Annotated[str, Meta(min_length=1)]
    name: str = ""
    description: str = ""
    parts: NonEmptyParts
    metadata: Json | None = None
    extensions: list[str] = []


# -- Tasks ------------------------------------------------------------------------------------------------


class TaskStatus(_Proto, kw_only=True):
    state: TaskState
    message: Message | None = None
    timestamp: datetime | None = None


class Task(_Proto, kw_only=True):
    """A task, as an agent reports it. Its result is in its artifacts; ``task.text`` and ``task.data`` read
    it without walking them (properties: nothing of them is on the wire)::

        task = await client.send(skill="convert", data={"amount": 2})
        task.status.state      # TaskState.COMPLETED, printed as "completed"
        task.data              # {"amount": 4.0, "currency": "EUR"}: the first data part's value
    """

    id: str
    context_id: str = ""
    status: TaskStatus
    artifacts: list[Artifact] = []
    history: list[Message] = []
    metadata: Json | None = None
    #: A2A 1.1: the task's generation, 1 when created, one more with every event (a status change or an
    #: artifact update); 0 where it is not known. Sent only to clients that asked for generations.
    generation: int = 0

    @property
    def text(self) -> str:
        """The text parts of the artifacts, in order, joined by newlines ("" when there are none). An
        artifact sent in chunks reads as one text: its parts are joined without a separator."""
        return "\n".join(
            "".join(part.text for part in artifact.parts if isinstance(part.text, str))
            for artifact in self.artifacts
            if any(isinstance(part.text, str) for part in artifact.parts)
        )

    @property
    def data(self) -> Any:
        """The value of the artifacts' first data part (a skill's JSON result), or None when none has one."""
        for artifact in self.artifacts:
            for part in artifact.parts:
                if part.data is not UNSET:
                    return part.data
        return None


class TaskStatusUpdateEvent(_Event, frozen=True, kw_only=True):
    task_id: str
    context_id: str
    status: TaskStatus
    metadata: Json | None = None
    #: A2A 1.1: the task's generation after this event.
    generation: int = 0


class TaskArtifactUpdateEvent(_Event, frozen=True, kw_only=True):
    task_id: str
    context_id: str
    artifact: Artifact
    append: bool = False
    last_chunk: bool = False
    metadata: Json | None = None
    #: A2A 1.1: the task's generation after this event.
    generation: int = 0


class StreamResponse(_Event, frozen=True, kw_only=True):
    """The envelope of every stream event and push notification: exactly one member is set."""

    task: Task | None = None
    message: Message | None = None
    status_update: TaskStatusUpdateEvent | None = None
    artifact_update: TaskArtifactUpdateEvent | None = None


class SendMessageResponse(_Proto, kw_only=True):
    task: Task | None = None
    message: Message | None = None


# -- Push notification configuration ---------------------------------------------------------------------


class AuthenticationInfo(_Proto, kw_only=True):
    scheme: str
    credentials: str = ""


class TaskPushNotificationConfig(_Proto, kw_only=True):
    tenant: str = ""
    id: str = ""
    task_id: str = ""
    url: str
    token: str = ""
    authentication: AuthenticationInfo | None = None


# -- Requests and responses -------------------------------------------------------------------------------

NonNegative = Annotated[int, Meta(ge=0)]


class SendMessageConfiguration(_Proto, kw_only=True):
    accepted_output_modes: list[str] = []
    task_push_notification_config: TaskPushNotificationConfig | None = None
    history_length: NonNegative | None = None
    return_immediately: bool = False
    #: A2A 1.1: refuse the message (TaskGenerationMismatchError) unless the task is at this generation.
    if_generation_match: NonNegative | None = None


class SendMessageRequest(_Proto, kw_only=True):
    tenant: str = ""
    message: Message
    configuration: SendMessageConfiguration | None = None
    metadata: Json | None = None


class GetTaskRequest(_Proto, kw_only=True):
    tenant: str = ""
    id: Annotated[str, Meta(min_length=1)]
    history_length: NonNegative | None = None
    #: A2A 1.1 long-poll: answer once the task's generation is greater than this (or at a time limit).
    current_generation: NonNegative | None = None


class ListTasksRequest(_Proto, kw_only=True):
    tenant: str = ""
    context_id: str = ""
    status: TaskState = TaskState.UNSPECIFIED
    page_size: Annotated[int, Meta(ge=1, le=100)] | None = None
    page_token: str = ""
    history_length: NonNegative | None = None
    status_timestamp_after: datetime | None = None
    include_artifacts: bool | None = None


class ListTasksResponse(Struct, rename="camel", kw_only=True, gc=False):
    """Every field is REQUIRED and printed even when empty (``nextPageToken: ""`` on the last page)."""

    tasks: list[Task]
    next_page_token: str
    page_size: int
    total_size: int


class CancelTaskRequest(_Proto, kw_only=True):
    tenant: str = ""
    id: Annotated[str, Meta(min_length=1)]
    metadata: Json | None = None


class SubscribeToTaskRequest(_Proto, kw_only=True):
    tenant: str = ""
    id: Annotated[str, Meta(min_length=1)]
    #: The generations extension: resume after this generation (the last event the client saw) instead of
    #: starting with the task's snapshot. HTTP clients may send ``Last-Event-ID`` instead.
    after_generation: NonNegative | None = None


class GetTaskPushNotificationConfigRequest(_Proto, kw_only=True):
    tenant: str = ""
    task_id: Annotated[str, Meta(min_length=1)]
    id: Annotated[str, Meta(min_length=1)]


class DeleteTaskPushNotificationConfigRequest(_Proto, kw_only=True):
    tenant: str = ""
    task_id: Annotated[str, Meta(min_length=1)]
    id: Annotated[str, Meta(min_length=1)]


class ListTaskPushNotificationConfigsRequest(_Proto, kw_only=True):
    tenant: str = ""
    task_id: Annotated[str, Meta(min_length=1)]
    page_size: int = 0
    page_token: str = ""


class ListTaskPushNotificationConfigsResponse(_Proto, kw_only=True):
    configs: list[TaskPushNotificationConfig] = []
    next_page_token: str = ""


class GetExtendedAgentCardRequest(_Proto, kw_only=True):
    tenant: str = ""


# -- Agent card -------------------------------------------------------------------------------------------


class AgentInterface(_Proto, kw_only=True):
    url: str
    protocol_binding: str
    tenant: str = ""
    protocol_version: str


class AgentProvider(_Proto, kw_only=True):
    url: str
    organization: str


class AgentExtension(_Proto, kw_only=True):
    uri: str = ""
    description: str = ""
    required: bool = False
    params: Json | None = None


class AgentCapabilities(_Proto, kw_only=True):
    streaming: bool | None = None
    push_notifications: bool | None = None
    extensions: list[AgentExtension] = []
    extended_agent_card: bool | None = None


_Strings = list[str]


class StringList(_Proto, kw_only=True):
    list: _Strings = []


class SecurityRequirement(_Proto, kw_only=True):
    schemes: dict[str, StringList] = {}


class AgentSkill(_Proto, kw_only=True):
    id: str
    name: str
    description: str
    tags: list[str]
    examples: list[str] = []
    input_modes: list[str] = []
    output_modes: list[str] = []
    security_requirements: list[SecurityRequirement] = []


class AgentCardSignature(_Proto, kw_only=True):
    protected: str
    signature: str
    header: Json | None = None


class AgentCard(_Proto, kw_only=True):
    name: str
    description: str
    supported_interfaces: list[AgentInterface]
    provider: AgentProvider | None = None
    version: str
    documentation_url: str | None = None
    capabilities: AgentCapabilities
    #: name -> SecurityScheme (a oneof wrapper such as ``{"httpAuthSecurityScheme": {...}}``).
    security_schemes: dict[str, Json] = {}
    security_requirements: list[SecurityRequirement] = []
    default_input_modes: list[str]
    default_output_modes: list[str]
    skills: list[AgentSkill]
    signatures: list[AgentCardSignature] = []
    icon_url: str | None = None


def generation_of(event: StreamResponse) -> int:
    """The task generation an event carries (0: a message reply, or an event without one)."""
    if event.status_update is not None:
        return event.status_update.generation
    if event.artifact_update is not None:
        return event.artifact_update.generation
    if event.task is not None:
        return event.task.generation
    return 0


#: Random bytes are read from the operating system this many at a time, per thread (409 ids a read).
RANDOM_BLOCK = 4096
_HEX_PER_ID = (
    20  # 10 random bytes as hex: the 74 random bits of an id, and 6 that the version and variant set
)
_GROUPS = RANDOM_BLOCK // (_HEX_PER_ID // 2)  # ids a block makes
_BLOCK_BYTES = _GROUPS * (_HEX_PER_ID // 2)
# Each id's 10 random bytes as one big number's: the high nibble of the first byte becomes the version (7),
# the two high bits of the third the variant (10), for a whole block in two integer operations.
_KEEP = int.from_bytes(bytes([0x0F, 0xFF, 0x3F, *[0xFF] * 7]) * _GROUPS, "big")
_SET = int.from_bytes(bytes([0x70, 0x00, 0x80, *[0x00] * 7]) * _GROUPS, "big")


class _Ids(threading.local):
    """Each thread's makings of ids: random hex drawn from ``os.urandom`` a block at a time, with the
    version and variant bits set for the whole block, and the time prefix of the current millisecond.

    ``os.urandom`` gives up the GIL for its system call. On the event loop's thread, with another thread
    busy (the SQLite writer, the checkpointer), getting the GIL back waits for that thread's switch interval:
    measured, 451 µs for one id instead of 1.5. One read per 409 ids pays that once; a block is made ready in
    about 20 µs (laying out its 409 ids at once took 190 µs, a latency spike), and the prefix is made once a
    millisecond (issue 31). The bytes are the operating system's CSPRNG's, each used once; a forked child
    starts with none (:func:`os.register_at_fork`), so parent and child never share them."""

    def __init__(self) -> None:
        self.hex = ""
        self.next = 0
        self.millisecond = -1
        self.prefix = ""

    def tail(self) -> str:
        """The last three groups of the next id (``7xxx-yxxx-xxxxxxxxxxxx``)."""
        at = self.next
        if at >= len(self.hex):
            number = int.from_bytes(os.urandom(_BLOCK_BYTES), "big") & _KEEP | _SET
            self.hex, at = number.to_bytes(_BLOCK_BYTES, "big").hex(), 0
        self.next = at + _HEX_PER_ID
        text = self.hex
        return f"{text[at : at + 4]}-{text[at + 4 : at + 8]}-{text[at + 8 : at + _HEX_PER_ID]}"


_ids = _Ids()


def _forget_random_bytes() -> None:
    _ids.hex, _ids.next = "", 0


os.register_at_fork(after_in_child=_forget_random_bytes)


def new_id() -> str:
    """A time-ordered (version 7, RFC 9562) UUID as text, for task, context, message and artifact ids.

    The first 48 bits are the time in milliseconds, so ids made one after the other sort together and a
    store's index on them grows at its end instead of at random places (a third more SendMessage throughput
    with the SQLite store, measured). The other 74 bits come from the operating system's CSPRNG, so an id
    cannot be guessed from another one."""
    ids = _ids
    millisecond = time.time_ns() // 1_000_000
    if millisecond != ids.millisecond:
        stamp = f"{millisecond:012x}"
        ids.millisecond, ids.prefix = millisecond, f"{stamp[:8]}-{stamp[8:]}-"
    return ids.prefix + ids.tail()


def agent_text(text: str, *, context_id: str, task_id: str = "") -> Message:
    """An agent message holding one text part, with a fresh id (status notes, replies)."""
    return Message(
        message_id=new_id(),
        context_id=context_id,
        task_id=task_id,
        role=Role.AGENT,
        parts=[Part(text=text)],
    )


def to_builtins(obj: Any) -> Any:
    """A Struct as plain JSON-ready Python values (dicts, lists, strings)."""
    return msgspec.to_builtins(obj)
