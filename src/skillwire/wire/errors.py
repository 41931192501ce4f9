"""Protocol errors read back from the wire (sans-IO): the client half of what :mod:`skillwire.errors` writes.

An error travels as a JSON-RPC ``error`` object (``code``, ``message``, ``data``: a list of google.rpc
details) or as an AIP-193 ``error`` object (``code`` = the HTTP status, ``status`` = the google.rpc code name,
``message``, ``details``). Either reads back as the :class:`A2AError` subclass it was raised as, keeping
its message, its ErrorInfo metadata and its BadRequest field violations::

    error_from_jsonrpc({"code": -32001, "message": "Task t1 not found", "data": [...]})   # TaskNotFoundError
    error_from_status({"code": 404, "status": "NOT_FOUND", "details": [{"reason": "TASK_NOT_FOUND", ...}]})
"""

from __future__ import annotations

from typing import Any

from skillwire.errors import (
    BAD_REQUEST_TYPE,
    ERROR_INFO_TYPE,
    ERRORS_BY_CODE,
    ERRORS_BY_REASON,
    A2AError,
    InternalError,
    InvalidParamsError,
    PermissionDeniedError,
    UnauthenticatedError,
)

__all__ = ["error_from_jsonrpc", "error_from_status"]

_ERRORS_BY_REASON = ERRORS_BY_REASON
#: ErrorInfo is required of the A2A-specific errors only, so a standard error may come without one: these
#: google.rpc codes stand for one standard JSON-RPC error each.
_ERRORS_BY_STATUS: dict[str, type[A2AError]] = {
    "INVALID_ARGUMENT": InvalidParamsError,  # -32602
    "INTERNAL": InternalError,  # -32603
    # another server's 401/403 (a proxy, an a2a-sdk agent) carries no ErrorInfo of ours
    "UNAUTHENTICATED": UnauthenticatedError,
    "PERMISSION_DENIED": PermissionDeniedError,
}


def _build_error(cls: type[A2AError], message: Any, details: Any) -> A2AError:
    metadata: dict[str, Any] = {}
    violations: list[tuple[str, str]] = []
    for detail in details if isinstance(details, list) else ():
        if not isinstance(detail, dict):
            continue
        if detail.get("@type") == ERROR_INFO_TYPE and isinstance(detail.get("metadata"), dict):
            metadata.update(detail["metadata"])
        elif detail.get("@type") == BAD_REQUEST_TYPE:
            for v in detail.get("fieldViolations") or ():
                if isinstance(v, dict):
                    violations.append((str(v.get("field", "")), str(v.get("description", ""))))
    text = message if isinstance(message, str) and message else None
    return cls(text, metadata=metadata, field_violations=violations)


def _reason(details: Any) -> str | None:
    for detail in details if isinstance(details, list) else ():
        if isinstance(detail, dict) and detail.get("@type") == ERROR_INFO_TYPE:
            reason = detail.get("reason")
            return reason if isinstance(reason, str) else None
    return None


def error_from_jsonrpc(error: Any) -> A2AError:
    """The A2AError for a JSON-RPC ``error`` object: the class comes from ``code``."""
    if not isinstance(error, dict):
        return InternalError(f"malformed JSON-RPC error: {error!r}"[:200])
    code = error.get("code")
    cls = ERRORS_BY_CODE.get(code) if isinstance(code, int) else None
    named = _ERRORS_BY_REASON.get(_reason(error.get("data")) or "")
    if cls is None:  # an unknown code: fall back on the ErrorInfo reason, then on the base class
        cls = named or A2AError
    elif named is not None and issubclass(named, cls):  # a kind of the code's error (-32603: server busy)
        cls = named
    return _build_error(cls, error.get("message"), error.get("data"))


def error_from_status(status: Any) -> A2AError | None:
    """The A2AError for an AIP-193 ``error`` object: the class comes from the ErrorInfo ``reason`` or, for an
    error without one, from a standard ``status`` (INTERNAL, INVALID_ARGUMENT); None otherwise."""
    if not isinstance(status, dict):
        return None
    cls = _ERRORS_BY_REASON.get(_reason(status.get("details")) or "")
    if cls is None:
        code = status.get("status")
        cls = _ERRORS_BY_STATUS.get(code) if isinstance(code, str) else None
    if cls is None:
        return None
    return _build_error(cls, status.get("message"), status.get("details"))
