"""Small ASGI building blocks shared by the bindings: headers, bodies, plain responses, SSE pumping.

Streams are bounded twice (:func:`stream_sse`): the pump that reads events stops while
:data:`PUMP_BYTES` of frames wait unsent, so a client that reads slowly holds its backlog in the event
bus's subscription, where the bus counts it against its per-subscriber budget; and a client that takes
nothing for ``write_timeout`` seconds is dropped: the iterator is closed (the task goes on,
and the client can resubscribe) and the call returns with its response incomplete, which tells the server
to close the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

from skillwire.errors import A2AError, ServerBusyError, UnauthenticatedError
from skillwire.wire.sse import KEEPALIVE

__all__ = [
    "PUMP_BYTES",
    "SSE_HEADERS",
    "UNSENT_EXTENSION",
    "BodyTooLarge",
    "Receive",
    "Scope",
    "Send",
    "Unsent",
    "error_headers",
    "header_map",
    "read_body",
    "send_bytes",
    "stream_sse",
    "unsent_probe",
    "until_disconnected",
]

log = logging.getLogger("skillwire.stream")

T = TypeVar("T")
Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class BodyTooLarge(Exception):
    pass


class ClientGone(Exception):
    pass


def header_map(scope: Scope) -> dict[str, str]:
    """Request headers, names lower-cased; repeated headers joined with commas."""
    out: dict[str, str] = {}
    for raw_name, raw_value in scope.get("headers", ()):
        name = raw_name.decode("latin-1").lower()
        value = raw_value.decode("latin-1")
        out[name] = f"{out[name]},{value}" if name in out else value
    return out


async def read_body(receive: Receive, limit: int, content_length: str | None = None) -> bytes:
    """The request body; BodyTooLarge once it passes ``limit`` bytes, or at once (nothing read) when its
    ``Content-Length`` says it will."""
    if content_length is not None and content_length.isdigit() and int(content_length) > limit:
        raise BodyTooLarge()
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientGone()
        chunk = message.get("body", b"")
        if chunk:
            size += len(chunk)
            if size > limit:
                raise BodyTooLarge()
            chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


async def send_bytes(
    send: Send,
    status: int,
    body: bytes,
    content_type: bytes = b"application/json",
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    if extra_headers:
        headers.extend(extra_headers)
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def error_headers(error: A2AError) -> list[tuple[bytes, bytes]]:
    """The headers an error response carries besides the usual ones: ``Retry-After`` when busy, the
    ``WWW-Authenticate`` challenges when credentials are missing or wrong."""
    if isinstance(error, ServerBusyError):
        return [(b"retry-after", str(error.retry_after).encode())]
    if isinstance(error, UnauthenticatedError):
        return [(b"www-authenticate", c.encode("latin-1", "replace")) for c in error.challenges]
    return []


SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


#: Frames the pump holds unsent before it stops pulling events (plus the event that crossed it): asyncio's
#: default write-buffer high-water mark, enough to batch a burst of events into one socket write. Not
#: ``limits.stream_buffer_bytes``: a backlog beyond this belongs in the event bus, which counts it against
#: that budget and drops a subscriber that falls behind; holding it here too would hide it from the bus and
#: double what a slow client costs.
PUMP_BYTES = 64 * 1024


_END = {"type": "http.response.body", "body": b"", "more_body": False}


def _body(chunk: bytes) -> dict[str, Any]:
    return {"type": "http.response.body", "body": chunk, "more_body": True}


#: The ASGI scope extension through which the HTTP protocol tells how many bytes of its connection the
#: client has not taken yet (:class:`~skillwire.server.serving.http.BoundedHttpProtocol` sets it): a callable
#: returning that count, or None when it cannot tell.
UNSENT_EXTENSION = "skillwire.unsent"

Unsent = Callable[[], int | None]


def unsent_probe(scope: Scope) -> Unsent | None:
    """The scope's :data:`UNSENT_EXTENSION`, if the server that called the application gave one."""
    extensions = scope.get("extensions")
    probe = extensions.get(UNSENT_EXTENSION) if extensions else None
    return probe if callable(probe) else None


class _WriteDeadline:
    """Cancels the task it was made in once the client has taken nothing for ``timeout`` seconds
    (``expired``); a ``timeout`` of 0 or less sets none.

    A write waiting longer than ``timeout`` is not enough to say so: the kernel wakes a blocked writer only
    once half of its send buffer has drained, and Linux grows that buffer to 4 MiB, so one write to a
    client that reads at 40 KB/s can wait longer than 30 s while the client reads all along. With
    ``unsent`` (the connection's bytes not yet taken: :data:`UNSENT_EXTENSION`) a write that has waited
    ``timeout`` goes on waiting while that count keeps falling, checked every quarter of ``timeout``;
    without it (another ASGI server, a platform without the count) the write's own wait is the measure.

    One timer per stream rather than an ``asyncio.timeout`` around each write: writes are a stream's hot
    path, and arming and disarming a timer per write cost several microseconds, more than the write itself
    while the client keeps up."""

    def __init__(self, timeout: float, unsent: Unsent | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._timeout = timeout
        self._unsent = unsent
        self._since = 0.0  # when the write under way began, or last made progress; 0.0 between writes
        self._seen: int | None = None  # bytes not taken at the last check of the write under way
        self.expired = False
        self._timer = self._loop.call_later(timeout, self._check) if timeout > 0 else None

    async def write(self, send: Send, message: Message) -> None:
        self._since = self._loop.time() or 1e-9
        self._seen = None
        try:
            await send(message)
        finally:
            self._since = 0.0

    def _check(self) -> None:
        now = self._loop.time()
        if self._since and self._unsent is not None:
            unsent = self._unsent()
            if unsent is not None and self._seen is not None and unsent < self._seen:
                self._since = now  # the client took something since the last check
            self._seen = unsent
        waited = now - self._since if self._since else 0.0
        if self._since and waited >= self._timeout and self._task is not None:
            self.expired = True
            self._task.cancel()
            return
        step = self._timeout - waited
        if self._since and self._unsent is not None:
            step = min(step, self._timeout / 4)
        self._timer = self._loop.call_later(step, self._check)

    def absorbs(self, exc: BaseException) -> bool:
        """Whether ``exc`` is this deadline's own cancellation, which it then takes back (a cancellation
        from elsewhere too is left to propagate)."""
        if not (self.expired and isinstance(exc, asyncio.CancelledError) and self._task is not None):
            return False
        return self._task.uncancel() == 0

    def close(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def _nothing() -> None:
    return None


class _Pump:
    """Reads ``events`` into SSE frames, and waits while :data:`PUMP_BYTES` of them are unsent."""

    def __init__(
        self,
        events: AsyncIterator[T],
        frame: Callable[[T], bytes],
        frame_error: Callable[[Exception], bytes],
    ) -> None:
        self.frames: list[bytes] = []
        self._size = 0
        self.ready = asyncio.Event()  # frames are waiting, or the pump ended
        self._room = asyncio.Event()
        self._room.set()
        self._task = asyncio.ensure_future(self._run(events, frame, frame_error))

    async def _run(
        self,
        events: AsyncIterator[T],
        frame: Callable[[T], bytes],
        frame_error: Callable[[Exception], bytes],
    ) -> None:
        # A burst already at hand is taken with plain calls (``next_nowait``, where the stream has it).
        poll: Callable[[], T | None] = getattr(events, "next_nowait", _nothing)
        frames = self.frames
        try:
            async for first in events:
                event: T | None = first
                while event is not None:
                    chunk = frame(event)
                    frames.append(chunk)
                    self._size += len(chunk)
                    if self._size >= PUMP_BYTES:
                        self.ready.set()
                        self._room.clear()
                        await self._room.wait()
                    event = poll()
                self.ready.set()
        except Exception as exc:
            self.frames.append(frame_error(exc))
        finally:
            self.ready.set()

    @property
    def done(self) -> bool:
        return self._task.done()

    def take(self) -> bytes:
        """Every waiting frame, as one chunk; the pump goes on."""
        chunk = b"".join(self.frames)
        self.frames.clear()
        self._size = 0
        self._room.set()
        return chunk

    async def close(self) -> None:
        self._task.cancel()
        with contextlib.suppress(BaseException):
            await self._task


async def stream_sse(
    receive: Receive,
    send: Send,
    events: AsyncIterator[T],
    *,
    frame: Callable[[T], bytes],
    frame_error: Callable[[Exception], bytes],
    keepalive: float,
    write_timeout: float,
    first: bytes | None = None,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
    unsent: Unsent | None = None,
) -> None:
    """Send ``first`` then ``frame(event)`` for each of ``events`` as an SSE response, with keep-alive
    comments when idle. An exception raised by ``events`` is sent as ``frame_error(exc)`` and ends the
    stream.

    A pump task reads ``events`` into a buffer of at most :data:`PUMP_BYTES` (it waits while the buffer is
    fuller); the sender writes whatever has accumulated as one body chunk, so a burst of events costs one
    socket write. A client that takes nothing for ``write_timeout`` seconds drops the stream (measured by
    ``unsent``, the connection's bytes not yet taken, when the server gives it: see :class:`_WriteDeadline`;
    else by one write's wait): the response is left incomplete, so the server closes the connection. Whether the client went away or was
    dropped, the iterator is closed and nothing else happens: the work behind the stream (a task) is not
    canceled.
    """
    headers = SSE_HEADERS + extra_headers if extra_headers else SSE_HEADERS
    deadline = _WriteDeadline(write_timeout, unsent)
    watcher = asyncio.ensure_future(until_disconnected(receive))
    pump: _Pump | None = None
    gone = False
    try:
        await deadline.write(send, {"type": "http.response.start", "status": 200, "headers": headers})
        if first is not None:
            await deadline.write(send, _body(first))
        pump = _Pump(events, frame, frame_error)
        gone = await _send_frames(send, pump, watcher, deadline, keepalive)
        if not gone:
            await deadline.write(send, _END)
    except BaseException as exc:
        if not deadline.absorbs(exc):
            raise
        # Left incomplete on purpose: an ASGI server closes a connection whose response did not end.
        log.warning("dropped a stream whose client took nothing for %s s", write_timeout)
    finally:
        deadline.close()
        watcher.cancel()
        await _close(send, events, pump, gone)


async def _close(send: Send, events: AsyncIterator[Any], pump: _Pump | None, gone: bool) -> None:
    """Stop reading a stream's events (the work behind them goes on) and end a response nobody reads."""
    if pump is not None:
        await pump.close()
    aclose = getattr(events, "aclose", None)  # optional on an AsyncIterator
    if aclose is not None:
        with contextlib.suppress(Exception):
            await aclose()
    if gone:  # nobody reads it: the server answers at once for a client that went away
        with contextlib.suppress(Exception):
            await send(_END)


async def until_disconnected(receive: Receive) -> None:
    """Return once the client disconnects (what a request that reads no more body receives next)."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def _send_frames(
    send: Send, pump: _Pump, watcher: asyncio.Future[Any], deadline: _WriteDeadline, keepalive: float
) -> bool:
    """Write the pump's frames as they come, and keep-alive comments when idle, until the pump ends (False)
    or the client goes away (True)."""
    while True:
        if not pump.frames and not pump.done:
            pump.ready.clear()
            waiter: asyncio.Future[Any] = asyncio.ensure_future(pump.ready.wait())
            done, _ = await asyncio.wait(
                {waiter, watcher}, timeout=keepalive, return_when=asyncio.FIRST_COMPLETED
            )
            waiter.cancel()
            if watcher in done:
                return True
            if not done:
                await deadline.write(send, _body(KEEPALIVE))
        elif pump.frames:
            await deadline.write(send, _body(pump.take()))
        else:
            return False  # the pump finished and everything it read is sent
