"""The HTTP+JSON (REST) binding's mapping, sans-IO: (method, path, query, body) -> (operation, params).

The routes are the operation table's (:data:`~skillwire.protocol.operations.OPERATIONS`), each also under
an optional ``/{tenant}`` prefix, for instance::

    POST   /message:send                          SendMessage            body: SendMessageRequest
    GET    /tasks/{id}                            GetTask                query: historyLength
    GET    /tasks                                 ListTasks              query: contextId, status, pageSize, ...

Path parameters fill ``id``/``taskId``/``tenant``; query parameters are camelCase (proto names accepted
too), repeated or comma-separated for lists; bodies are the ProtoJSON request message. The decoded-JSON
budgets of ``Limits`` hold for all three (:mod:`skillwire.wire.budget`): the body before and after it is
decoded, the query and path as strings.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import msgspec

from skillwire.errors import A2AError, InvalidParamsError, JSONParseError, MethodNotFoundError
from skillwire.protocol.limits import Limits
from skillwire.protocol.operations import OPERATIONS, Operation, spec_of
from skillwire.wire.budget import check_json, check_shape, check_strings, exceeded, shape_may_exceed
from skillwire.wire.jsonrpc import field_error
from skillwire.wire.protojson import rename

__all__ = ["RestCall", "check_query", "encode_status", "match_route", "parse_call"]

_DEFAULT_LIMITS = Limits()


@dataclass(frozen=True, slots=True)
class _Route:
    method: str
    pattern: re.Pattern[str]
    operation: Operation
    #: Where the body goes: "all" (the body is the request) or "none" (no body).
    body: str = "all"


def _pattern(template: str) -> re.Pattern[str]:
    """A path template's regex: each ``{field}`` one path segment (no ``/`` or ``:``), named after it."""
    regex = re.sub(r"\\\{(\w+)\\\}", r"(?P<\1>[^/:]+)", re.escape(template))
    return re.compile(f"^{regex}$")


#: Every route of the operation table, in its order.
_ROUTES = tuple(
    _Route(route.method, _pattern(route.path), spec.operation, route.body)
    for spec in OPERATIONS
    for route in spec.routes
)


@dataclass(frozen=True, slots=True)
class RestCall:
    operation: Operation
    #: Path parameters (``id``, ``taskId``) and ``tenant`` when the path had a tenant prefix.
    path_params: dict[str, str]
    body: str


class _MethodNotAllowed(Exception):
    def __init__(self, allowed: list[str]) -> None:
        self.allowed = allowed


def _match(method: str, path: str) -> RestCall | None:
    allowed = []
    for route in _ROUTES:
        found = route.pattern.match(path)
        if found is None:
            continue
        if route.method != method:
            allowed.append(route.method)
            continue
        params = {k: unquote(v) for k, v in found.groupdict().items()}
        return RestCall(route.operation, params, route.body)
    if allowed:
        raise _MethodNotAllowed(allowed)
    return None


def match_route(method: str, path: str) -> RestCall | None:
    """The call for ``method path``, trying the path as is and then with its first segment as a tenant.

    Returns None when no route has that path; raises MethodNotFoundError naming the allowed methods when a
    route has the path but not the method.
    """
    method = "GET" if method == "HEAD" else method
    try:
        call = _match(method, path)
        if call is not None:
            return call
        tenant, sep, rest = path.removeprefix("/").partition("/")
        if sep and tenant:
            call = _match(method, "/" + rest)
            if call is not None:
                return RestCall(call.operation, {**call.path_params, "tenant": unquote(tenant)}, call.body)
    except _MethodNotAllowed as exc:
        raise MethodNotFoundError(
            f"{method} is not allowed here; use {', '.join(sorted(set(exc.allowed)))}",
            metadata={"allow": ",".join(sorted(set(exc.allowed)))},
        ) from None
    return None


def _query_value(info: msgspec.inspect.Type, values: list[str]) -> Any:
    if isinstance(info, msgspec.inspect.UnionType):
        inner = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        info = inner[0] if len(inner) == 1 else info
    if isinstance(info, msgspec.inspect.ListType):
        return [item for v in values for item in v.split(",") if item]
    return values[-1]


def _query_object(struct: type[msgspec.Struct], query: Mapping[str, list[str]]) -> dict[str, Any]:
    fields = {}
    for f in msgspec.inspect.type_info(struct).fields:  # type: ignore[attr-defined]
        fields[f.encode_name] = f
        fields[f.name] = f
    out: dict[str, Any] = {}
    for key, values in query.items():
        f = fields.get(key)
        if f is not None and values:
            out[f.encode_name] = _query_value(f.type, values)
    return out


def check_query(query: Mapping[str, list[str]], path_params: Mapping[str, str], limits: Limits) -> None:
    """Raise InvalidParamsError if a query or path value is longer than ``limits.max_string_length``, or
    the query holds more values (comma-separated items counted) than ``limits.max_json_nodes``."""
    count = sum(1 + value.count(",") for values in query.values() for value in values)
    if count > limits.max_json_nodes:
        raise exceeded("query", f"{count} values", "max_json_nodes", limits.max_json_nodes)
    check_strings(((key, value) for key, values in query.items() for value in values), limits, "query")
    check_strings(path_params.items(), limits, "path")


def parse_call(
    call: RestCall, query: Mapping[str, list[str]], body: bytes, limits: Limits = _DEFAULT_LIMITS
) -> Any:
    """The request Struct for ``call``: body, path parameters and query parameters merged, each within
    the decoded-JSON budgets of ``limits`` (InvalidParamsError naming the budget otherwise)."""
    struct = spec_of(call.operation).request_type
    check_query(query if call.body == "none" else {}, call.path_params, limits)
    walk = False
    if call.body == "none" or not body.strip():
        value: Any = {}
    else:
        check_json(body, limits, "body")
        walk = shape_may_exceed(body, limits)
        try:
            value = msgspec.json.decode(body)
        except (msgspec.DecodeError, RecursionError):
            raise JSONParseError("The body is not valid JSON") from None
        if not isinstance(value, dict):
            raise InvalidParamsError(
                "The body must be a JSON object", field_violations=[("body", "must be an object")]
            )
    value = rename(struct, value)
    if call.body == "none":
        value.update(_query_object(struct, query))
    for key, item in call.path_params.items():
        value[key] = item
    try:
        params = msgspec.convert(value, struct, strict=False)
    except msgspec.ValidationError as exc:
        field, reason = field_error(exc, root="body" if call.body != "none" else "query")
        raise InvalidParamsError(
            f"Invalid request: {field}: {reason}", field_violations=[(field, reason)]
        ) from None
    if walk:
        check_shape(params, limits, "body")
    return params


_encoder = msgspec.json.Encoder()


def encode_status(error: A2AError, status: int | None = None) -> bytes:
    """The AIP-193 ``{"error": {...}}`` body for ``error`` (``code`` is the HTTP status sent with it)."""
    return _encoder.encode(
        {
            "error": {
                "code": status or error.http_status,
                "status": error.grpc_status,
                "message": error.message,
                "details": error.details(),
            }
        }
    )
