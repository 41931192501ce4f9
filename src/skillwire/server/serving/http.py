"""HTTP/1.1 connection budgets, below the ASGI application: what one socket may cost the server.

The application bounds what it reads (bodies, JSON shapes), but not the socket: the request line and headers
are parsed, and connections are accepted and kept, before any ASGI code runs. :func:`protocol_for` gives the
uvicorn protocol class that :func:`skillwire.server.serving.serve.build_server` (hence ``skillwire serve`` and
``Agent.run()``) serves with, which enforces, from ``app.limits``:

* ``max_header_bytes``: the request line and headers; beyond it 431 and the connection is closed. The bytes
  are counted before the parser sees them, so a header that never ends costs the server the budget, not the
  header (httptools joins the pieces of a header that spans reads one concatenation at a time, which is
  quadratic in the number of reads).
* ``header_timeout``: from the first byte of a request to the end of its headers (a client that trickles
  them, "slowloris"); 408 and close.
* ``body_timeout``: from the end of the headers to the end of the body; 408 and close. A request whose
  answer was already sent (a 413 sent before the body ended) is closed at this deadline instead of reading
  the rest of the body for as long as the client sends it.
* ``keepalive_timeout``: an idle connection, including a new one that never sends a byte, is closed.
* ``max_connections``: beyond it a new connection is answered 503 with ``Retry-After`` at once, without
  reading anything, and closed.

None of these cuts an answer being sent: a stream (SSE) starts only after its request is read whole, no timer
runs while an answer is open, and an open stream is not idle. While an earlier answer on the connection is
still being sent (HTTP/1.1 pipelining), a budget exceeded by the next request stops the reading and closes the
connection once that answer ends, rather than writing an error into the middle of it. A timer that fires
while the server itself has stopped reading (a pipelined request waiting its turn, a body the application is
slow to consume) waits another period: the client is not the one stalling.

Why a subclass of uvicorn's httptools protocol rather than another server: it keeps the fastest parser uvicorn
has and the rest of uvicorn (graceful shutdown, lifespan, flow control) unchanged; the budgets cost a few
counters per read and no timer in the common case (a request that arrives in one read arms none). uvicorn's
h11 protocol bounds headers too (``h11_max_incomplete_event_size``) but has no header or body deadline and is
slower. It is used only where httptools is not installed (``build_server`` then keeps the header limit, the
keep-alive time and a connection cap, and logs what it cannot bound).

``max_connections`` is kept below the file descriptors the process may open
(:mod:`skillwire.server.bindings.descriptors`), so that a connection over the budget can still be accepted and told
503 instead of failing the accept.

Mounted in another ASGI server (``hypercorn``, ``gunicorn -k uvicorn.workers.UvicornWorker``, uvicorn run
from its own command line) the application cannot bound any of this: configure that server's own header
size, timeouts and connection limits.
"""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from typing import Any, ClassVar

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from skillwire.errors import A2AError, InvalidRequestError, ServerBusyError
from skillwire.protocol.limits import Limits
from skillwire.server.bindings.asgi import UNSENT_EXTENSION
from skillwire.wire.rest import encode_status

__all__ = ["BoundedHttpProtocol", "protocol_for"]


def _canned(error: A2AError, status: int, extra: bytes = b"") -> bytes:
    """A complete HTTP/1.1 response that closes the connection: the AIP-193 body the bindings use."""
    body = encode_status(error, status)
    reason = {408: b"Request Timeout", 431: b"Request Header Fields Too Large", 503: b"Service Unavailable"}
    head = (
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\n%sconnection: close\r\n\r\n"
        % (status, reason[status], len(body), extra)
    )
    return head + body


class _Answers:
    """The responses a budget answers with, encoded once per server."""

    def __init__(self, limits: Limits) -> None:
        self.headers_too_large = _canned(
            InvalidRequestError(
                f"The request line and headers exceed the limit of {limits.max_header_bytes} bytes"
            ),
            431,
        )
        self.headers_too_slow = _canned(
            InvalidRequestError(f"The request headers did not arrive within {limits.header_timeout:g} s"), 408
        )
        self.body_too_slow = _canned(
            InvalidRequestError(f"The request body did not arrive within {limits.body_timeout:g} s"), 408
        )
        busy = ServerBusyError(
            "The server has too many open connections: try again shortly", retry_after=limits.retry_after
        )
        self.busy = _canned(busy, 503, b"retry-after: %d\r\n" % limits.retry_after)


try:  # Linux's SIOCOUTQ is TIOCOUTQ: the bytes a TCP socket holds that the peer has not acknowledged
    import fcntl
    import termios

    _OUTQ: int | None = termios.TIOCOUTQ
except (ImportError, AttributeError):  # Windows
    _OUTQ = None


class _Unsent:
    """The bytes written to a connection that the client has not taken yet: what the transport still holds
    plus what the kernel does (sent and not acknowledged, or not sent yet), or None where the kernel cannot
    tell (the ioctl fails: macOS and others, a closed socket). Read only while a stream's write waits
    (:class:`~skillwire.server.bindings.asgi._WriteDeadline`), so a connection pays nothing for it otherwise."""

    __slots__ = ("_transport",)

    def __init__(self, transport: asyncio.Transport) -> None:
        self._transport = transport

    def __call__(self) -> int | None:
        sock = self._transport.get_extra_info("socket")
        if _OUTQ is None or sock is None:
            return None
        try:
            queued: int = struct.unpack("i", fcntl.ioctl(sock.fileno(), _OUTQ, b"\0\0\0\0"))[0]
        except (OSError, ValueError):
            return None
        return self._transport.get_write_buffer_size() + queued


class _OneWrite:
    """The transport as one request's uvicorn cycle sees it: the head of an answer with a Content-Length is
    held until the answer's first body write and goes out with it, one write instead of two.

    uvicorn writes the status line and headers as soon as the application starts its answer, then the body:
    two system calls, and on TCP two segments for the client to take, for every unary answer (strace: two
    ``write`` per SendMessage). Only a head that promises a body is held (Content-Length above 0, not a
    HEAD request): the body must follow, and an application that fails first has uvicorn close the
    transport, which writes the head before closing, as before. Streams (chunked) and everything after the
    first body write pass straight through. Nothing else writes to the connection while an answer is open
    (the budgets' own answers come before a request is served or after its answer ends)."""

    __slots__ = ("_cycle", "_head", "_started", "_transport")

    def __init__(self, transport: asyncio.Transport, cycle: Any) -> None:
        self._transport = transport
        self._cycle = cycle
        self._head = b""
        self._started = False

    def write(self, data: bytes) -> None:
        if self._head:
            data, self._head = self._head + data, b""
        elif not self._started and self._cycle.response_started:
            self._started = True  # this is the head (a 100 Continue comes before the answer starts)
            if self._cycle.chunked_encoding is False and self._cycle.expected_content_length > 0:
                self._head = data
                return
        self._transport.write(data)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        # a held head goes out before the close, unless the connection was aborted meanwhile (_after_app)
        if self._head and not self._transport.is_closing():
            self._transport.write(self._head)
        self._head = b""
        self._transport.close()


class BoundedHttpProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with the connection budgets of :class:`Limits` (see the module)."""

    limits: ClassVar[Limits]
    max_connections: ClassVar[int]
    #: told the budget's name each time one refuses a connection or request (the metrics), if set
    rejected: ClassVar[Callable[[str], None] | None] = None
    answers: ClassVar[_Answers]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.timeout_keep_alive = self.limits.keepalive_timeout  # type: ignore[assignment]
        self._app, self.app = self.app, self._application
        #: A request has begun and its headers are not complete.
        self._in_headers = False
        #: Its header bytes so far (from the read after the one it began in, if it began mid-read).
        self._header_bytes = 0
        #: Requests begun during the current feed of the parser.
        self._begun = 0
        #: Headers are complete and the body is not.
        self._in_body = False
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        #: Read nothing more: a budget was exceeded, and the connection closes now or once the answer
        #: being sent ends.
        self._discarding = False

    # -- connections -----------------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        if len(self.connections) >= self.max_connections:
            self.transport = transport
            self._discarding = True
            transport.write(self.answers.busy)
            transport.close()
            self._count("max_connections")
            return
        super().connection_made(transport)
        self._unsent = _Unsent(transport)
        # uvicorn arms the keep-alive timer only after an answer; a connection that never sends is idle too.
        self.timeout_keep_alive_task = self.loop.call_later(
            self.timeout_keep_alive, self.timeout_keep_alive_handler
        )

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_timers()
        if self.flow is None:  # refused in connection_made
            return
        super().connection_lost(exc)

    def _count(self, budget: str) -> None:
        rejected = type(self).rejected
        if rejected is not None:
            rejected(budget)

    # -- reading ---------------------------------------------------------------------------------------

    def data_received(self, data: bytes) -> None:
        limit = self.limits.max_header_bytes
        while not self._discarding:
            if self._in_body:
                self._feed(data)
                break
            # Between requests or inside headers: feed no more than what is left of the budget.
            room = limit - self._header_bytes if self._in_headers else limit
            if len(data) <= room:
                self._feed(data)
                data = b""
            else:
                self._feed(data[:room])
                data = data[room:]
            if self._in_headers and self._header_bytes >= limit:
                self._count("max_header_bytes")
                self._refuse(self.answers.headers_too_large, current=False)
                return
            if not data or self.transport.is_closing():
                break
        if (self._in_headers or self._in_body) and not self._discarding and not self.transport.is_closing():
            self._arm_timers()

    def _feed(self, data: bytes) -> None:
        was_in_headers, was_idle = self._in_headers, not self._in_headers and not self._in_body
        self._begun = 0
        super().data_received(data)
        if not self._in_headers:
            return
        if self._begun == 0 and was_in_headers:
            self._header_bytes += len(data)
        elif self._begun == 1 and was_idle:
            self._header_bytes = len(data)
        # else the request began in the middle of this read, after another one: it is counted from the
        # next read on, so its headers may pass the limit by at most one read.

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_headers = True
        self._header_bytes = 0
        self._begun += 1

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._in_body = True
        if self._header_timer is not None:
            self._cancel_header_timer()
        extensions: dict[Any, Any] = self.scope.setdefault("extensions", {})
        extensions[UNSENT_EXTENSION] = self._unsent  # the stream's write deadline reads it
        before = self.cycle
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not before and cycle is not None and self.scope["method"] != "HEAD":
            cycle.transport = _OneWrite(self.transport, cycle)  # type: ignore[assignment]

    async def _application(self, scope: Any, receive: Any, send: Any) -> None:
        """The application, as every request of this connection calls it (pipelined ones included): then
        :meth:`_after_app`. ``send`` is the request's own (a method of uvicorn's cycle), so a pipelined
        request's end is checked against its own answer. Wrapping the application costs one coroutine a
        request. It replaced a done callback on the request's task, found by copying the server's set of
        running tasks before uvicorn started it: that missed pipelined requests (uvicorn starts those from
        ``on_response_complete``), and cost time in proportion to the requests in flight (in the set's own
        functions alone, 3,500 instructions a request at 16 in flight and 12,300 at 64, by callgrind)."""
        try:
            await self._app(scope, receive, send)
        finally:
            cycle = getattr(send, "__self__", None)
            if cycle is not None:
                self._after_app(cycle)

    def _after_app(self, cycle: Any) -> None:
        """The application returned or raised. If it left its answer incomplete (it dropped a stream whose
        client took nothing, see :func:`~skillwire.server.bindings.asgi.stream_sse`), the connection is
        aborted rather than closed: a close would wait to flush to a client that does not read."""
        if cycle.response_started and not cycle.response_complete and not cycle.disconnected:
            self._discarding = True
            self._cancel_timers()
            self.transport.abort()

    def on_message_complete(self) -> None:
        self._in_body = False
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None
        super().on_message_complete()

    # -- deadlines -------------------------------------------------------------------------------------

    def _arm_timers(self) -> None:
        # Only a request still incomplete at the end of a read arms a timer; it began in this read (else its
        # timer would be armed already), so "now" is its first byte, or the end of its headers.
        if self._in_headers and self._header_timer is None:
            self._header_timer = self.loop.call_later(self.limits.header_timeout, self._headers_too_slow)
        elif self._in_body and self._body_timer is None:
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_too_slow)

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        if self.flow.read_paused:
            self._header_timer = self.loop.call_later(self.limits.header_timeout, self._headers_too_slow)
            return
        self._count("header_timeout")
        self._refuse(self.answers.headers_too_slow, current=False)

    def _body_too_slow(self) -> None:
        self._body_timer = None
        cycle = self.cycle
        if self.flow.read_paused:
            self._body_timer = self.loop.call_later(self.limits.body_timeout, self._body_too_slow)
        elif cycle.response_complete:  # answered already: stop reading what is left of the body
            self._close()
        elif cycle.response_started:  # an answer is under way: let it end, then close
            self._discarding = True
        else:
            self._count("body_timeout")
            self._refuse(self.answers.body_too_slow, current=True)

    def _cancel_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _cancel_timers(self) -> None:
        self._cancel_header_timer()
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    # -- refusing --------------------------------------------------------------------------------------

    def _refuse(self, answer: bytes, *, current: bool) -> None:
        """Answer ``answer`` and close; or, while an earlier answer is still to be sent, close after it.

        ``current``: the request refused is ``self.cycle``'s (its body was too slow); otherwise it has no
        cycle yet (its headers are incomplete) and ``self.cycle`` is the request before it."""
        self._cancel_timers()
        self._discarding = True
        cycle = self.cycle
        if cycle is not None and not cycle.response_complete:
            if not current or cycle.response_started:
                return  # on_response_complete closes once the answers under way are sent
            queued = [entry for entry in self.pipeline if entry[0] is cycle]
            if queued:  # refused before its turn: it never runs
                self.pipeline.remove(queued[0])
                return
            # Its application sees a disconnect, and whatever it sends now is dropped.
            cycle.disconnected = True
            cycle.message_event.set()
        self.transport.write(answer)
        self._close()

    def on_response_complete(self) -> None:
        last = not self.pipeline
        super().on_response_complete()
        if last and self._discarding:
            self._close()

    def _close(self) -> None:
        self._discarding = True
        self._unset_keepalive_if_required()
        if not self.transport.is_closing():
            self.transport.close()


def protocol_for(
    limits: Limits,
    max_connections: int | None = None,
    rejected: Callable[[str], None] | None = None,
) -> type[BoundedHttpProtocol]:
    """A :class:`BoundedHttpProtocol` class bound to ``limits`` (for ``uvicorn.Config(http=...)``);
    ``max_connections`` overrides ``limits.max_connections`` (see :func:`connection_ceiling`);
    ``rejected`` is told the name of each budget that refuses a connection or request."""
    namespace = {
        "limits": limits,
        "rejected": staticmethod(rejected) if rejected is not None else None,
        "max_connections": limits.max_connections if max_connections is None else max_connections,
        "answers": _Answers(limits),
    }
    return type("BoundedHttpProtocol", (BoundedHttpProtocol,), namespace)
