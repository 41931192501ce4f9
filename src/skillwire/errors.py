"""The one error tree of skillwire.

Every protocol error is a subclass of :class:`A2AError` and declares, once, what it means on each wire::

    A2AError
    +-- JSONParseError                       -32700  400  INVALID_ARGUMENT
    +-- InvalidRequestError                  -32600  400  INVALID_ARGUMENT
    +-- MethodNotFoundError                  -32601  404  NOT_FOUND          (also "not implemented")
    +-- InvalidParamsError                   -32602  400  INVALID_ARGUMENT
    +-- InternalError                        -32603  500  INTERNAL
    |   +-- ServerBusyError                  -32603  503  UNAVAILABLE        (with Retry-After)
    |       +-- StreamDroppedError           -32603  503  UNAVAILABLE        (a stream that fell behind)
    +-- ResponseTooLargeError                -32602  400  FAILED_PRECONDITION (ask for less)
    +-- TaskNotFoundError                    -32001  404  NOT_FOUND
    +-- TaskNotCancelableError               -32002  400  FAILED_PRECONDITION
    +-- PushNotificationNotSupportedError    -32003  400  FAILED_PRECONDITION
    +-- UnsupportedOperationError            -32004  400  FAILED_PRECONDITION
    +-- ContentTypeNotSupportedError         -32005  400  INVALID_ARGUMENT
    +-- InvalidAgentResponseError            -32006  500  INTERNAL
    +-- ExtendedAgentCardNotConfiguredError  -32007  400  FAILED_PRECONDITION
    +-- ExtensionSupportRequiredError        -32008  400  FAILED_PRECONDITION
    +-- VersionNotSupportedError             -32009  400  FAILED_PRECONDITION

The HTTP and gRPC columns follow the v1.0.1 table of the A2A specification. Bindings never keep a code table
of their own: they read these class attributes.

Errors that are not protocol errors derive from :class:`SkillwireError`::

    SkillwireError
    +-- ConcurrentUpdateError   a store refused a stale write
    +-- StoreError              a store could not commit or read (disk full, I/O error, locked, read-only)
    +-- ManifestError           a SKILL.md that is not valid (key path, line, reason)
    +-- SchemaError             a JSON Schema that does not compile (schema location, reason)
    +-- ValidationError         a JSON value that fails a schema (instance location, schema location, reason)
    +-- RenderError             a template that cannot be rendered (location, reason)
    +-- SkillError              raised by a skill handler to end its task: invalid request or rejected
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "A2AError",
    "ConcurrentUpdateError",
    "ContentTypeNotSupportedError",
    "ExtendedAgentCardNotConfiguredError",
    "ExtensionSupportRequiredError",
    "InternalError",
    "InvalidAgentResponseError",
    "InvalidParamsError",
    "InvalidRequestError",
    "JSONParseError",
    "ManifestError",
    "MethodNotFoundError",
    "PushNotificationNotSupportedError",
    "RenderError",
    "ResponseTooLargeError",
    "SchemaError",
    "ServerBusyError",
    "SkillError",
    "SkillwireError",
    "StoreError",
    "StreamDroppedError",
    "TaskNotCancelableError",
    "TaskNotFoundError",
    "UnsupportedOperationError",
    "ValidationError",
    "VersionNotSupportedError",
]

ERROR_DOMAIN = "a2a-protocol.org"
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"


class SkillwireError(Exception):
    """An error of the framework itself, not of the protocol (configuration, storage, loading)."""


class ConcurrentUpdateError(SkillwireError):
    """A store refused a write because the stored version of the task is not the one it was made from."""


class StoreError(SkillwireError):
    """A store could not commit a write (or answer a read): nothing of that write is stored."""


class ManifestError(SkillwireError):
    """A skill manifest that is not valid. ``path`` is the key path (``inputSchema.properties.name``),
    ``line`` the 1-based line in the file when known, ``source`` the file name when known."""

    def __init__(self, reason: str, *, path: str = "", line: int | None = None, source: str = "") -> None:
        self.reason = reason
        self.path = path
        self.line = line
        self.source = source
        where = ":".join(part for part in (source, str(line) if line is not None else "") if part)
        prefix = " ".join(part for part in (where, path) if part)
        super().__init__(f"{prefix}: {reason}" if prefix else reason)


class SchemaError(SkillwireError):
    """A JSON Schema that does not compile; ``schema_path`` is a JSON pointer into the schema."""

    def __init__(self, reason: str, *, schema_path: str = "") -> None:
        self.reason = reason
        self.schema_path = schema_path
        super().__init__(f"schema {schema_path or '/'}: {reason}")


class ValidationError(SkillwireError):
    """A value that fails a schema: ``instance_path`` and ``schema_path`` are JSON pointers."""

    def __init__(self, reason: str, *, instance_path: str = "", schema_path: str = "") -> None:
        self.reason = reason
        self.instance_path = instance_path
        self.schema_path = schema_path
        super().__init__(f"{instance_path or '/'}: {reason} (schema {schema_path or '/'})")


class RenderError(SkillwireError):
    """A template that cannot be rendered; ``location`` is ``line:column`` in the template."""

    def __init__(self, reason: str, *, location: str = "", variable: str = "") -> None:
        self.reason = reason
        self.location = location
        self.variable = variable
        super().__init__(f"{location}: {reason}" if location else reason)


class SkillError(SkillwireError):
    """Raised by a skill handler to end its task with a stated reason the client may see.

    ``SkillError.invalid_request(msg)`` fails the task with ``msg`` as its status message;
    ``SkillError.rejected(msg)`` puts it in REJECTED (a contract or policy refusal).
    """

    INVALID_REQUEST = "invalid_request"
    REJECTED = "rejected"

    def __init__(self, message: str, *, kind: str = INVALID_REQUEST) -> None:
        if kind not in (self.INVALID_REQUEST, self.REJECTED):
            raise ValueError(f"unknown SkillError kind {kind!r}")
        self.message = message
        self.kind = kind
        super().__init__(message)

    @classmethod
    def invalid_request(cls, message: str) -> SkillError:
        return cls(message, kind=cls.INVALID_REQUEST)

    @classmethod
    def rejected(cls, message: str) -> SkillError:
        return cls(message, kind=cls.REJECTED)


class A2AError(Exception):
    """A protocol error. Subclasses set the class attributes below; instances carry a message."""

    code: ClassVar[int] = -32603
    http_status: ClassVar[int] = 500
    grpc_status: ClassVar[str] = "INTERNAL"
    reason: ClassVar[str] = "INTERNAL_ERROR"
    default_message: ClassVar[str] = "Internal error"
    #: Whether ErrorInfo is attached to the JSON-RPC ``data`` array (true for all A2A-specific errors).
    a2a_specific: ClassVar[bool] = False

    def __init__(
        self,
        message: str | None = None,
        *,
        metadata: dict[str, Any] | None = None,
        field_violations: list[tuple[str, str]] | None = None,
    ) -> None:
        self.message = message or self.default_message
        # google.rpc.ErrorInfo.metadata is map<string, string>: stringify once, here.
        self.metadata = {str(k): str(v) for k, v in (metadata or {}).items()}
        self.field_violations = field_violations or []
        super().__init__(self.message)

    def details(self) -> list[dict[str, Any]]:
        """The typed detail objects (``@type``-tagged) for JSON-RPC ``data`` and REST/gRPC ``details``."""
        out: list[dict[str, Any]] = [
            {
                "@type": ERROR_INFO_TYPE,
                "reason": self.reason,
                "domain": ERROR_DOMAIN,
                "metadata": self.metadata,
            }
            if self.metadata
            else {"@type": ERROR_INFO_TYPE, "reason": self.reason, "domain": ERROR_DOMAIN}
        ]
        if self.field_violations:
            out.append(
                {
                    "@type": BAD_REQUEST_TYPE,
                    "fieldViolations": [{"field": f, "description": d} for f, d in self.field_violations],
                }
            )
        return out

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r})"


# -- JSON-RPC 2.0 standard errors ------------------------------------------------------------------------


class JSONParseError(A2AError):
    code = -32700
    http_status = 400
    grpc_status = "INVALID_ARGUMENT"
    reason = "PARSE_ERROR"
    default_message = "Invalid JSON payload"


class InvalidRequestError(A2AError):
    code = -32600
    http_status = 400
    grpc_status = "INVALID_ARGUMENT"
    reason = "INVALID_REQUEST"
    default_message = "Invalid request"


class MethodNotFoundError(A2AError):
    code = -32601
    http_status = 404
    grpc_status = "UNIMPLEMENTED"
    reason = "METHOD_NOT_FOUND"
    default_message = "Method not found"


class InvalidParamsError(A2AError):
    code = -32602
    http_status = 400
    grpc_status = "INVALID_ARGUMENT"
    reason = "INVALID_PARAMS"
    default_message = "Invalid parameters"


class InternalError(A2AError):
    code = -32603
    http_status = 500
    grpc_status = "INTERNAL"
    reason = "INTERNAL_ERROR"
    default_message = "Internal error"


class ServerBusyError(InternalError):
    """The server is at a budget (running tasks, connections): try again after ``retry_after`` seconds.

    The spec's "system" class: HTTP 503 with ``Retry-After``, gRPC UNAVAILABLE, JSON-RPC -32603."""

    http_status = 503
    grpc_status = "UNAVAILABLE"
    reason = "SERVER_BUSY"
    default_message = "The server is busy: try again shortly"

    def __init__(
        self, message: str | None = None, *, retry_after: int = 1, metadata: dict[str, Any] | None = None
    ) -> None:
        super().__init__(message, metadata={"retryAfter": retry_after, **(metadata or {})})
        self.retry_after = retry_after


class StreamDroppedError(ServerBusyError):
    """A stream that fell too far behind its task (its subscriber's queue passed its bound) or whose client
    took nothing for ``write_timeout``: it was dropped and can be resumed with SubscribeToTask."""

    reason = "STREAM_DROPPED"
    default_message = "The stream was dropped: it fell behind its task; subscribe again to catch up"


class ResponseTooLargeError(A2AError):
    """An answer larger than the server sends (``max_response_bytes``): asking again cannot help, asking for
    less can (a shorter historyLength, a smaller page)."""

    code = -32602
    http_status = 400
    grpc_status = "FAILED_PRECONDITION"
    reason = "RESPONSE_TOO_LARGE"
    default_message = "The answer is larger than this server sends"


# -- A2A-specific errors (-32001 .. -32009) --------------------------------------------------------------


class TaskNotFoundError(A2AError):
    code = -32001
    http_status = 404
    grpc_status = "NOT_FOUND"
    reason = "TASK_NOT_FOUND"
    default_message = "Task not found"
    a2a_specific = True


class TaskNotCancelableError(A2AError):
    code = -32002
    http_status = 400
    grpc_status = "FAILED_PRECONDITION"
    reason = "TASK_NOT_CANCELABLE"
    default_message = "Task cannot be canceled"
    a2a_specific = True


class PushNotificationNotSupportedError(A2AError):
    code = -32003
    http_status = 400
    grpc_status = "FAILED_PRECONDITION"
    reason = "PUSH_NOTIFICATION_NOT_SUPPORTED"
    default_message = "Push notifications are not supported by this agent"
    a2a_specific = True


class UnsupportedOperationError(A2AError):
    code = -32004
    http_status = 400
    grpc_status = "FAILED_PRECONDITION"
    reason = "UNSUPPORTED_OPERATION"
    default_message = "This operation is not supported"
    a2a_specific = True


class ContentTypeNotSupportedError(A2AError):
    code = -32005
    http_status = 400
    grpc_status = "INVALID_ARGUMENT"
    reason = "CONTENT_TYPE_NOT_SUPPORTED"
    default_message = "Content type not supported"
    a2a_specific = True


class InvalidAgentResponseError(A2AError):
    code = -32006
    http_status = 500
    grpc_status = "INTERNAL"
    reason = "INVALID_AGENT_RESPONSE"
    default_message = "The agent produced an invalid response"
    a2a_specific = True


class ExtendedAgentCardNotConfiguredError(A2AError):
    code = -32007
    http_status = 400
    grpc_status = "FAILED_PRECONDITION"
    reason = "EXTENDED_AGENT_CARD_NOT_CONFIGURED"
    default_message = "No extended agent card is configured"
    a2a_specific = True


class ExtensionSupportRequiredError(A2AError):
    code = -32008
    http_status = 400
    grpc_status = "FAILED_PRECONDITION"
    reason = "EXTENSION_SUPPORT_REQUIRED"
    default_message = "A required extension was not activated"
    a2a_specific = True


class VersionNotSupportedError(A2AError):
    code = -32009
    http_status = 400
    grpc_status = "FAILED_PRECONDITION"
    reason = "VERSION_NOT_SUPPORTED"
    default_message = "Protocol version not supported"
    a2a_specific = True


#: Every protocol error class by JSON-RPC code, for decoders (the client maps codes back to classes).
ERRORS_BY_CODE: dict[int, type[A2AError]] = {
    cls.code: cls
    for cls in (
        JSONParseError,
        InvalidRequestError,
        MethodNotFoundError,
        InvalidParamsError,
        InternalError,
        TaskNotFoundError,
        TaskNotCancelableError,
        PushNotificationNotSupportedError,
        UnsupportedOperationError,
        ContentTypeNotSupportedError,
        InvalidAgentResponseError,
        ExtendedAgentCardNotConfiguredError,
        ExtensionSupportRequiredError,
        VersionNotSupportedError,
    )
}
