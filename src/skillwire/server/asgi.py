"""Small ASGI building blocks shared by the bindings: headers, bodies, plain responses, SSE pumping.

Streams are bounded twice (:func:`stream_sse`): the pump that reads events stops while
:data:`PUMP_BYTES` of frames wait unsent, so a client that reads slowly holds its backlog in the event
bus's subscription, where the bus counts it against its per-subscriber budget; and every write must be
taken within ``write_timeout`` seconds, or the stream is dropped: the iterator is closed (the task goes on,
and the client can resubscribe) and the call returns with its response incomplete, which tells the server
to close the connection.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

from skillwire.errors import A2AError, ServerBusyError
from skillwire.wire.sse import KEEPALIVE

__all__ = [
    "PUMP_BYTES",
    "SSE_HEADERS",
    "BodyTooLarge",
    "Receive",
    "Scope",
    "Send",
    "error_headers",
    "header_map",
    "read_body",
    "send_bytes",
    "stream_sse",
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
    """The headers an error response carries besides the usual ones: ``Retry-After`` when busy."""
    if isinstance(error, ServerBusyError):
        return [(b"retry-after", str(error.retry_after).encode())]
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


class _Stalled(Exception):
    """The client took no write within the write timeout."""


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
) -> None:
    """Send ``first`` then ``frame(event)`` for each of ``events`` as an SSE response, with keep-alive
    comments when idle. An exception raised by ``events`` is sent as ``frame_error(exc)`` and ends the
    stream.

    A pump task reads ``events`` into a buffer of at most :data:`PUMP_BYTES` (it waits while the buffer is
    fuller); the sender writes whatever has accumulated as one body chunk, so a burst of events costs one
    socket write. A write the client does not take within ``write_timeout`` seconds drops the stream: the
    response is left incomplete, so the server closes the connection. Whether the client went away or was
    dropped, the iterator is closed and nothing else happens: the work behind the stream (a task) is not
    canceled.
    """
    headers = SSE_HEADERS + extra_headers if extra_headers else SSE_HEADERS
    buffer: list[bytes] = []
    pending = 0
    ready = asyncio.Event()  # the buffer holds something, or the pump ended
    room = asyncio.Event()  # the buffer is under PUMP_BYTES
    room.set()

    async def write(message: dict[str, Any]) -> None:
        try:
            async with asyncio.timeout(write_timeout):
                await send(message)
        except TimeoutError:
            raise _Stalled() from None

    async def pump() -> None:
        nonlocal pending
        try:
            async for event in events:
                chunk = frame(event)
                buffer.append(chunk)
                pending += len(chunk)
                ready.set()
                if pending >= PUMP_BYTES:
                    room.clear()
                    await room.wait()
        except Exception as exc:
            buffer.append(frame_error(exc))
        finally:
            ready.set()

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    pumping: asyncio.Future[None] | None = None
    watcher = asyncio.ensure_future(disconnected())
    gone = False
    try:
        await write({"type": "http.response.start", "status": 200, "headers": headers})
        if first is not None:
            await write({"type": "http.response.body", "body": first, "more_body": True})
        pumping = asyncio.ensure_future(pump())
        while True:
            if not buffer and not pumping.done():
                ready.clear()
                waiter = asyncio.ensure_future(ready.wait())
                done, _ = await asyncio.wait(
                    {waiter, watcher}, timeout=keepalive, return_when=asyncio.FIRST_COMPLETED
                )
                waiter.cancel()
                if watcher in done:
                    gone = True
                    return
                if not done:
                    await write({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                continue
            if buffer:
                chunk = b"".join(buffer)
                buffer.clear()
                pending = 0
                room.set()
                await write({"type": "http.response.body", "body": chunk, "more_body": True})
                continue
            break  # the pump finished and everything it read is sent
        await write({"type": "http.response.body", "body": b"", "more_body": False})
    except _Stalled:
        # Left incomplete on purpose: an ASGI server closes a connection whose response did not end.
        log.warning("dropped a stream whose client took nothing for %s s", write_timeout)
    finally:
        watcher.cancel()
        if pumping is not None and not pumping.done():
            pumping.cancel()
        if pumping is not None:
            with contextlib.suppress(BaseException):
                await pumping
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
        if gone:
            with contextlib.suppress(Exception):
                await write({"type": "http.response.body", "body": b"", "more_body": False})
