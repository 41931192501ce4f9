"""A2A errors in their v0.3 form, both ways: JSON-RPC codes and ``data`` (:func:`error_code`,
:func:`error_data`, :func:`decode_error`), and the v0.3 SDK servers' REST errors (:func:`rest_error`).

* Errors keep their codes except the v1.0-only ones (-32008 ExtensionSupportRequired, -32009
  VersionNotSupported), which v0.3 clients get as -32600 InvalidRequest; ``data`` is a small object naming
  the v1.0 ``reason``, so nothing is lost. -32007 keeps its code (v0.3 calls it
  AuthenticatedExtendedCardNotConfiguredError).
* The v0.3 SDK servers' REST errors are only ``{"message": ...}`` with an HTTP status (a2a-python 0.3's
  table): :func:`rest_error` maps the status back to the error class.
"""

from __future__ import annotations

from typing import Any

from skillwire.errors import (
    ERRORS_BY_CODE,
    ERRORS_BY_REASON,
    A2AError,
    ContentTypeNotSupportedError,
    ExtendedAgentCardNotConfiguredError,
    InternalError,
    InvalidAgentResponseError,
    InvalidParamsError,
    InvalidRequestError,
    PermissionDeniedError,
    PushNotificationNotSupportedError,
    TaskNotCancelableError,
    TaskNotFoundError,
    UnauthenticatedError,
    UnsupportedOperationError,
)
from skillwire.protocol.operations import Operation

__all__ = ["decode_error", "error_code", "error_data", "rest_error"]

_O = Operation

#: A2A error codes that exist only in v1.0 (-32008 ExtensionSupportRequired, -32009 VersionNotSupported, and
#: any later ones): v0.3 has no code for them, so they travel as -32600 InvalidRequest.
_V10_ONLY_CODES = range(-32099, -32007)
#: skillwire's own codes (credentials missing or short) mean the same at both versions: kept as they are.
_SKILLWIRE_CODES = frozenset({UnauthenticatedError.code, PermissionDeniedError.code})


def error_code(error: A2AError) -> int:
    """The v0.3 JSON-RPC code of ``error``: the v1.0 code, or -32600 for a v1.0-only error."""
    return _v03_code(type(error))


def error_data(error: A2AError) -> dict[str, Any]:
    """The v0.3 ``error.data``: free-form in v0.3, here ``{"reason": ...}`` plus the ErrorInfo metadata
    and the field violations when there are any (v1.0 sends these as typed ``@type`` details)."""
    data: dict[str, Any] = {"reason": error.reason}
    if error.metadata:
        data["metadata"] = dict(error.metadata)
    if error.field_violations:
        data["fieldViolations"] = [{"field": f, "description": d} for f, d in error.field_violations]
    return data


_ERRORS_BY_REASON = ERRORS_BY_REASON


def _v03_code(cls: type[A2AError]) -> int:
    v10_only = cls.code in _V10_ONLY_CODES and cls.code not in _SKILLWIRE_CODES
    return InvalidRequestError.code if v10_only else cls.code


def decode_error(error: Any) -> A2AError:
    """A v0.3 JSON-RPC ``error`` object as its A2AError: the inverse of :func:`error_code` and
    :func:`error_data`.

    The class comes from the code; a ``data.reason`` naming a v1.0 error that travels under this code
    (``-32600`` with ``VERSION_NOT_SUPPORTED``) picks that class. ``data.metadata`` and
    ``data.fieldViolations`` are kept. An unknown code gives the A2AError base class.
    """
    if not isinstance(error, dict):
        return InternalError(f"malformed JSON-RPC error: {error!r}"[:200])
    code = error.get("code")
    cls = ERRORS_BY_CODE.get(code) if isinstance(code, int) and not isinstance(code, bool) else None
    data = error.get("data")
    data = data if isinstance(data, dict) else {}
    reason = data.get("reason")
    named = _ERRORS_BY_REASON.get(reason) if isinstance(reason, str) else None
    if named is not None and (cls is None or _v03_code(named) == code):
        cls = named
    metadata = data.get("metadata")
    violations = [
        (str(v.get("field", "")), str(v.get("description", "")))
        for v in data.get("fieldViolations") or ()
        if isinstance(v, dict)
    ]
    message = error.get("message")
    return (cls or A2AError)(
        message if isinstance(message, str) and message else None,
        metadata=metadata if isinstance(metadata, dict) else None,
        field_violations=violations,
    )


# -- The v0.3 SDK servers' REST errors ----------------------------------------------------------------------

#: The v0.3 SDK servers' error statuses (a2a-python 0.3 ``A2AErrorToHttpStatus``), whose bodies are only
#: ``{"message": ...}``; skillwire's v0.3 REST errors carry an AIP-193 ErrorInfo and need no guessing.
_REST_STATUS_ERRORS: dict[int, type[A2AError]] = {
    400: InvalidRequestError,
    404: TaskNotFoundError,
    409: TaskNotCancelableError,
    415: ContentTypeNotSupportedError,
    422: InvalidParamsError,
    500: InternalError,
    501: UnsupportedOperationError,
    502: InvalidAgentResponseError,
}
_PUSH_OPERATIONS = frozenset(
    {_O.CREATE_PUSH_CONFIG, _O.GET_PUSH_CONFIG, _O.LIST_PUSH_CONFIGS, _O.DELETE_PUSH_CONFIG}
)


def rest_error(operation: Operation, status: int, body: Any) -> A2AError | None:
    """The A2AError of a v0.3 SDK server's REST error response (``{"message": ...}`` and an HTTP status),
    or None when ``body`` (decoded JSON) is not that shape or the status maps to no error.

    404 is TaskNotFound (ExtendedAgentCardNotConfigured for the card), 501 UnsupportedOperation
    (PushNotificationNotSupported for push configs), 409 TaskNotCancelable, and so on.
    """
    if not isinstance(body, dict) or not isinstance(body.get("message"), str) or "error" in body:
        return None
    cls = _REST_STATUS_ERRORS.get(status)
    if cls is TaskNotFoundError and operation is _O.GET_EXTENDED_AGENT_CARD:
        cls = ExtendedAgentCardNotConfiguredError
    elif cls is UnsupportedOperationError and operation in _PUSH_OPERATIONS:
        cls = PushNotificationNotSupportedError
    return None if cls is None else cls(body["message"] or None, metadata={"httpStatus": status})
