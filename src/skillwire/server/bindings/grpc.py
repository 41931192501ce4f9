"""The gRPC binding: ``lf.a2a.v1.A2AService`` served over the Dispatcher, on the caller's event loop.

Only imported when gRPC is enabled (the ``skillwire[grpc]`` extra: grpcio, protobuf, googleapis-common-protos
and a2a-sdk, whose generated ``a2a_pb2`` / ``a2a_pb2_grpc`` modules define the service)::

    from skillwire.server.bindings.grpc import GrpcServer

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
still expect the v1.0.0 values (UNIMPLEMENTED for those three); a server's ``status_overrides`` switches
codes per error class (subclasses included) without touching the error tree, for that server only::

    GrpcServer(app.dispatcher, status_overrides=GRPC_STATUSES_V1_0_0)  # what the TCK expects

The rpcs are generated from :data:`~skillwire.protocol.operations.OPERATIONS` (by way of
:data:`skillwire.wire.grpc_service.RPCS`): each row's ``method`` is served with its request message, its
answer message and, for a streaming row, as a server stream. The status and its details are written by
:func:`skillwire.wire.grpc_service.rich_status`, which the client reads back.

Streams: each event is written as it comes. A client that cancels a stream (or goes away) ends the call and
closes the event iterator (``aclose()``); the task behind it goes on. Where this differs from JSON-RPC: a
request over ``max_body_bytes`` is refused by grpc itself (RESOURCE_EXHAUSTED, no ErrorInfo) where
JSON-RPC answers HTTP 413; an idle stream is kept alive by HTTP/2, not by keep-alive comments; and numbers
in ``metadata`` and ``Part.data`` are doubles in protobuf (``google.protobuf.Value``), so integral values
arrive as ints but leave as doubles (42 reaches a protobuf client as 42.0).

Budgets (request and answer sizes, calls per connection, connections, idle and silent peers, slow
readers) come from the server's :class:`~skillwire.protocol.limits.Limits`: see
:mod:`skillwire.server.bindings.grpc_limits`.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any, NoReturn, TypeVar

import msgspec

# First: without the grpc extra, this ImportError says what to install.
from skillwire.wire.grpc_service import (
    GRPC_STATUSES_V1_0_0,
    RPCS,
    SERVICE,
    STATUS_DETAILS_KEY,
    Rpc,
    check_overrides,
    rich_status,
)

# isort: split
import grpc  # type: ignore[import-untyped]

from skillwire.errors import (
    A2AError,
    InternalError,
    InvalidParamsError,
    JSONParseError,
    MethodNotFoundError,
    UnauthenticatedError,
)
from skillwire.protocol.limits import Limits
from skillwire.protocol.operations import Operation
from skillwire.protocol.versions import V1_ONLY, negotiate_version
from skillwire.security.principal import ANONYMOUS
from skillwire.server.bindings.grpc_limits import StreamWriteTimeoutError, encode_answer, server_options
from skillwire.server.bindings.guard import Guard, checked_tenant
from skillwire.server.context import CallContext, requested_extensions
from skillwire.server.handler import Dispatcher
from skillwire.server.observability import access
from skillwire.server.observability.observe import Observability, Watch
from skillwire.wire.budget import check_shape
from skillwire.wire.generations import codec_version, without_generations
from skillwire.wire.protobuf import ConversionError, message_to_struct, struct_to_message
from skillwire.wire.protobuf_generations import put_generations, read_generations

__all__ = ["GRPC_STATUSES_V1_0_0", "GrpcServer"]

log = logging.getLogger("skillwire.grpc")

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
    Fields without presence at their default are absent, so a required one is missing. The A2A 1.1 fields
    a v1.0 message carries as unknown fields are read too (:mod:`skillwire.wire.protobuf_generations`)."""
    name = message.DESCRIPTOR.name
    try:
        return read_generations(message, message_to_struct(message, type_))  # type: ignore[no-any-return]
    except msgspec.ValidationError as exc:
        field, reason = _violation(exc)
    except ConversionError as exc:  # a value ProtoJSON cannot hold, such as NaN in a Struct
        field, reason = exc.path or "(request)", exc.reason
    raise InvalidParamsError(f"Invalid {name}: {field}: {reason}", field_violations=[(field, reason)])


def to_message(result: Any, message_type: Any, generations: bool = False) -> Any:
    """The protobuf ``message_type`` for a result Struct (``None`` gives the empty message), with the A2A
    1.1 generation fields when the caller asked for them (A2A-Version 1.1, or the generations extension)."""
    message = struct_to_message(without_generations(result), message_type)
    if generations:
        put_generations(result, message)
    return message


def wants_generations(call: CallContext) -> bool:
    return codec_version(call.protocol_version, call.extensions) == "1.1"


# -- errors -------------------------------------------------------------------------------------------------

#: Which gRPC status code names replace an error class's own (``GrpcServer(status_overrides=...)``).
StatusOverrides = Mapping[type[A2AError], str]


async def _abort(context: Any, error: A2AError, overrides: StatusOverrides) -> NoReturn:
    code, status = rich_status(error, overrides)
    trailing: tuple[tuple[str, Any], ...] = ((STATUS_DETAILS_KEY, status),)
    if isinstance(error, UnauthenticatedError):  # the HTTP bindings' WWW-Authenticate challenges
        trailing += tuple(("www-authenticate", challenge) for challenge in error.challenges)
    await context.abort(code, error.message, trailing_metadata=trailing)
    raise AssertionError("grpc's context.abort returned")  # pragma: no cover


def _as_a2a(exc: Exception, what: str) -> A2AError:
    """``exc`` as the error to answer with: itself if it is a protocol error, else a generic INTERNAL."""
    if isinstance(exc, A2AError):
        return exc
    log.error("%s failed", what, exc_info=exc)
    return InternalError()


# -- the service --------------------------------------------------------------------------------------------


def _deadline(context: Any) -> float | None:
    """The caller's deadline as a ``time.monotonic()`` value, or None when it sent none."""
    remaining = context.time_remaining()
    return None if remaining is None else time.monotonic() + remaining


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
    """A deserializer that hands bytes which are not the request message to the servicer, which answers
    INVALID_ARGUMENT (grpc would answer UNKNOWN with the parser's exception)."""

    def decode(raw: bytes) -> Any:
        try:
            return deserialize(raw)
        except Exception as exc:  # protobuf's DecodeError (bad wire format, bad UTF-8)
            # "Error parsing message with type 'lf.a2a.v1.X': Wire format was corrupt" -> the cause
            return _Undecodable(str(exc).rpartition(": ")[2] or type(exc).__name__)

    return decode


class _Unknown(grpc.GenericRpcHandler):  # type: ignore[misc]
    """Asked last: any method no other handler serves is MethodNotFoundError with its ErrorInfo, where
    grpc alone would answer a bare UNIMPLEMENTED."""

    def __init__(self, overrides: StatusOverrides) -> None:
        self.overrides = overrides

    def service(self, details: Any) -> Any:
        method = str(details.method)

        async def refuse(requests: Any, context: Any) -> None:
            # A stream-stream handler reads nothing, so it answers at once whatever kind of call this was.
            await _abort(context, MethodNotFoundError(f"Method not found: {method[:100]}"), self.overrides)

        return grpc.stream_stream_rpc_method_handler(refuse)


Activate = Callable[[frozenset[str]], frozenset[str]]


def _all_requested(requested: frozenset[str]) -> frozenset[str]:
    return requested


class _Servicer:
    """The rpcs of ``lf.a2a.v1.A2AService``, one per row of the operation table, each a thin call into the
    Dispatcher."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        activate: Activate,
        limits: Limits,
        overrides: StatusOverrides,
        guard: Guard | None = None,
        observability: Observability | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.activate = activate
        self.limits = limits
        self.overrides = overrides
        self.guard = guard
        self.observability = observability or Observability()

    def method_handlers(self) -> dict[str, Any]:
        """grpc's method handler of every rpc, by rpc name."""
        return {rpc.spec.method: self._method_handler(rpc) for rpc in RPCS.values()}

    def _method_handler(self, rpc: Rpc) -> Any:
        decode = _lenient(rpc.request.FromString)
        encode = _as_is(rpc.response.SerializeToString)
        if rpc.spec.streaming:

            async def stream(request: Any, context: Any) -> None:
                await self._stream(rpc, request, context)

            return grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=decode, response_serializer=encode
            )

        async def unary(request: Any, context: Any) -> Any:
            return await self._unary(rpc, request, context)

        return grpc.unary_unary_rpc_method_handler(
            unary, request_deserializer=decode, response_serializer=encode
        )

    async def _prepare(
        self, rpc: Rpc, request: Any, context: Any, headers: dict[str, str], request_id: str
    ) -> tuple[Any, CallContext, tuple[tuple[str, str], ...]]:
        """The request Struct, the call's context, and the initial metadata to answer with."""
        request_type = rpc.spec.request_type
        # credentials first, as on the HTTP bindings (where the body is not even read without them)
        principal = ANONYMOUS if self.guard is None else await self.guard.grpc(headers, context)
        if isinstance(request, _Undecodable):  # checked first, as JSON-RPC parses before it negotiates
            raise JSONParseError(
                f"The request is not a valid lf.a2a.v1.{request_type.__name__}: {request.reason}"
            )
        version = negotiate_version(headers.get("a2a-version"), V1_ONLY)
        params = to_struct(request, request_type)
        check_shape(params, self.limits, "")  # the decoded-JSON budgets, as on the HTTP bindings
        activated = self.activate(requested_extensions(headers))
        # echoed, like the A2A-Extensions response header of the HTTP bindings
        initial = (("a2a-extensions", ",".join(sorted(activated))),) if activated else ()
        call = CallContext(
            protocol_version=version,
            tenant=checked_tenant(self.guard, principal, params),
            principal=principal,
            extensions=activated,
            binding="GRPC",
            headers=headers,
            request_bytes=request.ByteSize(),
            request_id=request_id,
            deadline=_deadline(context),
        )
        return params, call, initial

    def _watch(self, operation: Operation, headers: dict[str, str], *, streaming: bool) -> Watch:
        return Watch(
            "GRPC",
            operation,
            headers,
            streaming=streaming,
            telemetry=self.observability.telemetry,
            metrics=self.observability.metrics,
            json_logs=self.observability.json_logs,
        )

    async def _unary(self, rpc: Rpc, request: Any, context: Any) -> Any:
        operation = rpc.spec.operation
        headers = _metadata(context)
        watch = self._watch(operation, headers, streaming=False)
        params: Any = None
        error: A2AError | None = None
        result: Any = None
        caller = ""
        answered = False
        try:
            try:
                params, call, initial = await self._prepare(rpc, request, context, headers, watch.request_id)
                caller = call.principal.owner
                if initial:
                    await context.send_initial_metadata(initial)
                result = await self.dispatcher.call(operation, params, call)
                answer = to_message(result, rpc.response, wants_generations(call))
                encoded = encode_answer(answer, operation, self.limits.max_response_bytes)
            except Exception as exc:
                result = error = _as_a2a(exc, operation.value)
            answered = True
        finally:
            watch.end(params, result, caller, line=answered)
        if error is not None:
            await _abort(context, error, self.overrides)
        return encoded

    async def _stream(self, rpc: Rpc, request: Any, context: Any) -> None:
        operation = rpc.spec.operation
        headers = _metadata(context)
        watch = self._watch(operation, headers, streaming=True)
        params: Any = None
        caller = ""
        try:
            params, call, initial = await self._prepare(rpc, request, context, headers, watch.request_id)
            caller = call.principal.owner
            events: AsyncIterator[Any] = await self.dispatcher.call(operation, params, call)
            generations = wants_generations(call)
        except Exception as exc:
            error = _as_a2a(exc, operation.value)
            watch.end(params, error, caller)
            await _abort(context, error, self.overrides)
        except BaseException:
            watch.end(params, None, caller, line=False)
            raise
        if watch.tracks:
            events = access.Tracked(events)
        failure: A2AError | None = None
        # A cancelled call (the client cancelled or went away) raises CancelledError at one of these
        # awaits: the iterator is closed in `finally` and the task behind the stream is left alone.
        try:
            # Sent on its own, so that a write that times out leaves only the status to send.
            await context.send_initial_metadata(initial)
            async for event in events:
                await self._write(context, rpc, event, generations)
        except Exception as exc:
            failure = _as_a2a(exc, f"{operation.value} stream")
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
            watch.end(params, failure or events, caller)
        if failure is not None:
            # Behind a write that timed out, the status waits until the client reads or goes away; this
            # call holds nothing else meanwhile.
            await _abort(context, failure, self.overrides)

    async def _write(self, context: Any, rpc: Rpc, event: Any, generations: bool) -> None:
        operation = rpc.spec.operation
        data = encode_answer(
            to_message(event, rpc.response, generations),
            operation,
            self.limits.max_response_bytes,
            event=True,
        )
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


class GrpcServer:
    """A ``grpc.aio`` server for ``lf.a2a.v1.A2AService`` over ``dispatcher``, on the running event loop.

    ``port=0`` picks a free port; ``port`` holds the bound one once ``start()`` returns. Without
    ``credentials`` (a ``grpc.ServerCredentials``) the port is plaintext HTTP/2. ``activate`` maps the
    requested extension URIs to the activated ones (the app's rule, so every binding agrees); by default
    every requested URI is passed on. ``status_overrides`` replaces the gRPC status code of error classes
    (subclasses included; ValueError for a name that is no gRPC error status), for this server only::

        server = GrpcServer(app.dispatcher, port=0, status_overrides=GRPC_STATUSES_V1_0_0)
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
        status_overrides: Mapping[type[A2AError], str] = {},
        guard: Guard | None = None,
        observability: Observability | None = None,
    ) -> None:
        """``observability``: the spans, metrics and log fields of its calls (default: none)."""
        check_overrides(status_overrides)
        self.guard = guard
        self.observability = observability
        self.dispatcher = dispatcher
        self.activate = activate or _all_requested
        self.host = host
        self.port = port
        self.limits = limits or Limits()
        self.credentials = credentials
        self.status_overrides: StatusOverrides = dict(status_overrides)
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
        server = grpc.aio.server(options=server_options(self.limits))
        servicer = _Servicer(
            self.dispatcher,
            self.activate,
            self.limits,
            self.status_overrides,
            self.guard,
            self.observability,
        )
        handlers = servicer.method_handlers()
        # The service's own rpcs first; _Unknown answers every other method.
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE, handlers), _Unknown(self.status_overrides))
        )
        server.add_registered_method_handlers(SERVICE, handlers)  # grpc's fast path for known methods
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
