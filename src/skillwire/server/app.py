"""The ASGI application: routes, lifespan, and graceful shutdown.

Routes: ``POST /`` (JSON-RPC), ``GET /.well-known/agent-card.json``, and the HTTP+JSON (REST) paths
(``/message:send``, ``/tasks/...``, each also under a ``/{tenant}`` prefix). Anything else is 404. Start-up opens
the store and recovers tasks a previous process left running; shutdown lets running tasks finish for a
grace period, fails the rest, ends open streams, then closes the store.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, TypeVar
from urllib.parse import urlsplit

import msgspec

from skillwire.errors import A2AError, MethodNotFoundError, SkillwireError
from skillwire.protocol.limits import Limits
from skillwire.protocol.models import AgentCapabilities, AgentCard, AgentInterface
from skillwire.server.asgi import Receive, Scope, Send, send_bytes
from skillwire.server.card import CARD_PATH, CardEndpoint, jsonrpc_interface
from skillwire.server.endpoint import HttpEndpoint
from skillwire.server.handler import Dispatcher, RequestHandler
from skillwire.server.jsonrpc import JsonRpcEndpoint
from skillwire.server.rest import RestEndpoint
from skillwire.server.runtime import TaskRuntime
from skillwire.stores.base import TaskStore
from skillwire.wire import v03
from skillwire.wire.rest import encode_status

__all__ = ["A2AApplication"]

log = logging.getLogger("skillwire.app")

E = TypeVar("E", bound=HttpEndpoint)

_NOT_FOUND = encode_status(MethodNotFoundError("No such endpoint"), 404)


class A2AApplication:
    def __init__(
        self,
        *,
        card: AgentCard,
        handler: RequestHandler,
        runtime: TaskRuntime | None = None,
        store: TaskStore | None = None,
        public_url: str | None = None,
        rpc_path: str = "/",
        limits: Limits | None = None,
        keepalive: float = 15.0,
        shutdown_grace: float = 5.0,
        grpc_port: int | None = None,
        grpc_host: str = "127.0.0.1",
        grpc_status_overrides: Mapping[type[A2AError], str] = {},
        card_v03_fields: bool = True,
    ) -> None:
        self.card = card
        self.limits = limits = limits or Limits()
        self.handler = handler
        self.runtime = runtime
        self.store = store
        self.rpc_path = rpc_path
        self.shutdown_grace = shutdown_grace
        self.dispatcher = Dispatcher(handler, self._capabilities, self._interfaces)
        self.card_endpoint = CardEndpoint(
            self.card_for, public_url=public_url, extra=self._v03_fields if card_v03_fields else None
        )
        self.jsonrpc = self._endpoint(JsonRpcEndpoint, keepalive)
        self.rest = self._endpoint(RestEndpoint, keepalive)
        #: gRPC (extra ``skillwire[grpc]``) is served beside the HTTP bindings when ``grpc_port`` is set
        #: (0 picks a free port); ``grpc_address`` is then the ``host:port`` written on the card.
        #: ``grpc_status_overrides``: see :class:`~skillwire.server.grpc.GrpcServer`'s ``status_overrides``.
        self.grpc_port = grpc_port
        self.grpc_host = grpc_host
        self.grpc_status_overrides = grpc_status_overrides
        self.grpc_address: str | None = None
        self._grpc: Any = None
        self._declared = frozenset(e.uri for e in card.capabilities.extensions)
        self._started = False
        self._stopped = False
        #: Why start-up failed (the store could not be opened, ...), for whoever runs the server.
        self.startup_error: BaseException | None = None

    def _endpoint(self, binding: type[E], keepalive: float) -> E:
        """An HTTP binding over this app's dispatcher, budgets and extension rule."""
        return binding(
            self.dispatcher,
            limits=self.limits,
            keepalive=keepalive,
            activate=self._activate,
            base_url=self.card_endpoint.base_url,
        )

    def _capabilities(self) -> AgentCapabilities:
        return self.card.capabilities

    def _v03_fields(self, base_url: str, card: AgentCard) -> dict[str, Any]:
        """The v0.3 members written beside the v1.0 ones, so v0.3 clients read the same card (the spec
        allows it). v0.3 clients reach JSON-RPC and REST (under /v1) at the base URL; gRPC is 1.0 only."""
        jsonrpc = card.supported_interfaces[0].url
        return v03.v03_card_fields(card, jsonrpc_url=jsonrpc, interfaces=[(base_url, "HTTP+JSON")])

    def _activate(self, requested: frozenset[str]) -> frozenset[str]:
        """The requested extensions this agent declares (unknown ones are ignored, as the spec says)."""
        return requested & self._declared if requested else requested

    def _interfaces(self, base_url: str) -> list[AgentInterface]:
        """The public card's interfaces for a request's base URL (the public URL, or only gRPC's when a
        gRPC call gives none)."""
        base = base_url or self.card_endpoint.public_url
        if base:
            return self.card_for(base).supported_interfaces
        if self.grpc_address:
            return [AgentInterface(url=self.grpc_address, protocol_binding="GRPC", protocol_version="1.0")]
        return []

    def card_for(self, base_url: str) -> AgentCard:
        """The public card as served under ``base_url``: JSON-RPC first (preferred), then HTTP+JSON, then
        gRPC when it is served."""
        interfaces = [
            jsonrpc_interface(base_url, self.rpc_path),
            AgentInterface(url=base_url, protocol_binding="HTTP+JSON", protocol_version="1.0"),
        ]
        if self.grpc_address:
            interfaces.append(
                AgentInterface(url=self.grpc_address, protocol_binding="GRPC", protocol_version="1.0")
            )
        return msgspec.structs.replace(self.card, supported_interfaces=interfaces)

    async def startup(self) -> None:
        if self._started:
            return
        self._started = True
        if self.store is not None:
            await self.store.open()
        if self.runtime is not None:
            await self.runtime.start()
        if self.grpc_port is not None:
            from skillwire.server.grpc import GrpcServer

            self._grpc = GrpcServer(
                self.dispatcher,
                self.grpc_host,
                self.grpc_port,
                limits=self.limits,
                activate=self._activate,
                status_overrides=self.grpc_status_overrides,
            )
            await self._grpc.start()
            public = self.card_endpoint.public_url
            host = urlsplit(public).hostname if public else self.grpc_host
            if host in (None, "", "0.0.0.0", "::"):
                host = "127.0.0.1"
            self.grpc_address = f"[{host}]:{self._grpc.port}" if ":" in host else f"{host}:{self._grpc.port}"
            self.card_endpoint.invalidate()

    async def shutdown(self) -> None:
        if self._stopped or not self._started:
            return
        self._stopped = True
        # gRPC stops taking calls at once; its open streams end when the runtime ends every stream.
        stopping = (
            asyncio.ensure_future(self._grpc.stop(self.shutdown_grace)) if self._grpc is not None else None
        )
        try:
            if self.runtime is not None:
                await self.runtime.stop(self.shutdown_grace)
            if self.store is not None:
                await self.store.close()
        finally:
            if stopping is not None:
                await stopping

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            path = scope["path"]
            if path == self.rpc_path:
                await self.jsonrpc(scope, receive, send)
            elif path == CARD_PATH:
                await self.card_endpoint(scope, receive, send)
            elif not await self.rest(scope, receive, send):
                await send_bytes(send, 404, _NOT_FOUND)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    self.startup_error = exc
                    if isinstance(exc, SkillwireError):  # a known condition: one clear line, no traceback
                        log.error("start-up failed: %s", exc)
                    else:
                        log.exception("start-up failed")
                    await send({"type": "lifespan.startup.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                try:
                    await self.shutdown()
                except Exception as exc:
                    log.exception("shutdown failed")
                    await send({"type": "lifespan.shutdown.failed", "message": str(exc)})
                    return
                await send({"type": "lifespan.shutdown.complete"})
                return
