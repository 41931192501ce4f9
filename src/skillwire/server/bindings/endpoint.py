"""The one HTTP prologue and epilogue that the JSON-RPC and HTTP+JSON bindings share.

A request goes through the same steps on both bindings; only what each step answers with differs, and that
is the binding's (:class:`HttpEndpoint`'s abstract methods), while what the bytes mean is the negotiated
version's codec (:mod:`skillwire.wire.codec`)::

    accept      method and path: is this call ours?     JSON-RPC: POST only (405);  REST: a route (404, 405)
    browser     a page of another site?                 Sec-Fetch-Site, Origin: 403 (:mod:`~skillwire.server.bindings.browser`)
    guard       credentials, before the body is read     the agent's Security: 401, 403 (none: anonymous)
    receive     Content-Type, then the body             JSON, required with a body (JSON-RPC: an error;
                                                        REST: 415), max_body_bytes (413)
    decode      version, codec, operation, params       off the event loop past offload_decode_bytes
    context     extensions activated, CallContext       the same on every binding, gRPC included
    dispatch    Dispatcher.call, a stream's first event  errors raised up front answer as plain errors
    answer      one body, or an SSE stream               framed by the call's :class:`Frames`

Every early answer is an :class:`EarlyAnswer` raised by a step, so a step never sends anything itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from typing import Any, Protocol

import msgspec

from skillwire.errors import A2AError, ContentTypeNotSupportedError, InternalError, InvalidRequestError
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import StreamResponse, generation_of
from skillwire.protocol.operations import Operation, spec_of
from skillwire.security.principal import ANONYMOUS, Principal
from skillwire.server.bindings.asgi import (
    BodyTooLarge,
    ClientGone,
    Receive,
    Scope,
    Send,
    Unsent,
    header_map,
    read_body,
    send_bytes,
    stream_sse,
    unsent_probe,
    until_disconnected,
)
from skillwire.server.bindings.browser import BrowserPolicy
from skillwire.server.bindings.guard import Guard, checked_tenant
from skillwire.server.context import CallContext, requested_extensions
from skillwire.server.handler import Dispatcher
from skillwire.server.observability import access
from skillwire.server.observability.metrics import Metrics
from skillwire.server.observability.observe import Observability, Watch, refused
from skillwire.server.observability.telemetry import Telemetry
from skillwire.wire.sse import encode_event, encode_json_event

__all__ = ["DecodedCall", "EarlyAnswer", "Frames", "HttpEndpoint", "is_json_content_type"]

log = logging.getLogger("skillwire.http")

Headers = list[tuple[bytes, bytes]]

_JSON_TYPES = ("application/json", "application/a2a+json")


def is_json_content_type(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media in _JSON_TYPES or (media.startswith("application/") and media.endswith("+json"))


class EarlyAnswer(Exception):
    """An answer sent instead of (or before) a call: an HTTP status, a body, extra headers."""

    def __init__(
        self,
        status: int,
        body: bytes,
        headers: Headers | None = None,
        *,
        content_type: bytes = b"application/json",
        error: A2AError | None = None,
    ) -> None:
        super().__init__(status)
        self.status = status
        self.body = body
        self.headers = headers
        self.content_type = content_type
        #: the error it answers with: an answer before the call is reported (access line, span, metrics)
        self.error = error

    async def send(self, send: Send, echo: Headers | None = None) -> None:
        """Send it, after the ``echo`` headers (the activated extensions) when there are any."""
        headers = [*echo, *(self.headers or ())] if echo else self.headers
        await send_bytes(send, self.status, self.body, self.content_type, headers)


def _unlogged(event: StreamResponse) -> None:
    return None


class Frames(Protocol):
    """How one call's answers are framed: the binding's envelope around the codec's encoding."""

    #: False for a JSON-RPC notification: nothing is sent back but a status.
    expects_response: bool

    def result(self, operation: Operation, result: Any) -> tuple[int, bytes]:
        """The HTTP status and body of a unary call's answer."""
        ...

    def event(self, event: StreamResponse, logged: bytes | None = None) -> bytes:
        """The ``data`` of one SSE event: compact JSON, with no line break (every codec's encoder makes it
        so, a test of the codec table proves it), so it is framed without a scan for one. ``logged``: the
        event's JSON as the store's log holds it, when the stream has it (the codec reuses what it can)."""
        ...

    def error(self, error: A2AError, streaming: bool) -> EarlyAnswer:
        """The answer to a call that failed before anything was sent."""
        ...

    def stream_error(self, error: A2AError) -> bytes:
        """The ``data`` of a stream's last event, for an error after its first event."""
        ...


class DecodedCall(msgspec.Struct, frozen=True):
    """A decoded call: what to run, at which version, and how to frame its answers."""

    operation: Operation
    params: Any
    version: str
    frames: Frames


class Request(msgspec.Struct, frozen=True):
    """What the prologue read: the ASGI scope, its headers, the route the binding accepted, the body.
    (Structs, not dataclasses, here and for :class:`DecodedCall`: two are built per request, a frozen dataclass
    costs several times as much to build.)"""

    scope: Scope
    headers: dict[str, str]
    route: Any
    body: bytes
    principal: Principal = ANONYMOUS
    #: The extensions the request activated (some change how answers are encoded).
    extensions: frozenset[str] = frozenset()


class HttpEndpoint:
    """An ASGI endpoint over the Dispatcher; a binding implements the four steps that differ."""

    #: The binding's name on the CallContext (``JSONRPC``, ``HTTP+JSON``).
    binding = ""

    def __init__(
        self,
        dispatcher: Dispatcher,
        *,
        limits: Limits,
        keepalive: float,
        activate: Callable[[frozenset[str]], frozenset[str]] = lambda requested: frozenset(),
        base_url: Callable[[Scope, Mapping[str, str]], str] | None = None,
        guard: Guard | None = None,
        browser: BrowserPolicy | None = None,
        observability: Observability | None = None,
    ) -> None:
        self.dispatcher = dispatcher
        self.limits = limits
        self.keepalive = keepalive
        #: requested extension URIs -> the ones this agent activates (declared on its card)
        self._activate = activate
        #: the base URL of a request (the app's public URL, or where the client reached it)
        self._base_url = base_url
        #: the agent's security policy at the door (None: no security, every caller is anonymous)
        self.guard = guard
        #: which requests of web pages on other sites are refused (:mod:`skillwire.server.bindings.browser`)
        self.browser = browser or BrowserPolicy()
        observability = observability or Observability()
        #: where request spans go (:mod:`skillwire.server.observability.telemetry`; None: no tracing, nothing imported)
        self.telemetry: Telemetry | None = observability.telemetry
        #: what requests are counted in (:mod:`skillwire.server.observability.metrics`; None: not counted)
        self.metrics: Metrics | None = observability.metrics
        #: whether access lines carry their fields, for JSON logs
        self.json_logs = observability.json_logs

    # -- the steps a binding implements --------------------------------------------------------------------

    def accept(self, scope: Scope, headers: Mapping[str, str]) -> Any:
        """The route of a request this binding serves, or None (nothing sent: not ours); raises EarlyAnswer."""
        raise NotImplementedError

    def refuse(self, route: Any, error: A2AError, status: int) -> EarlyAnswer:
        """The answer to a request refused before decoding (content type, body size)."""
        raise NotImplementedError

    def checks_content_type(self, route: Any) -> bool:
        """Whether the request's Content-Type must be JSON."""
        raise NotImplementedError

    def decode(self, request: Request) -> DecodedCall | None:
        """The call in a request (None: not ours after all); raises EarlyAnswer. Runs on a worker thread for a
        large body."""
        raise NotImplementedError

    # -- the shared flow -------------------------------------------------------------------------------------

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> bool:
        """Serve the request; False (nothing sent) when it is not this binding's."""
        headers = header_map(scope)
        echo: Headers | None = None
        started = time.perf_counter()
        route: Any = None
        try:
            route = self.accept(scope, headers)
            if route is None:
                return False
            cross_site = self.browser.refusal(headers)
            if cross_site is not None:  # before credentials: a page's request runs nothing, with any cookie
                raise self.refuse(route, cross_site, 403)
            principal = ANONYMOUS if self.guard is None else await self._authenticate(route, scope, headers)
            body = await self._receive(route, receive, headers)
            activated = self._activate(requested_extensions(headers))
            echo = [(b"a2a-extensions", ",".join(sorted(activated)).encode())] if activated else None
            request = Request(scope, headers, route, body, principal, activated)
            if len(request.body) > self.limits.offload_decode_bytes:  # off the loop: its cost grows with it
                call = await asyncio.to_thread(self._decode, request)
            else:
                call = self._decode(request)
        except EarlyAnswer as answer:
            if answer.error is not None:
                self._refused(route, answer.error, started, headers)
            await answer.send(send, echo)
            return True
        except ClientGone:
            return True
        if call is None:
            return False
        await self._serve(call, request, activated, echo, receive, send)
        return True

    async def _authenticate(self, route: Any, scope: Scope, headers: Mapping[str, str]) -> Principal:
        assert self.guard is not None
        try:
            return await self.guard.http(scope, headers)
        except A2AError as error:  # 401 or 403, before the body is read
            raise self.refuse(route, error, error.http_status) from None
        except Exception as exc:  # a scheme's bug (a verifier callable that raised): never a 500 with a trace
            raise self.refuse(route, _as_a2a(exc, "authenticating a request"), 500) from None

    def _decode(self, request: Request) -> DecodedCall | None:
        try:
            return self.decode(request)
        except EarlyAnswer:
            raise
        except Exception as exc:  # a codec's bug: answered like any other failure
            raise self.refuse(request.route, _as_a2a(exc, "decoding a request"), 500) from None

    async def _receive(self, route: Any, receive: Receive, headers: Mapping[str, str]) -> bytes:
        content_type = headers.get("content-type")
        checks = self.checks_content_type(route)
        if checks and content_type is not None and not is_json_content_type(content_type):
            raise self._unsupported(route, content_type)
        if checks and content_type is None and headers.get("content-length", "0").strip() not in ("0", ""):
            raise self._unsupported(route, None)  # a body without a type: refused before it is read
        try:
            body = await read_body(receive, self.limits.max_body_bytes, headers.get("content-length"))
        except BodyTooLarge:
            error = InvalidRequestError(
                f"Request body exceeds the limit of {self.limits.max_body_bytes} bytes",
                metadata={"budget": "max_body_bytes", "limit": self.limits.max_body_bytes},
            )
            raise self.refuse(route, error, 413) from None
        if checks and content_type is None and body:  # sent chunked, without a length
            raise self._unsupported(route, None)
        return body

    def _unsupported(self, route: Any, content_type: str | None) -> EarlyAnswer:
        """The refusal of a body that is not said to be JSON. A body without a Content-Type is refused too: a
        web page on another site can send one (``sendBeacon``, a ``Blob``), never with a JSON type unless the
        agent allowed its origin (CORS preflight). An empty body needs none (the official SDK's clients
        POST ``:subscribe`` and ``:cancel`` without one)."""
        shown = "none, with a body" if content_type is None else repr(content_type[:100])
        unsupported = ContentTypeNotSupportedError(
            f"Content-Type {shown} is not supported: send application/json",
            metadata={"contentType": (content_type or "")[:100]},
        )
        return self.refuse(route, unsupported, 415)

    def _refused(self, route: Any, error: A2AError, started: float, headers: Mapping[str, str]) -> None:
        refused(
            self.binding,
            error,
            started,
            headers,
            telemetry=self.telemetry,
            metrics=self.metrics,
            operation=self.operation_of(route),
        )

    def operation_of(self, route: Any) -> Operation | None:
        """The operation ``route`` is, when it is known without the body (HTTP+JSON: by its path)."""
        return None

    def context(
        self, call: DecodedCall, request: Request, activated: frozenset[str], request_id: str = ""
    ) -> CallContext:
        base_url = self._base_url(request.scope, request.headers) if self._base_url is not None else ""
        return CallContext(
            protocol_version=call.version,
            tenant=checked_tenant(self.guard, request.principal, call.params),
            principal=request.principal,
            extensions=activated,
            binding=self.binding,
            headers=request.headers,
            base_url=base_url,
            request_bytes=len(request.body),
            request_id=request_id,
        )

    async def _serve(
        self,
        call: DecodedCall,
        request: Request,
        activated: frozenset[str],
        echo: Headers | None,
        receive: Receive,
        send: Send,
    ) -> None:
        streaming = spec_of(call.operation).streaming
        tenant = getattr(call.params, "tenant", "") or ""
        watch = Watch(
            self.binding,
            call.operation,
            request.headers,
            streaming=streaming,
            telemetry=self.telemetry,
            metrics=self.metrics,
            tenant=tenant,
            json_logs=self.json_logs,
        )
        outcome: Any = None
        answered = False
        try:
            try:
                context = self.context(call, request, activated, watch.request_id)
                if _is_long_poll(call):
                    result = await _unless_gone(
                        self.dispatcher.call(call.operation, call.params, context), receive
                    )
                else:
                    result = await self.dispatcher.call(call.operation, call.params, context)
                first = await _first(result) if streaming and getattr(result, "opens_at_once", True) else None
            except ClientGone:
                return  # a long-poll whose client went away: nobody to answer
            except Exception as exc:
                outcome = _as_a2a(exc, call.operation.value)
                await call.frames.error(outcome, streaming).send(send, echo)
            else:
                outcome = await self._answer(
                    call, result, first, echo, receive, send, watch.tracks, unsent_probe(request.scope)
                )
            answered = True
        finally:
            watch.end(call.params, outcome, request.principal.owner, line=answered)

    async def _answer(
        self,
        call: DecodedCall,
        result: Any,
        first: StreamResponse | None,
        echo: Headers | None,
        receive: Receive,
        send: Send,
        tracked: bool,
        unsent: Unsent | None,
    ) -> Any:
        """Send a call's answer; what it ended with, for the access log."""
        if not spec_of(call.operation).streaming:
            try:
                status, body = call.frames.result(call.operation, result)
            except Exception as exc:  # a result the codec cannot encode: the binding's error, not a bare 500
                error = _as_a2a(exc, f"encoding the {call.operation.value} result")
                await call.frames.error(error, False).send(send, echo)
                return error
            await send_bytes(send, status, body, extra_headers=echo)
            return result
        if not call.frames.expects_response:  # a streaming notification: the task runs, nobody listens
            aclose = getattr(result, "aclose", None)  # optional on an AsyncIterator
            if aclose is not None:
                await aclose()
            await send_bytes(send, 204, b"")
            return first
        events = access.Tracked(result, first) if tracked else result
        await self._stream(call.frames, events, first, receive, send, echo, unsent)
        return events

    async def _stream(
        self,
        frames: Frames,
        events: AsyncIterator[StreamResponse],
        first: StreamResponse | None,
        receive: Receive,
        send: Send,
        echo: Headers | None,
        unsent: Unsent | None,
    ) -> None:
        logged: Callable[[StreamResponse], bytes | None] = getattr(events, "logged", _unlogged)

        def frame(event: StreamResponse) -> bytes:
            return encode_json_event(frames.event(event, logged(event)), generation_of(event))

        def frame_error(exc: Exception) -> bytes:
            return encode_event(frames.stream_error(_as_a2a(exc, "stream")))

        try:
            opening = None if first is None else frame(first)
        except Exception as exc:  # an event the codec cannot encode, before the stream started
            await frames.error(_as_a2a(exc, "encoding a stream's first event"), True).send(send, echo)
            return
        await stream_sse(
            receive,
            send,
            events,
            frame=frame,
            frame_error=frame_error,
            keepalive=self.keepalive,
            write_timeout=self.limits.write_timeout,
            first=opening,
            extra_headers=echo,
            unsent=unsent,
        )


def _is_long_poll(call: DecodedCall) -> bool:
    return call.operation is Operation.GET_TASK and call.params.current_generation is not None


async def _unless_gone(work: Coroutine[Any, Any, Any], receive: Receive) -> Any:
    """``work``'s result, or ClientGone (``work`` cancelled) if the client disconnects first: a long-poll
    holds nothing for a client that left."""
    task = asyncio.ensure_future(work)
    gone = asyncio.ensure_future(until_disconnected(receive))
    try:
        await asyncio.wait({task, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
    if not task.done():
        task.cancel()
        with contextlib.suppress(BaseException):
            await task
        raise ClientGone()
    return task.result()


async def _first(stream: AsyncIterator[StreamResponse]) -> StreamResponse | None:
    """A stream's first event, pulled before the response starts so that an error raised up front is a plain
    error response rather than a one-event stream."""
    try:
        return await anext(stream)
    except StopAsyncIteration:
        return None


def _as_a2a(exc: Exception, what: str) -> A2AError:
    """``exc`` as the error to answer with: itself if it is a protocol error, else a generic one (logged)."""
    if isinstance(exc, A2AError):
        return exc
    log.error("%s failed", what, exc_info=exc)
    return InternalError()
