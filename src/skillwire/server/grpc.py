"""The gRPC binding: ``lf.a2a.v1.A2AService`` served over the Dispatcher, on the caller's event loop.

Only imported when gRPC is enabled (the ``skillwire[grpc]`` extra: grpcio, protobuf, googleapis-common-protos
and a2a-sdk, whose generated ``a2a_pb2`` / ``a2a_pb2_grpc`` modules define the service)::

    from skillwire.server.grpc import GrpcServer

    grpc_server = GrpcServer(app.dispatcher, "127.0.0.1", 50051)
    await app.startup()                  # open the store, start the runtime
    await grpc_server.start()            # on the running loop, next to uvicorn; grpc_server.port is bound
    ...
    stopping = asyncio.ensure_future(grpc_server.stop(grace=5.0))  # refuse new calls at once
    await app.shutdown()                 # settle tasks and end open streams, then close the store
    await stopping

Each rpc crosses into skillwire by :mod:`skillwire.wire.protobuf`, which converts between the protobuf
messages and the msgspec Structs directly, with the results of the ProtoJSON route (the request printed with
``json_format.MessageToJson`` and decoded into the operation's request Struct, the result Struct encoded with
msgspec and parsed into the response message), so the Structs stay the one source of truth. A request that
does not decode (a missing ``message``, a part with no content, an empty ``id``: protobuf cannot tell ``""``
from unset, so it is missing; NaN in a ``Value``) is ``INVALID_ARGUMENT`` naming the field, as on JSON-RPC.

The ``a2a-version`` metadata is negotiated like the ``A2A-Version`` header: a missing value means 0.3, which
is not served, so the call fails with VersionNotSupportedError. ``a2a-extensions`` (comma-separated URIs) is
accepted; ``activate`` (the app's rule) picks the activated ones, which reach the handler and are echoed in
the response's initial metadata. Bytes that are not the request message are a parse error
(INVALID_ARGUMENT, ``PARSE_ERROR``) and an unknown method is MethodNotFoundError, both with ErrorInfo, where
grpc alone would answer UNKNOWN or a bare UNIMPLEMENTED.

Errors: every :class:`A2AError` aborts the call with ``grpc.StatusCode[error.grpc_status]`` and a
``google.rpc.Status`` in the ``grpc-status-details-bin`` trailer, whose details hold an ``ErrorInfo`` (reason,
domain ``a2a-protocol.org``, metadata) and, for invalid arguments, a ``BadRequest``. Any other exception is
``INTERNAL`` with a generic message; the traceback goes to the log only.

Status codes follow the v1.0.1 table in :mod:`skillwire.errors` (FAILED_PRECONDITION for
UnsupportedOperation, PushNotificationNotSupported and VersionNotSupported). The TCK's gRPC status tests
still expect the v1.0.0 values (UNIMPLEMENTED for those three); ``GRPC_STATUS_OVERRIDES`` switches codes
per error class (subclasses included) without touching the error tree::

    from skillwire.server import grpc as grpc_binding

    grpc_binding.GRPC_STATUS_OVERRIDES.update(grpc_binding.GRPC_STATUSES_V1_0_0)  # what the TCK expects

Streams: each event is written as it comes. A client that cancels a stream (or goes away) ends the call and
closes the event iterator (``aclose()``); the task behind it goes on. Where this differs from JSON-RPC: a
request over ``max_body_bytes`` is refused by grpc itself (RESOURCE_EXHAUSTED, no ErrorInfo) where
JSON-RPC answers HTTP 413; an idle stream is kept alive by HTTP/2, not by keep-alive comments; and numbers
in ``metadata`` and ``Part.data`` are doubles in protobuf (``google.protobuf.Value``), so integral values
arrive as ints but leave as doubles (42 reaches a protobuf client as 42.0).

Budgets (request and answer sizes, calls per connection, connections, idle and silent peers, slow
readers) come from the server's :class:`~skillwire.protocol.limits.Limits`: see
:mod:`skillwire.server.grpc_limits`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, NoReturn, TypeVar

import msgspec

try:
    import grpc  # type: ignore[import-untyped]
    from a2a.types import a2a_pb2, a2a_pb2_grpc
    from google.protobuf import any_pb2, duration_pb2, empty_pb2  # type: ignore[import-untyped]
    from google.rpc import error_details_pb2, status_pb2  # type: ignore[import-untyped]
except ImportError as exc:  # pragma: no cover - depends on what is installed
    raise ImportError(f"gRPC support needs the grpc extra: pip install 'skillwire[grpc]' ({exc})") from exc

from skillwire.errors import (
    ERROR_DOMAIN,
    A2AError,
    InternalError,
    InvalidParamsError,
    JSONParseError,
    MethodNotFoundError,
    PushNotificationNotSupportedError,
    UnsupportedOperationError,
    VersionNotSupportedError,
)
from skillwire.protocol.limits import Limits
from skillwire.protocol.operations import Operation, spec_of
from skillwire.protocol.versions import V1_ONLY, negotiate_version
from skillwire.server.context import CallContext
from skillwire.server.grpc_limits import StreamWriteTimeoutError, encode_answer, server_options
from skillwire.server.handler import Dispatcher
from skillwire.wire.budget import check_shape
from skillwire.wire.protobuf import ConversionError, message_to_struct, struct_to_message

__all__ = ["GRPC_STATUSES_V1_0_0", "GRPC_STATUS_OVERRIDES", "GrpcServer"]

log = logging.getLogger("skillwire.grpc")

#: gRPC status code names that replace an error class's ``grpc_status`` (looked up along the class's MRO).
#: Empty: follow the v1.0.1 table.
GRPC_STATUS_OVERRIDES: dict[type[A2AError], str] = {}

#: The v1.0.0 gRPC codes that differ from v1.0.1, which the TCK 1.0-dev snapshot asserts.
GRPC_STATUSES_V1_0_0: dict[type[A2AError], str] = {
    UnsupportedOperationError: "UNIMPLEMENTED",
    PushNotificationNotSupportedError: "UNIMPLEMENTED",
    VersionNotSupportedError: "UNIMPLEMENTED",
}

STATUS_DETAILS_KEY = "grpc-status-details-bin"

S = TypeVar("S", bound=msgspec.Struct)


# -- protobuf <-> Struct ------------------------------------------------------------------------------------


def _violation(error: msgspec.ValidationError) -> tuple[str, str]:
    """msgspec's "reason - at `$.a.b`" as ("a.b", "reason"); a missing field names itself."""
    text = str(error)
    reason, sep, where = text.rpartition(" - at `")
    if not sep:
        reason, where = text, "$`"
    path = where.rstrip("`").removeprefix("$").removeprefix(".")
    prefix = "Object missing required field `"
    if reason.startswith(prefix) and reason.endswith("`"):
        name = reason[len(prefix) : -1]
        return (f"{path}.{name}" if path else name), "required field is missing"
    return path or "(request)", reason


def to_struct(message: Any, type_: type[S]) -> S:
    """The request Struct for a protobuf request ``message``; InvalidParamsError if it does not decode.
    Fields without presence at their default are absent, so a required one is missing."""
    name = message.DESCRIPTOR.name
    try:
        return message_to_struct(message, type_)
    except msgspec.ValidationError as exc:
        field, reason = _violation(exc)
    except ConversionError as exc:  # a value ProtoJSON cannot hold, such as NaN in a Struct
        field, reason = exc.path or "(request)", exc.reason
    raise InvalidParamsError(f"Invalid {name}: {field}: {reason}", field_violations=[(field, reason)])


def to_message(result: Any, message_type: Any) -> Any:
    """The protobuf ``message_type`` for a result Struct (``None`` gives the empty message)."""
    return struct_to_message(result, message_type)


# -- errors -------------------------------------------------------------------------------------------------


def status_name(error: A2AError) -> str:
    """The gRPC status code name for ``error``: an override if one matches its class, else its own."""
    for cls in type(error).__mro__:
        override = GRPC_STATUS_OVERRIDES.get(cls)
        if override is not None:
            return override
    return error.grpc_status


def rich_status(error: A2AError) -> tuple[Any, bytes]:
    """The status code and the serialized ``google.rpc.Status`` (with ErrorInfo, BadRequest, and RetryInfo
    for a busy server: gRPC's ``Retry-After``) for ``error``."""
    code = grpc.StatusCode[status_name(error)]
    info = error_details_pb2.ErrorInfo(reason=error.reason, domain=ERROR_DOMAIN, metadata=error.metadata)
    details = [_pack(info)]
    if error.field_violations:
        violations = [
            error_details_pb2.BadRequest.FieldViolation(field=field, description=description)
            for field, description in error.field_violations
        ]
        details.append(_pack(error_details_pb2.BadRequest(field_violations=violations)))
    retry_after = getattr(error, "retry_after", None)
    if isinstance(retry_after, int | float):
        delay = duration_pb2.Duration(seconds=int(retry_after), nanos=int(retry_after % 1 * 1e9))
        details.append(_pack(error_details_pb2.RetryInfo(retry_delay=delay)))
    status = status_pb2.Status(code=code.value[0], message=error.message, details=details)
    return code, status.SerializeToString()


def _pack(message: Any) -> Any:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed


async def _abort(context: Any, error: A2AError) -> NoReturn:
    code, status = rich_status(error)
    await context.abort(code, error.message, trailing_metadata=((STATUS_DETAILS_KEY, status),))
    raise AssertionError("grpc's context.abort returned")  # pragma: no cover


def _as_a2a(exc: Exception, what: str) -> A2AError:
    """``exc`` as the error to answer with: itself if it is a protocol error, else a generic INTERNAL."""
    if isinstance(exc, A2AError):
        return exc
    log.error("%s failed", what, exc_info=exc)
    return InternalError()


# -- the service --------------------------------------------------------------------------------------------


def _metadata(context: Any) -> dict[str, str]:
    """Invocation metadata as lower-cased names; repeated keys joined with commas, binary values left out."""
    out: dict[str, str] = {}
    for key, value in context.invocation_metadata() or ():
        if not isinstance(value, str):
            continue
        name = str(key).lower()
        out[name] = f"{out[name]},{value}" if name in out else value
    return out


class _Undecodable:
    """What the lenient deserializer hands over for bytes that are not the request message."""

    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


def _as_is(serialize: Callable[[Any], bytes]) -> Callable[[Any], bytes]:
    """A serializer that passes bytes through: the servicer encodes answers itself, to measure them."""

    def encode(message: Any) -> bytes:
        return message if isinstance(message, bytes) else serialize(message)

    return encode


def _lenient(deserialize: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def decode(raw: bytes) -> Any:
        try:
            return deserialize(raw)
        except Exception as exc:  # protobuf's DecodeError (bad wire format, bad UTF-8)
            # "Error parsing message with type 'lf.a2a.v1.X': Wire format was corrupt" -> the cause
            return _Undecodable(str(exc).rpartition(": ")[2] or type(exc).__name__)

    return decode


class _Guard(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """Answers what grpc would answer on its own the way the other bindings do: an undecodable request
    reaches the servicer, which answers INVALID_ARGUMENT (grpc would answer UNKNOWN with the parser's
    exception), and an unknown method gets MethodNotFoundError with its ErrorInfo. Answers the servicer
    has already encoded (bytes) are sent as they are."""

    def __init__(self) -> None:
        self._wrapped: dict[str, tuple[Any, Any]] = {}

    async def intercept_service(self, continuation: Any, details: Any) -> Any:
        handler = await continuation(details)
        if handler is None:
            return _method_not_found(str(details.method))
        if handler.request_deserializer is None:
            return handler
        cached = self._wrapped.get(details.method)
        if cached is None or cached[0] is not handler:
            wrapped = handler._replace(
                request_deserializer=_lenient(handler.request_deserializer),
                response_serializer=_as_is(handler.response_serializer),
            )
            cached = self._wrapped[details.method] = (handler, wrapped)
        return cached[1]


def _method_not_found(method: str) -> Any:
    async def refuse(requests: Any, context: Any) -> None:
        # A stream-stream handler reads nothing, so it answers at once whatever kind of call this was.
        await _abort(context, MethodNotFoundError(f"Method not found: {method[:100]}"))

    return grpc.stream_stream_rpc_method_handler(refuse)


def _requested_extensions(headers: Mapping[str, str]) -> frozenset[str]:
    """The extension URIs a client asks for: ``a2a-extensions`` (v1.0) or ``x-a2a-extensions`` (v0.3)."""
    value = ",".join(v for v in (headers.get("a2a-extensions"), headers.get("x-a2a-extensions")) if v)
    return frozenset(part.strip() for part in value.split(",") if part.strip())


Activate = Callable[[frozenset[str]], frozenset[str]]


def _all_requested(requested: frozenset[str]) -> frozenset[str]:
    return requested


class _Servicer:
    """The eleven rpcs of ``lf.a2a.v1.A2AService``, each a thin call into the Dispatcher."""

    def __init__(self, dispatcher: Dispatcher, activate: Activate, limits: Limits) -> None:
        self.dispatcher = dispatcher
        self.activate = activate
        self.limits = limits

    async def _prepare(
        self, operation: Operation, request: Any, context: Any
    ) -> tuple[Any, CallContext, tuple[tuple[str, str], ...]]:
        """The request Struct, the call's context, and the initial metadata to answer with."""
        request_type = spec_of(operation).request_type
        if isinstance(request, _Undecodable):  # checked first, as JSON-RPC parses before it negotiates
            raise JSONParseError(
                f"The request is not a valid lf.a2a.v1.{request_type.__name__}: {request.reason}"
            )
        headers = _metadata(context)
        version = negotiate_version(headers.get("a2a-version"), V1_ONLY)
        params = to_struct(request, request_type)
        check_shape(params, self.limits, "")  # the decoded-JSON budgets, as on the HTTP bindings
        activated = self.activate(_requested_extensions(headers))
        # echoed, like the A2A-Extensions response header of the HTTP bindings
        initial = (("a2a-extensions", ",".join(sorted(activated))),) if activated else ()
        call = CallContext(
            protocol_version=version,
            tenant=getattr(params, "tenant", "") or "",
            extensions=activated,
            binding="GRPC",
            headers=headers,
            request_bytes=request.ByteSize(),
        )
        return params, call, initial

    async def _unary(self, operation: Operation, request: Any, context: Any, response_type: Any) -> Any:
        try:
            params, call, initial = await self._prepare(operation, request, context)
            if initial:
                await context.send_initial_metadata(initial)
            result = await self.dispatcher.call(operation, params, call)
            answer = to_message(result, response_type)
            return encode_answer(answer, operation, self.limits.max_response_bytes)
        except Exception as exc:
            error = _as_a2a(exc, operation.value)
        await _abort(context, error)

    async def _stream(self, operation: Operation, request: Any, context: Any) -> None:
        try:
            params, call, initial = await self._prepare(operation, request, context)
            events: AsyncIterator[Any] = await self.dispatcher.call(operation, params, call)
        except Exception as exc:
            error = _as_a2a(exc, operation.value)
            await _abort(context, error)
        failure: A2AError | None = None
        # A cancelled call (the client cancelled or went away) raises CancelledError at one of these
        # awaits: the iterator is closed in `finally` and the task behind the stream is left alone.
        try:
            # Sent on its own, so that a write that times out leaves only the status to send.
            await context.send_initial_metadata(initial)
            async for event in events:
                await self._write(context, operation, event)
        except Exception as exc:
            failure = _as_a2a(exc, f"{operation.value} stream")
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
        if failure is not None:
            # Behind a write that timed out, the status waits until the client reads or goes away; this
            # call holds nothing else meanwhile.
            await _abort(context, failure)

    async def _write(self, context: Any, operation: Operation, event: Any) -> None:
        message = to_message(event, a2a_pb2.StreamResponse)
        data = encode_answer(message, operation, self.limits.max_response_bytes, event=True)
        timeout = self.limits.write_timeout
        try:
            async with asyncio.timeout(timeout):
                await context.write(data)
        except TimeoutError:
            log.info("%s: the client did not read for %g s; the stream is dropped", operation.value, timeout)
            raise StreamWriteTimeoutError(
                f"The stream was dropped: the client did not read for {timeout:g} s (write_timeout). "
                "The task goes on: resume with SubscribeToTask"
            ) from None

    # The rpc names are the proto's.

    async def SendMessage(self, request: Any, context: Any) -> Any:
        return await self._unary(Operation.SEND_MESSAGE, request, context, a2a_pb2.SendMessageResponse)

    async def SendStreamingMessage(self, request: Any, context: Any) -> None:
        await self._stream(Operation.SEND_STREAMING_MESSAGE, request, context)

    async def GetTask(self, request: Any, context: Any) -> Any:
        return await self._unary(Operation.GET_TASK, request, context, a2a_pb2.Task)

    async def ListTasks(self, request: Any, context: Any) -> Any:
        return await self._unary(Operation.LIST_TASKS, request, context, a2a_pb2.ListTasksResponse)

    async def CancelTask(self, request: Any, context: Any) -> Any:
        return await self._unary(Operation.CANCEL_TASK, request, context, a2a_pb2.Task)

    async def SubscribeToTask(self, request: Any, context: Any) -> None:
        await self._stream(Operation.SUBSCRIBE_TO_TASK, request, context)

    async def CreateTaskPushNotificationConfig(self, request: Any, context: Any) -> Any:
        return await self._unary(
            Operation.CREATE_PUSH_CONFIG, request, context, a2a_pb2.TaskPushNotificationConfig
        )

    async def GetTaskPushNotificationConfig(self, request: Any, context: Any) -> Any:
        return await self._unary(
            Operation.GET_PUSH_CONFIG, request, context, a2a_pb2.TaskPushNotificationConfig
        )

    async def ListTaskPushNotificationConfigs(self, request: Any, context: Any) -> Any:
        return await self._unary(
            Operation.LIST_PUSH_CONFIGS, request, context, a2a_pb2.ListTaskPushNotificationConfigsResponse
        )

    async def DeleteTaskPushNotificationConfig(self, request: Any, context: Any) -> Any:
        return await self._unary(Operation.DELETE_PUSH_CONFIG, request, context, empty_pb2.Empty)

    async def GetExtendedAgentCard(self, request: Any, context: Any) -> Any:
        return await self._unary(Operation.GET_EXTENDED_AGENT_CARD, request, context, a2a_pb2.AgentCard)


def _check_overrides(overrides: Mapping[type[A2AError], str]) -> None:
    for cls, name in overrides.items():
        if name not in grpc.StatusCode.__members__ or name == "OK":
            raise ValueError(f"GRPC_STATUS_OVERRIDES[{cls.__name__}] = {name!r} is not a gRPC error status")


class GrpcServer:
    """A ``grpc.aio`` server for ``lf.a2a.v1.A2AService`` over ``dispatcher``, on the running event loop.

    ``port=0`` picks a free port; ``port`` holds the bound one once ``start()`` returns. Without
    ``credentials`` (a ``grpc.ServerCredentials``) the port is plaintext HTTP/2. ``activate`` maps the
    requested extension URIs to the activated ones (the app's rule, so every binding agrees); by default
    every requested URI is passed on.

        server = GrpcServer(app.dispatcher, port=0)
        await server.start()
        print(server.port)
        await server.stop(grace=5.0)
    """

    def __init__(
        self,
        dispatcher: Dispatcher,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        limits: Limits | None = None,
        credentials: Any = None,
        activate: Activate | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.activate = activate or _all_requested
        self.host = host
        self.port = port
        self.limits = limits or Limits()
        self.credentials = credentials
        self._server: Any = None

    @property
    def address(self) -> str:
        """``host:port`` as a gRPC target (IPv6 hosts in brackets)."""
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"{host}:{self.port}"

    async def start(self) -> None:
        """Bind and start serving; call it from the event loop the runtime runs on."""
        if self._server is not None:
            raise RuntimeError("the gRPC server is already started")
        _check_overrides(GRPC_STATUS_OVERRIDES)
        server = grpc.aio.server(interceptors=[_Guard()], options=server_options(self.limits))
        servicer = _Servicer(self.dispatcher, self.activate, self.limits)
        a2a_pb2_grpc.add_A2AServiceServicer_to_server(servicer, server)  # type: ignore[no-untyped-call]
        if self.credentials is None:
            bound = server.add_insecure_port(self.address)
        else:
            bound = server.add_secure_port(self.address, self.credentials)
        await server.start()
        self.port = int(bound)
        self._server = server
        log.info("gRPC listening on %s", self.address)

    async def stop(self, grace: float) -> None:
        """Refuse new calls at once, give running calls ``grace`` seconds, then cancel the rest (their
        streams are closed; their tasks go on)."""
        server, self._server = self._server, None
        if server is not None:
            await server.stop(grace)
