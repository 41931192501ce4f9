"""The eleven A2A v1.0 operations, as one table.

Each row says everything a binding needs to know about one operation, so that no binding, transport or test
keeps a list of its own:

========================  ==========================  =======  ========  ==========================
operation (= gRPC rpc,    request / response          streams  gate      HTTP+JSON routes
JSON-RPC method)
========================  ==========================  =======  ========  ==========================
SendMessage               SendMessageRequest /        no       -         POST /message:send
                          SendMessageResponse
SendStreamingMessage      SendMessageRequest /        yes      streaming POST /message:stream
                          StreamResponse events
GetTask                   GetTaskRequest / Task       no       -         GET /tasks/{id}
ListTasks                 ListTasksRequest /          no       -         GET /tasks
                          ListTasksResponse
CancelTask                CancelTaskRequest / Task    no       -         POST /tasks/{id}:cancel
SubscribeToTask           SubscribeToTaskRequest /    yes      streaming POST|GET /tasks/{id}:subscribe
                          StreamResponse events
...PushNotificationConfig (four rows)                 no       push      /tasks/{taskId}/pushNotificationConfigs[/{id}]
GetExtendedAgentCard      GetExtendedAgentCardRequest no       extended  GET /extendedAgentCard
                          / AgentCard
========================  ==========================  =======  ========  ==========================

Every route is also served under a ``/{tenant}`` prefix. A route's ``body`` is ``"all"`` when the request
body is the request message (path parameters filled in from the path) or ``"none"`` when the request is the
path and query. The first route of an operation is the one clients use. ``handler`` names the request
handler's method (:class:`~skillwire.server.handler.BaseRequestHandler`); ``grpc_response`` names the
protobuf message of the answer (``Empty`` for the delete) for the gRPC binding, which stays importable
without protobuf.

Adding an operation is its name in :class:`Operation`, one row here (its request and response Structs in
:mod:`~skillwire.protocol.models`) and its ``on_*`` method on the handler: the JSON-RPC, HTTP+JSON and
gRPC servers, the client transports and the binding tests are driven from :data:`OPERATIONS`. An extension
method works the same way; one the gRPC service does not define is served over JSON-RPC and HTTP+JSON
only, and one with no routes over JSON-RPC only (``tests/test_operation_table.py`` adds one to a copy of
the package and calls it).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Literal

import msgspec

from skillwire.protocol import models as m

__all__ = [
    "OPERATIONS",
    "OPERATIONS_BY_METHOD",
    "Capability",
    "Operation",
    "OperationSpec",
    "Route",
    "spec_of",
]


class Capability(enum.Enum):
    STREAMING = "streaming"
    PUSH_NOTIFICATIONS = "pushNotifications"
    EXTENDED_AGENT_CARD = "extendedAgentCard"


class Operation(enum.StrEnum):
    SEND_MESSAGE = "SendMessage"
    SEND_STREAMING_MESSAGE = "SendStreamingMessage"
    GET_TASK = "GetTask"
    LIST_TASKS = "ListTasks"
    CANCEL_TASK = "CancelTask"
    SUBSCRIBE_TO_TASK = "SubscribeToTask"
    CREATE_PUSH_CONFIG = "CreateTaskPushNotificationConfig"
    GET_PUSH_CONFIG = "GetTaskPushNotificationConfig"
    LIST_PUSH_CONFIGS = "ListTaskPushNotificationConfigs"
    DELETE_PUSH_CONFIG = "DeleteTaskPushNotificationConfig"
    GET_EXTENDED_AGENT_CARD = "GetExtendedAgentCard"


@dataclass(frozen=True, slots=True)
class Route:
    """One HTTP+JSON route: ``method`` and a path template whose ``{id}`` / ``{taskId}`` are request fields."""

    method: str
    path: str
    #: "all": the body is the request message; "none": no body, the request is the path and the query.
    body: Literal["all", "none"] = "all"

    @property
    def path_fields(self) -> tuple[str, ...]:
        """The request fields (wire names) the path carries, in order."""
        return tuple(part.split("}")[0] for part in self.path.split("{")[1:])


@dataclass(frozen=True, slots=True)
class OperationSpec:
    operation: Operation
    request_type: type[msgspec.Struct]
    #: What a unary call answers (None: an empty answer); a streaming one answers StreamResponse events.
    response_type: type[msgspec.Struct] | None
    handler: str
    routes: tuple[Route, ...]
    grpc_response: str
    streaming: bool = False
    capability: Capability | None = None

    @property
    def method(self) -> str:
        """The JSON-RPC method name and the gRPC rpc name (they are the operation's name)."""
        return self.operation.value


_O, _C = Operation, Capability
_CONFIGS = "/tasks/{taskId}/pushNotificationConfigs"

OPERATIONS: tuple[OperationSpec, ...] = (
    OperationSpec(
        _O.SEND_MESSAGE,
        m.SendMessageRequest,
        m.SendMessageResponse,
        "on_send_message",
        (Route("POST", "/message:send"),),
        "SendMessageResponse",
    ),
    OperationSpec(
        _O.SEND_STREAMING_MESSAGE,
        m.SendMessageRequest,
        m.StreamResponse,
        "on_send_streaming_message",
        (Route("POST", "/message:stream"),),
        "StreamResponse",
        streaming=True,
        capability=_C.STREAMING,
    ),
    OperationSpec(
        _O.GET_TASK,
        m.GetTaskRequest,
        m.Task,
        "on_get_task",
        (Route("GET", "/tasks/{id}", "none"),),
        "Task",
    ),
    OperationSpec(
        _O.LIST_TASKS,
        m.ListTasksRequest,
        m.ListTasksResponse,
        "on_list_tasks",
        (Route("GET", "/tasks", "none"),),
        "ListTasksResponse",
    ),
    OperationSpec(
        _O.CANCEL_TASK,
        m.CancelTaskRequest,
        m.Task,
        "on_cancel_task",
        (Route("POST", "/tasks/{id}:cancel"),),
        "Task",
    ),
    OperationSpec(
        _O.SUBSCRIBE_TO_TASK,
        m.SubscribeToTaskRequest,
        m.StreamResponse,
        "on_subscribe_to_task",
        (Route("POST", "/tasks/{id}:subscribe"), Route("GET", "/tasks/{id}:subscribe", "none")),
        "StreamResponse",
        streaming=True,
        capability=_C.STREAMING,
    ),
    OperationSpec(
        _O.CREATE_PUSH_CONFIG,
        m.TaskPushNotificationConfig,
        m.TaskPushNotificationConfig,
        "on_create_task_push_notification_config",
        (Route("POST", _CONFIGS),),
        "TaskPushNotificationConfig",
        capability=_C.PUSH_NOTIFICATIONS,
    ),
    OperationSpec(
        _O.GET_PUSH_CONFIG,
        m.GetTaskPushNotificationConfigRequest,
        m.TaskPushNotificationConfig,
        "on_get_task_push_notification_config",
        (Route("GET", _CONFIGS + "/{id}", "none"),),
        "TaskPushNotificationConfig",
        capability=_C.PUSH_NOTIFICATIONS,
    ),
    OperationSpec(
        _O.LIST_PUSH_CONFIGS,
        m.ListTaskPushNotificationConfigsRequest,
        m.ListTaskPushNotificationConfigsResponse,
        "on_list_task_push_notification_configs",
        (Route("GET", _CONFIGS, "none"),),
        "ListTaskPushNotificationConfigsResponse",
        capability=_C.PUSH_NOTIFICATIONS,
    ),
    OperationSpec(
        _O.DELETE_PUSH_CONFIG,
        m.DeleteTaskPushNotificationConfigRequest,
        None,
        "on_delete_task_push_notification_config",
        (Route("DELETE", _CONFIGS + "/{id}", "none"),),
        "Empty",
        capability=_C.PUSH_NOTIFICATIONS,
    ),
    OperationSpec(
        _O.GET_EXTENDED_AGENT_CARD,
        m.GetExtendedAgentCardRequest,
        m.AgentCard,
        "on_get_extended_agent_card",
        (Route("GET", "/extendedAgentCard", "none"),),
        "AgentCard",
        capability=_C.EXTENDED_AGENT_CARD,
    ),
)

OPERATIONS_BY_METHOD: dict[str, OperationSpec] = {s.method: s for s in OPERATIONS}
_BY_OP: dict[Operation, OperationSpec] = {s.operation: s for s in OPERATIONS}


def spec_of(operation: Operation) -> OperationSpec:
    return _BY_OP[operation]
