"""The one error tree of skillwire.

Every error skillwire raises derives from :class:`SkillwireError`, so ``except SkillwireError`` catches them
all. Protocol errors are its :class:`A2AError` branch, and each declares, once, what it means on each wire:
its JSON-RPC code, HTTP status, gRPC status and ErrorInfo reason::

    A2AError                                 code    HTTP gRPC                reason
    +-- JSONParseError                       -32700  400  INVALID_ARGUMENT    PARSE_ERROR
    +-- InvalidRequestError                  -32600  400  INVALID_ARGUMENT    INVALID_REQUEST
    +-- MethodNotFoundError                  -32601  404  UNIMPLEMENTED       METHOD_NOT_FOUND
    +-- InvalidParamsError                   -32602  400  INVALID_ARGUMENT    INVALID_PARAMS
    |   +-- WebhookRefusedError              -32602  400  INVALID_ARGUMENT    INVALID_PARAMS
    |   +-- IdempotencyKeyReusedError        -32602  422  INVALID_ARGUMENT    IDEMPOTENCY_KEY_REUSED
    +-- InternalError                        -32603  500  INTERNAL            INTERNAL_ERROR
    |   +-- ServerBusyError                  -32603  503  UNAVAILABLE         SERVER_BUSY
    |       +-- StreamDroppedError           -32603  503  UNAVAILABLE         STREAM_DROPPED
    |       +-- ServiceUnavailableError      -32603  503  UNAVAILABLE         SERVICE_UNAVAILABLE
    |       +-- AgentNotStartedError         -32603  503  UNAVAILABLE         AGENT_NOT_STARTED
    +-- ResponseTooLargeError                -32602  400  FAILED_PRECONDITION RESPONSE_TOO_LARGE
    +-- TaskNotFoundError                    -32001  404  NOT_FOUND           TASK_NOT_FOUND
    +-- TaskNotCancelableError               -32002  400  FAILED_PRECONDITION TASK_NOT_CANCELABLE
    +-- PushNotificationNotSupportedError    -32003  400  FAILED_PRECONDITION PUSH_NOTIFICATION_NOT_SUPPORTED
    +-- UnsupportedOperationError            -32004  400  FAILED_PRECONDITION UNSUPPORTED_OPERATION
    +-- ContentTypeNotSupportedError         -32005  400  INVALID_ARGUMENT    CONTENT_TYPE_NOT_SUPPORTED
    +-- InvalidAgentResponseError            -32006  500  INTERNAL            INVALID_AGENT_RESPONSE
    +-- ExtendedAgentCardNotConfiguredError  -32007  400  FAILED_PRECONDITION EXTENDED_AGENT_CARD_NOT_CONFIGURED
    +-- ExtensionSupportRequiredError        -32008  400  FAILED_PRECONDITION EXTENSION_SUPPORT_REQUIRED
    +-- VersionNotSupportedError             -32009  400  FAILED_PRECONDITION VERSION_NOT_SUPPORTED
    +-- TaskGenerationMismatchError          -32010  409  ABORTED             TASK_GENERATION_MISMATCH
    +-- UnauthenticatedError                 -32040  401  UNAUTHENTICATED     UNAUTHENTICATED
    +-- PermissionDeniedError                -32041  403  PERMISSION_DENIED   PERMISSION_DENIED

MethodNotFoundError also answers "not implemented"; UnauthenticatedError (no or bad credentials) carries the
``WWW-Authenticate`` challenges of the agent's schemes and PermissionDeniedError (authenticated, but not
enough) never says whether what was asked for exists: the spec leaves their JSON-RPC codes to the
implementation, so -32040 and -32041 are skillwire's, and both answer HTTP 401/403 on JSON-RPC too; ServerBusyError carries Retry-After; StreamDroppedError is
a stream that fell behind its task; ResponseTooLargeError asks for less; WebhookRefusedError is a webhook
URL the SSRF guard refuses (:mod:`skillwire.server.notifications.outbound`): a caller's bad parameter, so the same wire
meaning as InvalidParamsError, with the reason in the message (also raised at delivery, to the server).
IdempotencyKeyReusedError is an ``Idempotency-Key`` sent again with another request (HTTP 422, as the IETF
idempotency-key draft asks). TaskGenerationMismatchError is A2A 1.1's answer to ``ifGenerationMatch`` (its
code is the one the 1.1 draft gives). The HTTP and gRPC columns follow the v1.0.1 table of the A2A
specification. Bindings never keep a code table of their own: they read these class
attributes (tests/test_errors.py checks that the table above says what the classes say).

The framework's own errors, which are not protocol errors, are the rest of the tree::

    SkillwireError
    +-- A2AError                  the protocol errors above
    +-- ConcurrentUpdateError     a store refused a stale write
    |   +-- KeyClaimedError       ... or one whose Idempotency-Key another request claimed first
    +-- StoreError                a store could not commit or read (disk full, I/O error, locked, read-only)
    |   +-- StoreUnavailableError  its database cannot be reached for now (an outage, not the request)
    +-- MissingExtraError         an optional feature whose extra is not installed (also an ImportError): its
    |                             message is the pip command that installs it from where you stand
    +-- ManifestError             a SKILL.md that is not valid (key path, line, reason)
    +-- SchemaError               a JSON Schema that does not compile (schema location, reason)
    +-- ValidationError           a JSON value that fails a schema (instance location, schema location, reason)
    +-- RenderError               a template that cannot be rendered (location, reason)
    +-- CardSignatureError        an agent card whose signatures do not verify (unsigned, unknown or revoked
    |                             key, algorithm not allowed, tampered with): the card is not to be trusted
    +-- WebhookVerificationError  a push-notification delivery whose signed token does not verify (missing,
    |                             bad signature, unknown key, wrong iss/aud, expired, body hash, replayed)
    +-- ProgressError             a skill's progress report (ctx.working, ctx.artifact, ...) that was not recorded
    |   +-- TaskClosedError         its task had already ended (canceled, past its deadline, ended elsewhere)
    |   +-- ProgressNotStoredError  the task store could not record it (the run is over: the task is failed)
    +-- SkillError                raised by a skill handler to end its task: FAILED, with its message
        +-- SkillInvalidRequestError  the input cannot be served as asked: FAILED (``SkillError.invalid_request``)
        +-- SkillRejectedError        a contract or policy refusal: REJECTED (``SkillError.rejected``)
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any, ClassVar

__all__ = [
    "A2AError",
    "AgentNotStartedError",
    "CardSignatureError",
    "ConcurrentUpdateError",
    "ContentTypeNotSupportedError",
    "ExtendedAgentCardNotConfiguredError",
    "ExtensionSupportRequiredError",
    "IdempotencyKeyReusedError",
    "InternalError",
    "InvalidAgentResponseError",
    "InvalidParamsError",
    "InvalidRequestError",
    "JSONParseError",
    "KeyClaimedError",
    "ManifestError",
    "MethodNotFoundError",
    "MissingExtraError",
    "PermissionDeniedError",
    "ProgressError",
    "ProgressNotStoredError",
    "PushNotificationNotSupportedError",
    "RenderError",
    "ResponseTooLargeError",
    "SchemaError",
    "ServerBusyError",
    "ServiceUnavailableError",
    "SkillError",
    "SkillInvalidRequestError",
    "SkillRejectedError",
    "SkillwireError",
    "StoreError",
    "StoreUnavailableError",
    "StreamDroppedError",
    "TaskClosedError",
    "TaskGenerationMismatchError",
    "TaskNotCancelableError",
    "TaskNotFoundError",
    "UnauthenticatedError",
    "UnsupportedOperationError",
    "ValidationError",
    "VersionNotSupportedError",
    "WebhookRefusedError",
    "WebhookVerificationError",
    "install_command",
]

ERROR_DOMAIN = "a2a-protocol.org"
ERROR_INFO_TYPE = "type.googleapis.com/google.rpc.ErrorInfo"
BAD_REQUEST_TYPE = "type.googleapis.com/google.rpc.BadRequest"


class SkillwireError(Exception):
    """The root of every skillwire error: the protocol errors (:class:`A2AError`) and the framework's own
    (configuration, storage, loading, skills)."""


class ConcurrentUpdateError(SkillwireError):
    """A store refused a write because the stored version of the task is not the one it was made from."""


class KeyClaimedError(ConcurrentUpdateError):
    """A store refused a write whose idempotency claim's key is claimed already (another request with the
    same ``Idempotency-Key`` was first); nothing of the write is stored."""


class StoreError(SkillwireError):
    """A store could not commit a write (or answer a read): nothing of that write is stored."""


class StoreUnavailableError(StoreError):
    """The store's database cannot be reached for now (refused, lost or timed-out connections): an outage
    that ends when the database is back, not a fault of the request."""


class MissingExtraError(SkillwireError, ImportError):
    """``what`` needs the optional extra ``extra``, which is not installed; the message names the command that
    installs it (:func:`install_command`)::

        raise MissingExtraError("--reload needs watchfiles", "reload")
        # --reload needs watchfiles: pip install 'skillwire[reload]'  (in a checkout: pip install -e '.[reload]')
    """

    def __init__(self, what: str, extra: str) -> None:
        self.extra = extra
        super().__init__(f"{what}: {install_command(extra)}")


def install_command(extra: str) -> str:
    """The pip command that installs ``extra`` where skillwire runs from: ``pip install 'skillwire[extra]'``
    for an installed package, ``pip install -e '.[extra]'`` in a checkout (an editable install, or ``src``
    on the path), with the checkout's path when the working directory is elsewhere."""
    checkout = _checkout()
    if checkout is None:
        return f"pip install {shlex.quote(f'skillwire[{extra}]')}"
    try:
        here = Path.cwd().resolve() == checkout
    except OSError:  # the working directory is gone
        here = False
    where = "." if here else str(checkout)
    return f"pip install -e {shlex.quote(f'{where}[{extra}]')}"


def _checkout() -> Path | None:
    """The source tree this package is imported from (``src/skillwire`` under a pyproject.toml that names
    skillwire), or None for an installed package."""
    root = Path(__file__).resolve().parent.parent.parent
    try:
        project = (root / "pyproject.toml").read_text(encoding="utf-8")
    except OSError:
        return None
    return root if 'name = "skillwire"' in project else None


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


class CardSignatureError(SkillwireError):
    """An agent card that cannot be trusted: it carries no signature, or none of its signatures verifies
    against the keys given (each signature's reason is in the message, and in ``reasons``)."""

    def __init__(self, message: str, *, reasons: list[str] | None = None) -> None:
        self.reasons = reasons or []
        super().__init__(message)


class WebhookVerificationError(SkillwireError):
    """A push-notification delivery that is not to be trusted (see :mod:`skillwire.webhooks`): ``status`` is
    the HTTP status a receiver answers with (401; 413 for a body over the limit; 503 with ``retry_after``
    seconds when the sender's keys cannot be fetched right now, so the sender retries)."""

    def __init__(self, message: str, *, status: int = 401, retry_after: int | None = None) -> None:
        self.status = status
        self.retry_after = retry_after
        super().__init__(message)


class ProgressError(SkillwireError):
    """A skill's progress report (``ctx.working``, ``ctx.artifact``, ...) that reached no one, on task
    ``task_id``. Nothing about the task changes by it; a handler that lets it go ends its run quietly (the
    skill runner logs one line)."""

    def __init__(self, message: str, *, task_id: str) -> None:
        self.message = message
        self.task_id = task_id
        super().__init__(message)


class TaskClosedError(ProgressError):
    """The task had already ended, in ``state`` (a TaskState name: CANCELED, FAILED at its deadline, or
    whatever another server process ended it with): whatever the handler does now, nobody sees it."""

    def __init__(self, message: str, *, task_id: str, state: str) -> None:
        super().__init__(message, task_id=task_id)
        self.state = state


class ProgressNotStoredError(ProgressError):
    """The task store could not record the update: the run is over, and the task is failed with a reason
    (once the store works again)."""


class SkillError(SkillwireError):
    """Raised by a skill handler to end its task with a stated reason the client may see: the task ends
    FAILED (:class:`SkillInvalidRequestError`, or this class itself) or REJECTED (:class:`SkillRejectedError`)
    with ``message`` as its status message::

        raise SkillError.invalid_request("The date must be in the future.")   # FAILED
        raise SkillError.rejected("Orders over 100 need approval.")           # REJECTED
    """

    def __init__(self, message: str) -> None:
        self.message = message
        super().__init__(message)

    @classmethod
    def invalid_request(cls, message: str) -> SkillInvalidRequestError:
        return SkillInvalidRequestError(message)

    @classmethod
    def rejected(cls, message: str) -> SkillRejectedError:
        return SkillRejectedError(message)


class SkillInvalidRequestError(SkillError):
    """The skill cannot serve the request as asked: its task FAILS with the message."""


class SkillRejectedError(SkillError):
    """The skill refuses the request (a contract or policy refusal): its task is REJECTED with the message."""


class A2AError(SkillwireError):
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


class WebhookRefusedError(InvalidParamsError):
    """A webhook URL the SSRF guard refuses, with why: ``WebhookRefusedError("loopback address 127.0.0.1")``
    says "Webhook URL refused: loopback address 127.0.0.1"; ``refusal`` is the part after the colon."""

    default_message = "Webhook URL refused"

    def __init__(self, refusal: str | None = None, **kwargs: Any) -> None:
        self.refusal = refusal or ""
        super().__init__(f"{self.default_message}: {refusal}" if refusal else None, **kwargs)


class IdempotencyKeyReusedError(InvalidParamsError):
    """An ``Idempotency-Key`` already used, within its window, for another request by the same caller."""

    http_status = 422
    reason = "IDEMPOTENCY_KEY_REUSED"
    default_message = "This Idempotency-Key was used for another request"
    a2a_specific = True


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
        self,
        message: str | None = None,
        *,
        retry_after: int | None = None,
        metadata: dict[str, Any] | None = None,
        field_violations: list[tuple[str, str]] | None = None,
    ) -> None:
        if retry_after is None:  # decoded from the wire: the ErrorInfo metadata says it, else 1 s
            given = str((metadata or {}).get("retryAfter", ""))
            retry_after = int(given) if given.isdigit() else 1
        super().__init__(
            message,
            metadata={**(metadata or {}), "retryAfter": retry_after},
            field_violations=field_violations,
        )
        self.retry_after = retry_after


class StreamDroppedError(ServerBusyError):
    """A stream that fell too far behind its task (its subscriber's queue passed its bound) or whose client
    took nothing for ``write_timeout``: it was dropped and can be resumed with SubscribeToTask."""

    reason = "STREAM_DROPPED"
    default_message = "The stream was dropped: it fell behind its task; subscribe again to catch up"


class ServiceUnavailableError(ServerBusyError):
    """A service the server depends on (its task store's database) cannot be reached for now: nothing of the
    request was stored; try again after ``retry_after`` seconds. The server recovers by itself when the
    service is back."""

    reason = "SERVICE_UNAVAILABLE"
    default_message = "A service the server depends on is unavailable: try again shortly"


class AgentNotStartedError(ServerBusyError):
    """The agent could not start (its store would not open, ...): nothing was done; the message says why,
    and a later request tries the start again."""

    reason = "AGENT_NOT_STARTED"
    default_message = "The agent could not start"


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

    @classmethod
    def for_task(cls, task_id: str) -> TaskNotFoundError:
        """The error for a task id that names no task (of the caller's tenant)."""
        return cls(f"Task {task_id} not found", metadata={"taskId": task_id})


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


class TaskGenerationMismatchError(A2AError):
    """A2A 1.1: a SendMessage whose ``ifGenerationMatch`` is not the task's generation (it moved on)."""

    code = -32010
    http_status = 409
    grpc_status = "ABORTED"
    reason = "TASK_GENERATION_MISMATCH"
    default_message = "The task's generation does not match"
    a2a_specific = True


class UnauthenticatedError(A2AError):
    """No credentials, or credentials that do not verify: HTTP 401 with ``WWW-Authenticate``."""

    code = -32040
    http_status = 401
    grpc_status = "UNAUTHENTICATED"
    reason = "UNAUTHENTICATED"
    default_message = "Authentication required"
    a2a_specific = True

    def __init__(
        self,
        message: str | None = None,
        *,
        challenges: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        field_violations: list[tuple[str, str]] | None = None,
    ) -> None:
        super().__init__(message, metadata=metadata, field_violations=field_violations)
        #: ``WWW-Authenticate`` values, one per scheme that has a challenge (``Bearer``, ``Basic ...``).
        self.challenges = challenges or []


class PermissionDeniedError(A2AError):
    """Authenticated, but the credentials do not grant what the call needs (a scope, a tenant): HTTP 403."""

    code = -32041
    http_status = 403
    grpc_status = "PERMISSION_DENIED"
    reason = "PERMISSION_DENIED"
    default_message = "Permission denied"
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
        TaskGenerationMismatchError,
        UnauthenticatedError,
        PermissionDeniedError,
    )
}

#: Every protocol error class by ErrorInfo reason, the refinements of a code included (ServerBusyError and
#: its kinds travel as -32603): a decoder takes the class a reason names when it refines the code's class.
_REFINEMENTS: tuple[type[A2AError], ...] = (
    IdempotencyKeyReusedError,
    ServerBusyError,
    ServiceUnavailableError,
    StreamDroppedError,
    AgentNotStartedError,
)
ERRORS_BY_REASON: dict[str, type[A2AError]] = {
    cls.reason: cls for cls in (*ERRORS_BY_CODE.values(), *_REFINEMENTS)
}
