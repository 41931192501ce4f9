"""The ASGI application: routes, lifespan, and graceful shutdown.

Routes: ``POST /`` (JSON-RPC), ``GET /.well-known/agent-card.json`` (also at ``/.well-known/agent.json``, where
clients before A2A 0.3 look), and the HTTP+JSON (REST) paths
(``/message:send``, ``/tasks/...``, each also under a ``/{tenant}`` prefix). Anything else is 404. Start-up opens
the store and recovers tasks a previous process left running; shutdown lets running tasks finish for a
grace period, fails the rest, ends open streams, then closes the store.

Mounted under a prefix (Starlette's ``Mount``, FastAPI's ``app.mount("/a2a", ...)``, uvicorn's
``--root-path``), every route is served under the ASGI ``root_path`` and the card's URLs point there. A
mounted app gets no lifespan events of its own, so it starts itself on its first request; a start-up that
fails answers 503 (JSON-RPC -32603) saying why, and is tried again on a later request when nothing was left
running. :meth:`A2AApplication.lifespan` gives the parent app a clean shutdown (see docs/mounting.md).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable
from urllib.parse import quote, urlsplit

import msgspec

from skillwire.console import ConsoleAssets
from skillwire.errors import (
    A2AError,
    AgentNotStartedError,
    InvalidRequestError,
    MethodNotFoundError,
    ServerBusyError,
    SkillwireError,
)
from skillwire.protocol.models import AgentCapabilities, AgentCard, AgentExtension, AgentInterface
from skillwire.protocol.operations import Operation
from skillwire.security.policy import Security
from skillwire.security.principal import ANONYMOUS
from skillwire.server.bindings.asgi import (
    BodyTooLarge,
    ClientGone,
    Message,
    Receive,
    Scope,
    Send,
    error_headers,
    header_map,
    read_body,
    send_bytes,
)
from skillwire.server.bindings.browser import BrowserPolicy, is_preflight, origin_of
from skillwire.server.bindings.card import (
    CARD_PATHS,
    JWKS_PATH,
    CardEndpoint,
    jsonrpc_interface,
    send_key_set,
)
from skillwire.server.bindings.endpoint import HttpEndpoint
from skillwire.server.bindings.guard import Guard
from skillwire.server.bindings.hosts import AllowedHosts
from skillwire.server.bindings.jsonrpc import JsonRpcEndpoint
from skillwire.server.bindings.rest import RestEndpoint
from skillwire.server.context import CallContext
from skillwire.server.handler import Dispatcher, RequestHandler
from skillwire.server.notifications.outbound import WebhookPolicy
from skillwire.server.notifications.push import JWKS_PATH as PUSH_JWKS_PATH
from skillwire.server.notifications.push import PushService
from skillwire.server.observability.metrics import METRICS_PATH
from skillwire.server.options import Grpc, Serving, signers_of
from skillwire.server.tasks.runtime import TaskRuntime
from skillwire.stores.base import TaskStore
from skillwire.wire import jsonrpc as jsonrpc_wire
from skillwire.wire import v03
from skillwire.wire.generations import GENERATIONS_URI, IDEMPOTENCY_URI
from skillwire.wire.rest import encode_status

if TYPE_CHECKING:
    from skillwire.wire.card_signing import CardSigner

__all__ = ["PRINCIPAL_SCOPE_KEY", "A2AApplication", "MountFactory", "Mounted", "NotLoadedApplication"]

log = logging.getLogger("skillwire.app")

E = TypeVar("E", bound=HttpEndpoint)

_encode_json = msgspec.json.Encoder().encode
_NOT_FOUND = encode_status(MethodNotFoundError("No such endpoint"), 404)
#: Seconds a mounted app that failed to start answers its failure before it tries to start again.
_RETRY_START_AFTER = 1
#: Where a request to a :class:`Mounted` app carries the caller the security schemes authenticated.
PRINCIPAL_SCOPE_KEY = "skillwire.principal"


@runtime_checkable
class Mounted(Protocol):
    """An ASGI app served at ``path`` beside the A2A routes (the MCP endpoint of ``serve --mcp``), behind the
    same door: the browser guard, the security schemes (the caller's Principal is in the scope under
    :data:`PRINCIPAL_SCOPE_KEY`) and the ``max_body_bytes`` budget (a POST's body is read first, then
    replayed to the app). ``start`` and ``stop`` run with the application's own start-up and shutdown."""

    path: str
    #: What it is, for the banner of ``skillwire serve`` (``MCP``).
    label: str

    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None: ...


#: Makes a :class:`Mounted` app from the application's dispatcher (the MCP endpoint calls the skills there).
MountFactory = Callable[[Dispatcher], Mounted]


class A2AApplication:
    """The agent served over ASGI; :meth:`skillwire.Agent.asgi` builds it.

    What its options (:class:`~skillwire.server.options.Serving`) say: ``network.allowed_hosts``, the Host
    headers served, others refused (see :mod:`skillwire.server.bindings.hosts`); ``network.console``: serve
    the web console (:mod:`skillwire.console`) at ``/console/`` below the root path, without the security
    schemes (the page is public; its calls are A2A calls like any other, with the credentials typed into it);
    ``network.cors_origins``: the origins (``https://app.example``) whose web pages may call the agent, with
    CORS; requests a browser marks as coming from any other site are refused
    (:mod:`skillwire.server.bindings.browser`); ``observability.telemetry``: OpenTelemetry spans of requests
    and task runs (:mod:`skillwire.server.observability.telemetry`; None: none, and nothing imported);
    ``observability.metrics``: Prometheus metrics served at ``/metrics`` behind the security schemes
    (:mod:`skillwire.server.observability.metrics`; None: not counted, no endpoint).
    """

    def __init__(
        self,
        *,
        card: AgentCard,
        handler: RequestHandler,
        runtime: TaskRuntime | None = None,
        store: TaskStore | None = None,
        options: Serving | None = None,
        security: Security | None = None,
        card_signer: CardSigner | Sequence[CardSigner] | None = None,
        push: PushService | None = None,
        mounts: Sequence[Mounted | MountFactory] = (),
    ) -> None:
        """``options``: the serving options (:mod:`skillwire.server.options`: the budgets, the network, gRPC,
        timing, observability, the webhook policy, the card's v0.3 fields), each part handed to what uses it;
        the runtime was built with the same observability. ``security``: the schemes and requirements
        enforced on every operation of every binding (the card at ``/.well-known/agent-card.json``
        excepted); None: every caller is anonymous. ``card_signer``: one CardSigner, or several (key
        rotation), that sign the public and extended cards (see :mod:`skillwire.server.bindings.card`).
        ``push``: the runtime's push notifications, whose signing keys are served at
        ``/.well-known/webhook-jwks.json``. ``mounts``: ASGI apps served beside the A2A routes behind the
        same door (:class:`Mounted`), or functions of the app's dispatcher that make one."""
        self.options = options = options or Serving()
        network = options.network
        self.card = card if runtime is None else _with_runtime_extensions(card, runtime)
        self.browser = BrowserPolicy(network.cors_origins)
        self.console = ConsoleAssets.served() if network.console else None
        self.push = push
        self.webhook_policy = options.push.webhook_policy or WebhookPolicy()
        self.security = security
        self.guard = Guard(security) if security is not None else None
        self.handler = handler
        self.runtime = runtime
        self.store = store
        self._init_options(options)
        self.allowed_hosts = AllowedHosts(network.allowed_hosts) if network.allowed_hosts else None
        self.card_endpoint = self._card_endpoint(signers_of(card_signer))
        sign = self.card_endpoint.sign if self.card_endpoint.signers else None
        self.dispatcher = Dispatcher(handler, self._capabilities, self._interfaces, sign)
        self.jsonrpc = self._endpoint(JsonRpcEndpoint)
        self.rest = self._endpoint(RestEndpoint)
        self.mounts: list[Mounted] = [m if isinstance(m, Mounted) else m(self.dispatcher) for m in mounts]
        self._init_grpc(options.grpc)
        self._init_state()

    def _init_options(self, options: Serving) -> None:
        """The options read on every request, at hand."""
        self.limits = options.limits
        self.rpc_path = options.network.rpc_path
        self.shutdown_grace = options.timing.shutdown_grace
        self.observability = options.observability
        self.telemetry = options.observability.telemetry
        self.metrics = options.observability.metrics
        #: The certificates skillwire's own servers serve with: the gRPC server, and the uvicorn server
        #: :func:`~skillwire.server.serving.serve.build_server` makes (an ASGI server of yours brings its own).
        self.tls = options.network.tls

    def _card_endpoint(self, signers: Sequence[CardSigner]) -> CardEndpoint:
        v03 = self.options.card.v03_fields
        return CardEndpoint(
            self.card_for,
            public_url=self.options.network.public_url,
            allowed_hosts=self.allowed_hosts,
            signers=list(signers),
            extra=self._v03_fields if v03 is None or v03 else None,
        )

    def _init_grpc(self, grpc: Grpc) -> None:
        #: gRPC (extra ``skillwire[grpc]``) is served beside the HTTP bindings when ``grpc.port`` is set
        #: (0 picks a free port); ``grpc_address`` is then the ``host:port`` written on the card.
        #: ``grpc_status_overrides``: see :class:`~skillwire.server.bindings.grpc.GrpcServer`'s ``status_overrides``.
        self.grpc_port = grpc.port
        self.grpc_host = grpc.host
        self.grpc_status_overrides = grpc.status_overrides
        self.grpc_address: str | None = None
        self._grpc: Any = None

    def _init_state(self) -> None:
        self._declared = frozenset(e.uri for e in self.card.capabilities.extensions)
        self._started = False  # start-up ran (and left something to shut down)
        self._serving = False  # start-up succeeded: requests go straight to the bindings
        self._stopped = False
        self._starting = asyncio.Lock()
        #: Why start-up failed (the store could not be opened, ...), for whoever runs the server.
        self.startup_error: BaseException | None = None
        self._unavailable: ServerBusyError | None = None  # what requests answer while start-up fails
        self._retry_at = 0.0  # loop time from which a failed start-up may be tried again (inf: never)

    def _endpoint(self, binding: type[E]) -> E:
        """An HTTP binding over this app's dispatcher, budgets, extension rule and observability."""
        return binding(
            self.dispatcher,
            limits=self.limits,
            keepalive=self.options.timing.keepalive,
            activate=self._activate,
            base_url=self.card_endpoint.base_url,
            guard=self.guard,
            browser=self.browser,
            observability=self.observability,
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
        if self.grpc_url:
            return [AgentInterface(url=self.grpc_url, protocol_binding="GRPC", protocol_version="1.0")]
        return []

    @property
    def grpc_url(self) -> str | None:
        """The gRPC interface's URL on the card: ``grpc_address``, behind ``https://`` under TLS."""
        if self.grpc_address is None or self.tls is None:
            return self.grpc_address
        return f"https://{self.grpc_address}"

    def card_for(self, base_url: str) -> AgentCard:
        """The public card as served under ``base_url``: JSON-RPC first (preferred), then HTTP+JSON, then
        gRPC when it is served."""
        interfaces = [
            jsonrpc_interface(base_url, self.rpc_path),
            AgentInterface(url=base_url, protocol_binding="HTTP+JSON", protocol_version="1.0"),
        ]
        if self.grpc_url:
            interfaces.append(
                AgentInterface(url=self.grpc_url, protocol_binding="GRPC", protocol_version="1.0")
            )
        return msgspec.structs.replace(self.card, supported_interfaces=interfaces)

    async def startup(self) -> None:
        """Open the store, recover tasks, start gRPC. Runs once, however many callers (lifespan, the first
        request of a mounted app, your own code): the others wait for it. Raises what made it fail."""
        async with self._starting:
            await self._startup_once()

    async def _startup_once(self) -> None:
        if self._serving or self._stopped:
            return
        if self._started:  # it failed after things began to run: only a restart can help
            raise self.startup_error or RuntimeError("start-up failed")
        try:
            await self._start()
        except BaseException as exc:
            self.startup_error = exc
            # Failed before anything ran: a later request may try again; else only a restart can help.
            retry = float("inf") if self._started else _RETRY_START_AFTER
            self._retry_at = asyncio.get_running_loop().time() + retry
            then = "restart the server" if self._started else "a later request tries again"
            self._unavailable = AgentNotStartedError(
                f"The agent could not start ({exc or type(exc).__name__}): {then}",
                retry_after=_RETRY_START_AFTER,
            )
            self.dispatcher.handler = _Unavailable(self._unavailable)
            raise
        self.startup_error = self._unavailable = None
        self.dispatcher.handler = self.handler
        self._serving = True

    async def _start(self) -> None:
        opened = False
        try:
            if self.store is not None:
                await self.store.open()
                opened = True
            if self.security is not None:
                await self.security.start()
            if self.runtime is not None:
                await _start_bus(self.runtime.bus)
                await self.runtime.start()
        except BaseException:
            # Nothing runs yet (the runtime's recovery runs only once start succeeds): close what was opened,
            # so that a later start-up can try again from the beginning.
            if opened and self.store is not None:
                with contextlib.suppress(Exception):
                    await self.store.close()
            if self.security is not None:
                with contextlib.suppress(Exception):
                    await self.security.close()
            raise
        self._started = True
        for mount in self.mounts:
            await mount.start()
        if self.grpc_port is not None:
            from skillwire.server.bindings.grpc import GrpcServer

            self._grpc = GrpcServer(
                self.dispatcher,
                self.grpc_host,
                self.grpc_port,
                limits=self.limits,
                activate=self._activate,
                status_overrides=self.grpc_status_overrides,
                guard=self.guard,
                credentials=self.tls.grpc_credentials() if self.tls is not None else None,
                observability=self.observability,
            )
            await self._grpc.start()
            public = self.card_endpoint.public_url
            host = urlsplit(public).hostname if public else self.grpc_host
            if host in (None, "", "0.0.0.0", "::"):
                host = "127.0.0.1"
            self.grpc_address = f"[{host}]:{self._grpc.port}" if ":" in host else f"{host}:{self._grpc.port}"
            self.card_endpoint.invalidate()

    async def _start_on_first_use(self) -> None:
        """Start a mounted app, whose lifespan nobody ran, on its first request; while start-up fails, and
        for :data:`_RETRY_START_AFTER` seconds after each failure, requests answer the failure."""
        async with self._starting:
            if self._serving or self._stopped or asyncio.get_running_loop().time() < self._retry_at:
                return
            try:
                await self._startup_once()
            except Exception as exc:
                _log_startup_failure(exc)

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Any = None) -> AsyncIterator[None]:
        """Start-up and a clean shutdown around a parent application's life, for a mounted app::

            a2a = agent.asgi()
            api = FastAPI(lifespan=a2a.lifespan)
            api.mount("/a2a", a2a)

        or, beside your own start-up, ``async with a2a.lifespan(): yield`` in your lifespan. (Mounted
        without it, the app starts on its first request, but nothing shuts it down.)"""
        await self.startup()
        try:
            yield
        finally:
            await self.shutdown()

    async def shutdown(self) -> None:
        if self._stopped or not self._started:
            return
        self._stopped = True
        # gRPC stops taking calls at once; its open streams end when the runtime ends every stream.
        stopping = (
            asyncio.ensure_future(self._grpc.stop(self.shutdown_grace)) if self._grpc is not None else None
        )
        try:
            for mount in self.mounts:
                with contextlib.suppress(Exception):
                    await mount.stop()
            if self.runtime is not None:
                await self.runtime.stop(self.shutdown_grace)
            if self.store is not None:
                await self.store.close()
            if self.security is not None:
                await self.security.close()
        finally:
            if stopping is not None:
                await stopping

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        if kind == "http":
            if self.allowed_hosts is not None and not self._host_allowed(scope):
                await self._refuse_host(scope, send)
                return
            if scope["method"] == "OPTIONS" and is_preflight(scope):  # CORS: granted to allowed origins only
                await self.browser.preflight(scope, header_map(scope), send)
                return
            if self.browser.origins:
                origin = origin_of(scope)
                if origin is not None and self.browser.allows(origin):
                    send = self.browser.with_cors(origin, send)
            if not self._serving:
                await self._start_on_first_use()
            path = scope["path"]
            if scope.get("root_path"):
                scope = _below_root(scope)
                path = scope["path"]
            if path == self.rpc_path:
                await self.jsonrpc(scope, receive, send)
            elif path in CARD_PATHS:
                if self._unavailable is not None:
                    await self._answer_unavailable(send, self._unavailable)
                else:
                    await self.card_endpoint(scope, receive, send)
            elif path == JWKS_PATH and self.card_endpoint.signers:
                await self.card_endpoint.jwks(scope, receive, send)
            elif path == PUSH_JWKS_PATH and self.push is not None and self._serving:
                await self._push_jwks(scope, send)
            elif path == METRICS_PATH and self.metrics is not None and self.metrics.serves_endpoint:
                await self._metrics(scope, send)
            elif self.console is not None and self.console.handles(path):
                await self.console(scope, receive, send)
            elif (mount := self._mount_at(path)) is not None:
                await self._serve_mount(mount, scope, receive, send)
            elif not await self.rest(scope, receive, send):
                await send_bytes(send, 404, _NOT_FOUND)
        elif kind == "lifespan":
            await self._lifespan(receive, send)

    def _mount_at(self, path: str) -> Mounted | None:
        for mount in self.mounts:
            if path == mount.path or path.startswith(f"{mount.path}/"):
                return mount
        return None

    async def _serve_mount(self, mount: Mounted, scope: Scope, receive: Receive, send: Send) -> None:
        """A request to a mounted app, through the door every A2A route has (see :class:`Mounted`)."""
        headers = header_map(scope)
        principal = ANONYMOUS
        try:
            refusal = self.browser.refusal(headers)
            if refusal is not None:
                raise refusal
            if self.guard is not None:
                principal = await self.guard.http(scope, headers)
            if self._unavailable is not None:
                raise self._unavailable
            if scope["method"] == "POST":
                try:
                    body = await read_body(receive, self.limits.max_body_bytes, headers.get("content-length"))
                except BodyTooLarge:
                    raise InvalidRequestError(
                        f"Request body exceeds the limit of {self.limits.max_body_bytes} bytes",
                        metadata={"budget": "max_body_bytes", "limit": self.limits.max_body_bytes},
                    ) from None
                receive = _replayed(body, receive)
        except A2AError as error:
            status = 413 if isinstance(error, InvalidRequestError) else error.http_status
            await send_bytes(send, status, encode_status(error, status), extra_headers=error_headers(error))
            return
        except ClientGone:
            return
        await mount({**scope, PRINCIPAL_SCOPE_KEY: principal}, receive, send)

    async def _metrics(self, scope: Scope, send: Send) -> None:
        """``GET /metrics``: the Prometheus text format, behind the security schemes like any endpoint."""
        assert self.metrics is not None
        if scope["method"] not in ("GET", "HEAD"):
            await send_bytes(send, 405, b"", extra_headers=[(b"allow", b"GET, HEAD")])
            return
        if self.guard is not None:
            try:
                await self.guard.http(scope, header_map(scope))
            except A2AError as error:
                status = error.http_status
                await send_bytes(
                    send, status, encode_status(error, status), extra_headers=error_headers(error)
                )
                return
        body, content_type = self.metrics.exposition()
        await send_bytes(send, 200, b"" if scope["method"] == "HEAD" else body, content_type)

    async def _push_jwks(self, scope: Scope, send: Send) -> None:
        """``GET /.well-known/webhook-jwks.json``: the public keys of push deliveries' signatures."""
        assert self.push is not None
        try:
            jwks = await self.push.public_jwks()
        except Exception as exc:
            log.error("the push signing key could not be loaded: %s", exc)
            error = ServerBusyError("The push signing keys are not available yet", retry_after=5)
            await self._answer_unavailable(send, error)
            return
        await send_key_set(scope, send, _encode_json(jwks), b"public, max-age=300")

    def _host_allowed(self, scope: Scope) -> bool:
        """Whether the request's Host is allowed."""
        assert self.allowed_hosts is not None
        return self.allowed_hosts.allows(_host_of(scope), scope.get("scheme", "http"))

    async def _refuse_host(self, scope: Scope, send: Send) -> None:
        """Answer a request whose Host is not allowed 400, in the shape of the route it asked for (a JSON-RPC
        error at the JSON-RPC path, AIP-193 elsewhere)."""
        assert self.allowed_hosts is not None
        error = self.allowed_hosts.refusal(_host_of(scope))
        path = _below_root(scope)["path"] if scope.get("root_path") else scope["path"]
        if path == self.rpc_path and scope["method"] == "POST":
            body = jsonrpc_wire.encode_error(None, error)
        else:
            body = encode_status(error, 400)
        await send_bytes(send, 400, body)

    @staticmethod
    async def _answer_unavailable(send: Send, error: ServerBusyError) -> None:
        await send_bytes(send, 503, encode_status(error, 503), extra_headers=error_headers(error))

    async def _lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                try:
                    await self.startup()
                except Exception as exc:
                    _log_startup_failure(exc)
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


def _replayed(body: bytes, receive: Receive) -> Receive:
    """``receive`` for a request whose body was read already: the body once, then what the client sends."""
    pending = [body]

    async def replay() -> Message:
        if pending:
            return {"type": "http.request", "body": pending.pop(), "more_body": False}
        return await receive()

    return replay


async def _start_bus(bus: Any) -> None:
    """Reach a bus with connections of its own (Redis, PostgreSQL) now: one that cannot be reached stops
    start-up, rather than the first stream."""
    start = getattr(bus, "start", None)
    if start is not None:
        await start()


def _log_startup_failure(exc: Exception) -> None:
    if isinstance(exc, SkillwireError):  # a known condition: one clear line, no traceback
        log.error("start-up failed: %s", exc)
    else:
        log.exception("start-up failed", exc_info=exc)


class _Unavailable:
    """The request handler while start-up fails: every call answers why (on each binding, in its shape)."""

    def __init__(self, error: ServerBusyError) -> None:
        self.error = error

    async def handle(self, operation: Operation, params: Any, context: CallContext) -> Any:
        raise self.error


class NotLoadedApplication:
    """The ASGI app served while the agent cannot be loaded (``skillwire serve --reload`` after an edit broke
    a SKILL.md or agent.py): every request is answered at once, 503 with ``Retry-After`` and ``why`` (a
    JSON-RPC error at the JSON-RPC path, AIP-193 elsewhere), instead of waiting for a server that is not
    there; the lifespan starts and stops nothing."""

    def __init__(self, why: str, retry_after: int = 1, rpc_path: str = "/") -> None:
        self.error = AgentNotStartedError(why, retry_after=retry_after)
        self.rpc_path = rpc_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            while (message := await receive())["type"] != "lifespan.shutdown":
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        if scope["type"] != "http":
            return
        path = _below_root(scope)["path"] if scope.get("root_path") else scope["path"]
        if path == self.rpc_path and scope["method"] == "POST":
            body = jsonrpc_wire.encode_error(None, self.error)
        else:
            body = encode_status(self.error, 503)
        await send_bytes(send, 503, body, extra_headers=error_headers(self.error))


def _host_of(scope: Scope) -> str | None:
    """The request's Host header (None: none sent)."""
    return next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k.lower() == b"host"), None)


def _below_root(scope: Scope) -> Scope:
    """``scope`` with ``path`` and ``raw_path`` made relative to its ``root_path``, the prefix the app is
    mounted at (``root_path`` is kept: the card's URLs are built under it).

    The ASGI spec has ``path`` and ``raw_path`` include ``root_path`` (uvicorn's ``--root-path``, Starlette's
    ``Mount`` from 0.33 on); older Starlette stripped it from ``path`` but not from ``raw_path``. So each is
    stripped when it starts with the prefix."""
    root = scope["root_path"].rstrip("/")
    if not root:
        return scope
    relative = dict(scope)
    path = scope["path"]
    if _under(path, root):
        relative["path"] = path[len(root) :] or "/"
    raw = scope.get("raw_path")
    if raw:
        raw_root = quote(root, safe="/:@!$&'()*+,;=~")
        if _under(raw.decode("latin-1"), raw_root):
            relative["raw_path"] = raw[len(raw_root) :] or b"/"
        else:  # the prefix spelled otherwise (escaped differently): REST then matches the decoded path
            del relative["raw_path"]
    return relative


def _under(path: str, root: str) -> bool:
    """Whether ``path`` is ``root`` or below it."""
    return path.startswith(root) and path[len(root) : len(root) + 1] in ("", "/", "?")


_GENERATIONS = AgentExtension(
    uri=GENERATIONS_URI,
    description=(
        "A2A 1.1 generations for 1.0 clients: every task and event carries its generation; SubscribeToTask"
        " resumes after one (afterGeneration, or Last-Event-ID); GetTask long-polls on currentGeneration;"
        " SendMessage honours ifGenerationMatch."
    ),
)


_IDEMPOTENCY = AgentExtension(
    uri=IDEMPOTENCY_URI,
    description=(
        "An Idempotency-Key header (gRPC metadata) on SendMessage, SendStreamingMessage and the push-config"
        " calls makes a retry return the first call's result; the work is done once. Keys are kept per caller"
        " for the window in params (seconds)."
    ),
)


def _with_runtime_extensions(card: AgentCard, runtime: TaskRuntime) -> AgentCard:
    """``card`` declaring what the runtime offers: generations, and idempotency keys with a store that keeps
    their claims (unless the card declares them already)."""
    extensions = card.capabilities.extensions
    declared = {e.uri for e in extensions}
    added = [] if GENERATIONS_URI in declared else [_GENERATIONS]
    if runtime.keys is not None and IDEMPOTENCY_URI not in declared:
        added.append(
            msgspec.structs.replace(_IDEMPOTENCY, params={"window": runtime.limits.idempotency_window})
        )
    if not added:
        return card
    capabilities = msgspec.structs.replace(card.capabilities, extensions=[*extensions, *added])
    return msgspec.structs.replace(card, capabilities=capabilities)
