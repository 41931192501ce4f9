"""The MCP endpoint of ``skillwire serve --mcp``: Streamable HTTP at ``/mcp``, mounted in the A2A application.

The application serves it behind the door its A2A routes have (:class:`~skillwire.server.app.Mounted`): the
browser guard, the agent's security schemes (each tool call runs as the caller they authenticated, so it
sees only that caller's tasks), and the ``max_body_bytes`` budget. The SDK's own DNS-rebinding check is
off: the application's allowed hosts and browser guard do that job, for every route alike.

An MCP session belongs to the caller that opened it: a request naming another caller's session
(``Mcp-Session-Id``) is answered 404, as for a session that does not exist, so a session id that leaks
gives nobody else its stream or its state.

The SDK's session manager runs in a task of its own from the application's start-up to its shutdown, so the
endpoint works whether the application is started by its lifespan or, mounted, on its first request.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from typing import Any

from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from skillwire.errors import A2AError, MethodNotFoundError, ServerBusyError
from skillwire.protocol.limits import Limits
from skillwire.security.principal import ANONYMOUS, Principal
from skillwire.server.app import PRINCIPAL_SCOPE_KEY
from skillwire.server.bindings.asgi import (
    Message,
    Receive,
    Scope,
    Send,
    error_headers,
    header_map,
    send_bytes,
)
from skillwire.server.bindings.browser import BrowserPolicy
from skillwire.server.bindings.hosts import AllowedHosts
from skillwire.wire.rest import encode_status

__all__ = ["MCP_PATH", "McpMount", "McpOnly"]

#: Where ``serve --mcp`` serves MCP (Streamable HTTP), below the application's root path.
MCP_PATH = "/mcp"
#: Session owners remembered at most (twice the SDK's default cap of open sessions).
_MAX_OWNERS = 20_000


class McpMount:
    """An MCP server as a :class:`~skillwire.server.app.Mounted` app at ``path``."""

    def __init__(self, server: Server[Any], *, limits: Limits | None = None, path: str = MCP_PATH) -> None:
        self.path = path
        self.label = "MCP (Streamable HTTP)"
        self.server = server
        self.limits = limits or Limits()
        self._manager: StreamableHTTPSessionManager | None = None
        self._stop: asyncio.Event | None = None
        self._running: asyncio.Task[None] | None = None
        #: session id -> the owner key of the caller that opened it (oldest first)
        self._owners: dict[str, str] = {}

    async def start(self) -> None:
        manager = StreamableHTTPSessionManager(
            app=self.server, max_request_body_size=self.limits.max_body_bytes, security_settings=None
        )
        started, self._stop = asyncio.Event(), asyncio.Event()
        self._running = asyncio.create_task(self._run(manager, started, self._stop))
        waiting = asyncio.ensure_future(started.wait())
        await asyncio.wait({waiting, self._running}, return_when=asyncio.FIRST_COMPLETED)
        waiting.cancel()
        if self._running.done():
            self._running.result()  # raises why it could not start
        self._manager = manager

    @staticmethod
    async def _run(
        manager: StreamableHTTPSessionManager, started: asyncio.Event, stop: asyncio.Event
    ) -> None:
        async with manager.run():
            started.set()
            await stop.wait()

    async def stop(self) -> None:
        self._manager = None
        if self._stop is not None and self._running is not None:
            self._stop.set()
            with contextlib.suppress(Exception):
                await self._running

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        manager = self._manager
        if manager is None:  # stopped (shutdown), or never started
            error = ServerBusyError("The MCP endpoint is not running", retry_after=1)
            await send_bytes(send, 503, encode_status(error, 503), extra_headers=error_headers(error))
            return
        principal = scope.get(PRINCIPAL_SCOPE_KEY, ANONYMOUS)
        owner = principal.owner if isinstance(principal, Principal) else ""
        session = header_map(scope).get("mcp-session-id")
        if session is not None and self._owners.get(session, owner) != owner:
            body = b'{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"Session not found"}}'
            await send_bytes(send, 404, body)
            return
        if session is None:
            send = self._recording(send, owner)
        await manager.handle_request(scope, receive, send)

    def _recording(self, send: Send, owner: str) -> Send:
        """``send``, noting the owner of the session a response opens."""

        async def recording(message: Message) -> None:
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", ()):
                    if name.lower() == b"mcp-session-id":
                        self._owners[value.decode("latin-1")] = owner
                        while len(self._owners) > _MAX_OWNERS:  # sessions the SDK let go long ago
                            del self._owners[next(iter(self._owners))]
            await send(message)

        return recording


class McpOnly:
    """An ASGI app serving one :class:`McpMount` and nothing else (``skillwire mcp TARGET --http``), behind
    the browser guard and, when given, the allowed hosts (on a loopback address: its loopback names, so a
    web page cannot reach it through DNS rebinding). Its lifespan starts and stops the mount."""

    def __init__(self, mount: McpMount, *, allowed_hosts: Sequence[str] | None = None) -> None:
        self.mount = mount
        self.browser = BrowserPolicy()
        self.hosts = AllowedHosts(allowed_hosts) if allowed_hosts else None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                if message["type"] == "lifespan.startup":
                    await self.mount.start()
                    await send({"type": "lifespan.startup.complete"})
            await self.mount.stop()
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        headers = header_map(scope)
        refused = self._refusal(scope, headers)
        if refused is not None:
            error, status = refused
            await send_bytes(send, status, encode_status(error, status))
            return
        await self.mount({**scope, PRINCIPAL_SCOPE_KEY: ANONYMOUS}, receive, send)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> tuple[A2AError, int] | None:
        """Why a request is not served, and its status: a Host not served (400), another path (404), a web
        page of another site (403)."""
        host = headers.get("host")
        if self.hosts is not None and not self.hosts.allows(host, scope.get("scheme", "http")):
            return self.hosts.refusal(host), 400
        if scope["path"] != self.mount.path:
            return MethodNotFoundError(f"No such endpoint: MCP is served at {self.mount.path}"), 404
        cross_site = self.browser.refusal(headers)
        return (cross_site, 403) if cross_site is not None else None
