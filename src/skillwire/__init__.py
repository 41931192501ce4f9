"""skillwire: build, serve and call A2A agents made of skills.

Everything a user needs is importable from here: ``from skillwire import Agent, TaskEvents, Message``.
"""

from typing import TYPE_CHECKING, Any

from skillwire.agent import DEFAULT_STORE, Agent
from skillwire.errors import (
    A2AError,
    ConcurrentUpdateError,
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    ExtensionSupportRequiredError,
    InternalError,
    InvalidAgentResponseError,
    InvalidParamsError,
    InvalidRequestError,
    JSONParseError,
    ManifestError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    RenderError,
    ResponseTooLargeError,
    SchemaError,
    ServerBusyError,
    SkillError,
    SkillwireError,
    StoreError,
    StreamDroppedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
    ValidationError,
    VersionNotSupportedError,
)
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import (
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentProvider,
    AgentSkill,
    Artifact,
    CancelTaskRequest,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskArtifactUpdateEvent,
    TaskPushNotificationConfig,
    TaskStatus,
    TaskStatusUpdateEvent,
)
from skillwire.protocol.operations import Operation
from skillwire.protocol.states import TaskState
from skillwire.server.app import A2AApplication
from skillwire.server.bus import EventBus, InProcessEventBus
from skillwire.server.context import CallContext, Caller
from skillwire.server.executor import Executor, RequestContext, TaskEvents
from skillwire.server.handler import BaseRequestHandler, RequestHandler
from skillwire.server.runtime import TaskRuntime
from skillwire.skills.context import Answer, SkillContext
from skillwire.skills.executor import Outcome, SkillExecutor
from skillwire.skills.registry import InMemorySkillRegistry, Skill, SkillRegistry
from skillwire.stores import MemoryTaskStore, SQLiteTaskStore, TaskPage, TaskQuery, TaskStore, open_store

if TYPE_CHECKING:
    from skillwire.client import (
        AgentConnectionError,
        Client,
        ClientError,
        Credentials,
        HTTPStatusError,
        JsonRpcTransport,
        RestTransport,
        RetryPolicy,
        SyncClient,
        TaskFailedError,
        Transport,
    )
    from skillwire.skills.manifest import SkillCard
    from skillwire.skills.schema import compile_schema, validate_json

__version__ = "0.1.0"

# Imported on first use: the client (httpx), manifests (YAML) and the schema compiler are not needed to
# serve an agent, and start-up time matters.
_LAZY = {
    "Client": "skillwire.client",
    "ClientError": "skillwire.client",
    "TaskFailedError": "skillwire.client",
    "AgentConnectionError": "skillwire.client",
    "HTTPStatusError": "skillwire.client",
    "RetryPolicy": "skillwire.client",
    "Transport": "skillwire.client",
    "JsonRpcTransport": "skillwire.client",
    "RestTransport": "skillwire.client",
    "SyncClient": "skillwire.client",
    "Credentials": "skillwire.client",
    "SkillCard": "skillwire.skills.manifest",
    "compile_schema": "skillwire.skills.schema",
    "validate_json": "skillwire.skills.schema",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'skillwire' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "DEFAULT_STORE",
    "A2AApplication",
    "A2AError",
    "Agent",
    "AgentCapabilities",
    "AgentCard",
    "AgentConnectionError",
    "AgentExtension",
    "AgentInterface",
    "AgentProvider",
    "AgentSkill",
    "Answer",
    "Artifact",
    "BaseRequestHandler",
    "CallContext",
    "Caller",
    "CancelTaskRequest",
    "Client",
    "ClientError",
    "ConcurrentUpdateError",
    "ContentTypeNotSupportedError",
    "Credentials",
    "EventBus",
    "Executor",
    "ExtendedAgentCardNotConfiguredError",
    "ExtensionSupportRequiredError",
    "GetExtendedAgentCardRequest",
    "GetTaskRequest",
    "HTTPStatusError",
    "InMemorySkillRegistry",
    "InProcessEventBus",
    "InternalError",
    "InvalidAgentResponseError",
    "InvalidParamsError",
    "InvalidRequestError",
    "JSONParseError",
    "JsonRpcTransport",
    "Limits",
    "ListTasksRequest",
    "ListTasksResponse",
    "ManifestError",
    "MemoryTaskStore",
    "Message",
    "MethodNotFoundError",
    "Operation",
    "Outcome",
    "Part",
    "PushNotificationNotSupportedError",
    "RenderError",
    "RequestContext",
    "RequestHandler",
    "ResponseTooLargeError",
    "RestTransport",
    "RetryPolicy",
    "Role",
    "SQLiteTaskStore",
    "SchemaError",
    "SendMessageConfiguration",
    "SendMessageRequest",
    "SendMessageResponse",
    "ServerBusyError",
    "Skill",
    "SkillCard",
    "SkillContext",
    "SkillError",
    "SkillExecutor",
    "SkillRegistry",
    "SkillwireError",
    "StoreError",
    "StreamDroppedError",
    "StreamResponse",
    "SubscribeToTaskRequest",
    "SyncClient",
    "Task",
    "TaskArtifactUpdateEvent",
    "TaskEvents",
    "TaskFailedError",
    "TaskNotCancelableError",
    "TaskNotFoundError",
    "TaskPage",
    "TaskPushNotificationConfig",
    "TaskQuery",
    "TaskRuntime",
    "TaskState",
    "TaskStatus",
    "TaskStatusUpdateEvent",
    "TaskStore",
    "Transport",
    "UnsupportedOperationError",
    "ValidationError",
    "VersionNotSupportedError",
    "__version__",
    "compile_schema",
    "open_store",
    "validate_json",
]
