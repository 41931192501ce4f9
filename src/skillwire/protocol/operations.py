"""The eleven A2A v1.0 operations, as one table.

Each operation names its request message, whether it streams, and the agent-card capability that gates it.
Bindings look operations up here by JSON-RPC method name (identical to the gRPC rpc name).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import msgspec

from skillwire.protocol import models as m

__all__ = ["OPERATIONS_BY_METHOD", "Capability", "Operation", "OperationSpec", "spec_of"]


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
class OperationSpec:
    operation: Operation
    request_type: type[msgspec.Struct]
    streaming: bool = False
    capability: Capability | None = None


_O, _C = Operation, Capability

_TABLE = (
    OperationSpec(_O.SEND_MESSAGE, m.SendMessageRequest),
    OperationSpec(_O.SEND_STREAMING_MESSAGE, m.SendMessageRequest, True, _C.STREAMING),
    OperationSpec(_O.GET_TASK, m.GetTaskRequest),
    OperationSpec(_O.LIST_TASKS, m.ListTasksRequest),
    OperationSpec(_O.CANCEL_TASK, m.CancelTaskRequest),
    OperationSpec(_O.SUBSCRIBE_TO_TASK, m.SubscribeToTaskRequest, True, _C.STREAMING),
    OperationSpec(_O.CREATE_PUSH_CONFIG, m.TaskPushNotificationConfig, False, _C.PUSH_NOTIFICATIONS),
    OperationSpec(_O.GET_PUSH_CONFIG, m.GetTaskPushNotificationConfigRequest, False, _C.PUSH_NOTIFICATIONS),
    OperationSpec(
        _O.LIST_PUSH_CONFIGS, m.ListTaskPushNotificationConfigsRequest, False, _C.PUSH_NOTIFICATIONS
    ),
    OperationSpec(
        _O.DELETE_PUSH_CONFIG, m.DeleteTaskPushNotificationConfigRequest, False, _C.PUSH_NOTIFICATIONS
    ),
    OperationSpec(_O.GET_EXTENDED_AGENT_CARD, m.GetExtendedAgentCardRequest, False, _C.EXTENDED_AGENT_CARD),
)

OPERATIONS_BY_METHOD: dict[str, OperationSpec] = {s.operation.value: s for s in _TABLE}
_BY_OP: dict[Operation, OperationSpec] = {s.operation: s for s in _TABLE}


def spec_of(operation: Operation) -> OperationSpec:
    return _BY_OP[operation]
