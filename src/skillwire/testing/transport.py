"""An httpx transport that runs an ASGI app in process and streams its responses.

::

    from skillwire.testing import StreamingASGITransport

    app = agent.asgi(store="memory://")
    await app.startup()
    async with httpx.AsyncClient(transport=StreamingASGITransport(app), base_url="http://agent") as http:
        client = await Client.connect("http://agent", http=http)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import httpx

from skillwire.server.bindings.asgi import Receive, Scope, Send

__all__ = ["StreamingASGITransport"]


class StreamingASGITransport(httpx.AsyncBaseTransport):
    """An httpx transport that calls an ASGI app in the running event loop and hands the response body
    over chunk by chunk as the app sends it.

    ``httpx.ASGITransport`` returns a response only once the app has sent all of it, so an SSE stream
    arrives whole at its end, and a test that waits on an event in the middle of a stream waits forever.
    Here the response is returned when its head is sent; closing it tells the app the client went away
    (``http.disconnect``), as a real connection would. Lifespan is not run: start the app yourself."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        url = request.url
        scope: Scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "scheme": url.scheme,
            "path": url.path,
            "raw_path": url.raw_path.split(b"?")[0],
            "query_string": url.query,
            "server": (url.host, url.port or (443 if url.scheme == "https" else 80)),
            "client": ("127.0.0.1", 123),
            "root_path": "",
        }
        loop = asyncio.get_running_loop()
        head: asyncio.Future[dict[str, Any]] = loop.create_future()
        chunks: asyncio.Queue[bytes | None] = asyncio.Queue()
        gone = asyncio.Event()
        request_sent = False

        async def receive() -> dict[str, Any]:
            nonlocal request_sent
            if not request_sent:
                request_sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await gone.wait()
            return {"type": "http.disconnect"}

        async def send(message: Any) -> None:
            if message["type"] == "http.response.start":
                head.set_result(dict(message))
            elif message["type"] == "http.response.body" and not gone.is_set():
                if message.get("body"):
                    chunks.put_nowait(message["body"])
                if not message.get("more_body", False):
                    chunks.put_nowait(None)

        async def run() -> None:
            try:
                await self.app(scope, receive, send)
            finally:
                chunks.put_nowait(None)

        app_task = asyncio.create_task(run())
        pending: set[asyncio.Future[Any]] = {head, app_task}
        try:
            await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        except BaseException:
            gone.set()  # the caller gave up (a timeout, a cancel): tell the app, as a dropped connection would
            raise
        if not head.done():
            app_task.result()  # the app's exception, if it raised one
            raise RuntimeError("the ASGI app returned without sending a response")
        start = head.result()
        return httpx.Response(
            start["status"],
            headers=start.get("headers", []),
            stream=_ResponseBody(chunks, app_task, gone),
            request=request,
        )


class _ResponseBody(httpx.AsyncByteStream):
    def __init__(
        self, chunks: asyncio.Queue[bytes | None], app_task: asyncio.Task[None], gone: asyncio.Event
    ):
        self._chunks = chunks
        self._app_task = app_task
        self._gone = gone

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while (chunk := await self._chunks.get()) is not None:
            yield chunk

    async def aclose(self) -> None:
        self._gone.set()
        await self._app_task
