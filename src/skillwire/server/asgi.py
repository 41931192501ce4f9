"""Small ASGI building blocks shared by the bindings: headers, bodies, plain responses, SSE pumping."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from typing import Any, TypeVar

from skillwire.wire.sse import KEEPALIVE

__all__ = [
    "SSE_HEADERS",
    "BodyTooLarge",
    "Receive",
    "Scope",
    "Send",
    "header_map",
    "read_body",
    "send_bytes",
    "stream_sse",
]

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


async def read_body(receive: Receive, limit: int) -> bytes:
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


SSE_HEADERS = [
    (b"content-type", b"text/event-stream"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


async def stream_sse(
    receive: Receive,
    send: Send,
    events: AsyncIterator[T],
    *,
    frame: Callable[[T], bytes],
    frame_error: Callable[[Exception], bytes],
    keepalive: float,
    first: bytes | None = None,
    extra_headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Send ``first`` then ``frame(event)`` for each of ``events`` as an SSE response, with keep-alive
    comments when idle. An exception raised by ``events`` is sent as ``frame_error(exc)`` and ends the
    stream.

    A pump task reads ``events`` into a buffer; the sender writes whatever has accumulated as one body
    chunk, so a burst of events costs one socket write. If the client goes away the iterator is closed and
    nothing else happens: the work behind the stream (a task) is not canceled by a disconnect.
    """
    headers = SSE_HEADERS + extra_headers if extra_headers else SSE_HEADERS
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    if first is not None:
        await send({"type": "http.response.body", "body": first, "more_body": True})

    buffer: list[bytes] = []
    ready = asyncio.Event()

    async def pump() -> None:
        try:
            async for event in events:
                buffer.append(frame(event))
                ready.set()
        except Exception as exc:
            buffer.append(frame_error(exc))
        finally:
            ready.set()

    async def disconnected() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    pumping = asyncio.ensure_future(pump())
    watcher = asyncio.ensure_future(disconnected())
    gone = False
    try:
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
                    await send({"type": "http.response.body", "body": KEEPALIVE, "more_body": True})
                continue
            if buffer:
                chunk = b"".join(buffer)
                buffer.clear()
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
                continue
            break  # the pump finished and everything it read is sent
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    finally:
        watcher.cancel()
        if not pumping.done():
            pumping.cancel()
        with contextlib.suppress(BaseException):
            await pumping
        aclose = getattr(events, "aclose", None)
        if aclose is not None:
            with contextlib.suppress(Exception):
                await aclose()
        if gone:
            with contextlib.suppress(Exception):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
