"""An in-process client for your own agent, for its tests: ``agent.test_client()``.

::

    def test_greets():
        with agent.test_client() as client:          # a SyncClient
            task = client.send("Ada")

    async def test_greets_async():
        async with agent.test_client() as client:    # a Client, in the running event loop
            async for event in client.stream("Ada"):
                ...

Each ``with`` builds a fresh app (by default over an empty memory store), runs its ASGI lifespan (start-up
on entry, shutdown on exit, as uvicorn would) and connects a real client through the agent card over
:class:`StreamingASGITransport`: no socket, and streams arrive event by event.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, MutableMapping, Sequence
from types import TracebackType
from typing import Any

import httpx

from skillwire.client.client import Client
from skillwire.client.sync import SyncClient, _LoopThread
from skillwire.errors import SkillwireError
from skillwire.server.app import A2AApplication
from skillwire.testing.transport import StreamingASGITransport

__all__ = ["AgentTestClient"]

BASE_URL = "http://agent.test"


class _Lifespan:
    """Drives an ASGI app's lifespan protocol, as a server does: start-up, then shutdown."""

    def __init__(self, app: A2AApplication) -> None:
        self._app = app
        self._inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None

    async def _send(self, message: MutableMapping[str, Any]) -> None:
        await self._outbox.put(dict(message))

    async def _expect(self, phase: str) -> None:
        await self._inbox.put({"type": f"lifespan.{phase}"})
        assert self._task is not None
        answer = asyncio.ensure_future(self._outbox.get())
        await asyncio.wait({answer, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if not answer.done():
            answer.cancel()
            self._task.result()  # the app's exception, if it raised one
            raise RuntimeError(f"the app's lifespan ended without answering lifespan.{phase}")
        reply = answer.result()
        if reply["type"] != f"lifespan.{phase}.complete":
            raise SkillwireError(f"{phase} failed: {reply.get('message', '')}")

    async def startup(self) -> None:
        scope = {"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}
        self._task = asyncio.create_task(self._app(scope, self._inbox.get, self._send))
        await self._expect("startup")

    async def shutdown(self) -> None:
        if self._task is None or self._task.done():
            return
        try:
            await self._expect("shutdown")
        finally:
            await self._task


class AgentTestClient:
    """What ``agent.test_client()`` returns: ``with`` it for a :class:`~skillwire.SyncClient`, ``async
    with`` it for a :class:`~skillwire.Client`. ``.app`` is the running app (None outside a ``with``)."""

    def __init__(
        self,
        make_app: Callable[[], A2AApplication],
        *,
        bindings: Sequence[str] = ("JSONRPC", "HTTP+JSON"),
        headers: dict[str, str] | None = None,
        extensions: Sequence[str] = (),
    ) -> None:
        self._make_app = make_app
        self._bindings = list(bindings)
        self._headers = headers
        self._extensions = list(extensions)
        self.app: A2AApplication | None = None
        self._lifespan: _Lifespan | None = None
        self._stack: contextlib.AsyncExitStack | None = None
        self._loop: _LoopThread | None = None

    # -- async ---------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Client:
        if self._stack is not None:
            raise RuntimeError("this test client is already open; make another with agent.test_client()")
        stack = contextlib.AsyncExitStack()
        try:
            self.app = app = self._make_app()
            lifespan = _Lifespan(app)
            await lifespan.startup()
            stack.push_async_callback(lifespan.shutdown)
            transport = StreamingASGITransport(app)
            http = await stack.enter_async_context(httpx.AsyncClient(transport=transport, base_url=BASE_URL))
            client = await Client.connect(
                BASE_URL,
                http=http,
                bindings=self._bindings,
                headers=self._headers,
                extensions=self._extensions,
                retries=0,
            )
            await stack.enter_async_context(client)
        except BaseException:
            await stack.aclose()
            self.app = None
            raise
        self._stack = stack
        return client

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        stack, self._stack = self._stack, None
        try:
            if stack is not None:
                await stack.aclose()
        finally:
            self.app = None

    # -- sync: the same, on a private event loop in a background thread --------------------------------------

    def __enter__(self) -> SyncClient:
        loop = _LoopThread()
        try:
            aclient = loop.run(self.__aenter__())
        except BaseException:
            loop.close()
            raise
        self._loop = loop
        return _SyncTestClient(aclient, loop, self._stop)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._stop()

    def _stop(self) -> None:
        """Shut the app down on its loop, then stop the loop (once: closing the client inside the ``with``
        does it too)."""
        loop, self._loop = self._loop, None
        if loop is None:
            return
        try:
            loop.run(self.__aexit__(None, None, None))
        finally:
            loop.close()


class _SyncTestClient(SyncClient):
    """A SyncClient whose ``close`` also shuts down the app it runs beside (on the same loop)."""

    def __init__(self, aclient: Client, loop: _LoopThread, stop: Callable[[], None]) -> None:
        super().__init__(aclient, loop)
        self._stop = stop

    def close(self) -> None:
        self._stop()
