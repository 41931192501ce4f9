"""Push notifications: the configs callers set, the deliveries their tasks' events make, and who sends them.

:class:`PushSettings` is what an operator chooses (on by default). :class:`PushService` is what the runtime
calls: the four config operations (scoped, like every task operation, to the caller's partition), the check of
a config given inline in SendMessage, and, at each commit of a task with configs, the deliveries to queue
with it (:mod:`skillwire.stores.push`), which the :class:`~skillwire.server.notifications.push_delivery.Deliverer` then
makes.

Rules chosen:

* Every event a task's run commits (the Task, each status and artifact update) is delivered to every config of
  the task, in order, as a v1.0 StreamResponse, or as the v0.3 stream event (``kind``-tagged, ``final`` on the
  last) for a config set by a v0.3 client.
* A config set while the task runs receives the events committed after it; a config can be set on a task in
  any state (a terminal one makes no more events).
* The URL is checked by the SSRF guard (:class:`~skillwire.server.notifications.outbound.WebhookPolicy`) when the config is
  set: a refused one answers -32602 and nothing is stored; at delivery the guard checks the resolved
  addresses again.
* Budgets: at most ``max_configs_per_task`` configs per task, and bounded field sizes (URL 2048 characters,
  id 256, token and credentials 4096 each).
* Deliveries are signed with the agent's key (``iss``: the agent's URL as the client that set the config
  reached it, else ``issuer``); its JWKS is served at :data:`JWKS_PATH`.
* With telemetry on (:mod:`skillwire.server.observability.telemetry`), each delivery keeps the trace context current when
  its events were committed (the run's span, or the request's), so its webhook request continues that trace
  (:mod:`skillwire.server.notifications.push_delivery`), after a restart too; with it off nothing is kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from skillwire.errors import InvalidParamsError, ServerBusyError, TaskNotFoundError, WebhookRefusedError
from skillwire.protocol.models import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    StreamResponse,
    TaskPushNotificationConfig,
    new_id,
)
from skillwire.server.context import CallContext
from skillwire.server.notifications.outbound import Resolver, WebhookPolicy
from skillwire.server.notifications.push_delivery import Deliverer, DeliveryRetry, header_problem
from skillwire.stores.base import make_folder, sqlite_path
from skillwire.stores.push import (
    Lane,
    Outgoing,
    PushConfigRecord,
    PushStore,
    config_cursor,
    decode_config_cursor,
)
from skillwire.stores.shared import SharedStore
from skillwire.wire.generations import codec_version, without_generations

if TYPE_CHECKING:
    import ssl

    import httpx

    from skillwire.server.observability.telemetry import Telemetry
    from skillwire.webhooks import WebhookSigner

__all__ = ["JWKS_PATH", "PushService", "PushSettings", "Targets"]

log = logging.getLogger("skillwire.push")

#: Where the public keys of the deliveries' signatures are served.
JWKS_PATH = "/.well-known/webhook-jwks.json"

#: config id -> the shape its deliveries take (``"1.1"``, ``"1.0"`` or ``"0.3"``)
Targets = dict[str, str]

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 100
_MAX_URL = 2048
_MAX_ID = 256
_MAX_SECRET = 4096

_encode = msgspec.json.Encoder().encode
_decode_config = msgspec.json.Decoder(TaskPushNotificationConfig).decode


@dataclass(frozen=True, kw_only=True)
class PushSettings:
    """How an agent sends push notifications.

    ``enabled``: offer them (``capabilities.pushNotifications``); ``signing_key``: the private key deliveries
    are signed with (a PEM or JWK file path, a joserfc key, a JWK dict or a :class:`~skillwire.webhooks.
    WebhookKeys`), or a list of them: the first signs, the others (the keys used before it) stay in the JWKS
    for ``previous_keys_grace`` seconds; None: a P-256 key generated once and kept beside the SQLite store
    (``NAME.webhook-key.pem``), or held in memory with the memory store. ``issuer``: the ``iss`` of
    deliveries whose config was set where the agent's URL is not known (gRPC without a public URL); default
    the public URL, else ``urn:skillwire:agent``. The rest are budgets: configs per task, deliveries waiting
    (past it, new configs are refused with ServerBusyError), deliveries under way at once, seconds per
    attempt, and the retry policy."""

    enabled: bool = True
    signing_key: Any = None
    previous_keys_grace: float = 3600.0
    issuer: str | None = None
    max_configs_per_task: int = 10
    max_pending: int = 100_000
    concurrency: int = 32
    timeout: float = 10.0
    max_attempts: int = 8
    first_delay: float = 1.0
    max_delay: float = 300.0

    def __post_init__(self) -> None:
        for name in ("max_configs_per_task", "max_pending", "concurrency", "max_attempts"):
            if getattr(self, name) < 1:
                raise ValueError(f"PushSettings.{name} must be at least 1")
        for name in ("timeout", "first_delay", "max_delay"):
            if getattr(self, name) <= 0:
                raise ValueError(f"PushSettings.{name} must be positive (seconds)")


#: The name under which a store several processes share keeps the generated signing key.
SIGNING_KEY_SECRET = "webhook-signing-key"


def key_path_for(store_url: str) -> Path | None:
    """Where the generated signing key is kept for the store at ``store_url``: beside a SQLite file."""
    if not store_url.startswith("sqlite://"):
        return None
    path, _ = sqlite_path(store_url)
    return Path(os.path.splitext(path)[0] + ".webhook-key.pem")


def signer_for(settings: PushSettings, store_url: str, issuer: str) -> WebhookSigner:
    """The signer ``settings`` name, or one with the generated key kept beside the store (this reads, and
    may write, a key file: run it off the event loop)."""
    from skillwire.webhooks import WebhookKeys, WebhookSigner, load_or_create

    key = settings.signing_key
    if isinstance(key, str | os.PathLike):
        key = load_or_create(Path(key))
    elif isinstance(key, list | tuple):
        # key rotation across a restart: the first key signs, the others (the keys used before it) stay
        # published for ``previous_keys_grace`` seconds
        if not key:
            raise ValueError("PushSettings.signing_key: an empty list names no key")
        loaded = [load_or_create(Path(k)) if isinstance(k, str | os.PathLike) else k for k in key]
        keys = WebhookKeys(loaded[-1])
        for newer in reversed(loaded[:-1]):
            keys.rotate(newer, grace=settings.previous_keys_grace)
        key = keys
    elif key is None:
        where = key_path_for(store_url)
        if where is not None:
            make_folder(where.parent)
            key = load_or_create(where)
        else:
            from joserfc.jwk import ECKey

            key = ECKey.generate_key("P-256", private=True)
    return WebhookSigner(key if isinstance(key, WebhookKeys) else WebhookKeys(key), issuer=issuer)


class PushService:
    """Push configs and deliveries for one runtime (see the module's docstring)."""

    def __init__(
        self,
        store: PushStore,
        signer: WebhookSigner | Callable[[], WebhookSigner],
        *,
        issuer: str = "urn:skillwire:agent",
        policy: WebhookPolicy | None = None,
        settings: PushSettings | None = None,
        resolver: Resolver | None = None,
        ssl_context: ssl.SSLContext | None = None,
        telemetry: Telemetry | None = None,
    ) -> None:
        """``signer``: the deliveries' signer, or a function that makes it at start-up (it may read or
        write a key file); ``issuer``: the ``iss`` of deliveries whose config gives none;
        ``resolver`` and ``ssl_context``: as :func:`~skillwire.server.notifications.outbound_http.guarded_client` takes them;
        ``telemetry``: deliveries keep their event's trace context and continue it (None: off)."""
        self.store = store
        #: the signer once made, and what makes it (None once made)
        self._signer: WebhookSigner | None = None if callable(signer) else signer
        self._make_signer: Callable[[], WebhookSigner] | None = signer if callable(signer) else None
        self.issuer = issuer
        self.policy = policy or WebhookPolicy()
        self.settings = settings = settings or PushSettings()
        self._resolver, self._ssl_context = resolver, ssl_context
        self._recounted = float("-inf")
        self._making = asyncio.Lock()
        self._warming: asyncio.Task[None] | None = None
        self._rescan: asyncio.Task[None] | None = None
        self.deliverer = Deliverer(
            store,
            concurrency=settings.concurrency,
            timeout=settings.timeout,
            retry=DeliveryRetry(
                max_attempts=settings.max_attempts,
                first_delay=settings.first_delay,
                max_delay=settings.max_delay,
            ),
            telemetry=telemetry,
        )

    @property
    def telemetry(self) -> Telemetry | None:
        """Where the trace contexts of deliveries come from and their spans go (None: off)."""
        return self.deliverer.telemetry

    async def signer(self) -> WebhookSigner:
        """The deliveries' signer, made on first use when it was given as a function (it may read or write
        a key file, in a worker thread): an agent that never pushes never loads the key or JOSE."""
        if self._signer is None:
            async with self._making:
                if self._signer is None:
                    store = self.store
                    if isinstance(store, SharedStore) and self.settings.signing_key is None:
                        self._signer = await self._shared_signer(store)
                    else:
                        assert self._make_signer is not None
                        self._signer = await asyncio.to_thread(self._make_signer)
                    self._make_signer = None
        return self._signer

    async def _shared_signer(self, store: SharedStore) -> WebhookSigner:
        """Every process sharing the store signs with the same generated key, kept in the store: a receiver
        verifies a delivery from any of them with the JWKS any of them serves."""
        from skillwire.webhooks import WebhookSigner, new_key_pem

        pem = await store.shared_secret(SIGNING_KEY_SECRET, await asyncio.to_thread(new_key_pem))
        return await asyncio.to_thread(WebhookSigner, pem, issuer=self.issuer)

    async def _connect(self) -> tuple[list[httpx.AsyncClient], WebhookSigner]:
        """What the first delivery needs: one guarded client per delivery slot, and the signer."""
        import httpx

        from skillwire.server.notifications.outbound_http import guarded_client

        context = self._ssl_context or httpx.create_ssl_context(trust_env=False)
        clients = [
            guarded_client(
                self.policy, timeout=self.settings.timeout, resolver=self._resolver, ssl_context=context
            )
            for _ in range(self.settings.concurrency)
        ]
        return clients, await self.signer()

    async def start(self) -> None:
        """Start delivering what the store holds. The signing key is loaded (or generated) in the
        background, so start-up does not wait for it (a key that cannot be read is logged then, and each
        delivery fails until it can); the HTTP clients are made at the first delivery."""
        await self.deliverer.start(self._connect)
        self._warming = asyncio.create_task(self._warm(), name="skillwire-push-key")

    async def _warm(self) -> None:
        try:
            await self.signer()
        except Exception:
            log.exception("the push notification signing key could not be loaded")

    def resume_pending(self) -> None:
        """Look in the store for deliveries this process now owns and does not know of yet (taken over from a
        process that stopped, or queued by another process in a lane this one delivers)."""
        if self._rescan is None or self._rescan.done():
            self._rescan = asyncio.create_task(self._rescan_now(), name="skillwire-push-rescan")

    async def _rescan_now(self) -> None:
        try:
            await self.deliverer.rescan()
        except Exception as exc:
            log.warning("could not read the pending push deliveries (%s); trying again later", exc)

    async def stop(self) -> None:
        rescan, self._rescan = self._rescan, None
        if rescan is not None:
            rescan.cancel()
            with contextlib.suppress(BaseException):
                await rescan
        warming, self._warming = self._warming, None
        if warming is not None:
            warming.cancel()
            with contextlib.suppress(BaseException):
                await warming
        await self.deliverer.stop()

    async def public_jwks(self) -> dict[str, Any]:
        return (await self.signer()).public_jwks()

    # -- configs ----------------------------------------------------------------------------------------

    def check(self, config: TaskPushNotificationConfig, field: str = "params") -> None:
        """Refuse a config that is too large or whose URL the SSRF guard refuses (nothing is stored)."""
        for name, value, most in (
            ("url", config.url, _MAX_URL),
            ("id", config.id, _MAX_ID),
            ("token", config.token, _MAX_SECRET),
            (
                "authentication.credentials",
                config.authentication.credentials if config.authentication else "",
                _MAX_SECRET,
            ),
            ("authentication.scheme", config.authentication.scheme if config.authentication else "", _MAX_ID),
        ):
            if len(value) > most:
                raise InvalidParamsError(
                    f"{field}.{name} is {len(value)} characters long; at most {most} are accepted",
                    field_violations=[(f"{field}.{name}", f"at most {most} characters")],
                )
        if config.authentication is not None and not _is_token(config.authentication.scheme):
            raise InvalidParamsError(
                f"{field}.authentication.scheme must be an HTTP authentication scheme name such as Bearer",
                field_violations=[(f"{field}.authentication.scheme", "not an HTTP auth-scheme token")],
            )
        if config.id and not config.id.isprintable():
            raise InvalidParamsError(
                f"{field}.id holds a control character",
                field_violations=[(f"{field}.id", "printable characters only")],
            )
        problem = header_problem(config)
        if (
            problem
        ):  # sent as a header value, which holds visible ASCII only: refused now, not at each attempt
            name = problem.split(" ", 1)[0]
            raise InvalidParamsError(
                f"{field}.{problem}: it is sent as an HTTP header value",
                field_violations=[(f"{field}.{name}", "visible ASCII characters only")],
            )
        try:
            self.policy.check_url(config.url)
        except WebhookRefusedError as exc:
            exc.field_violations = [(f"{field}.url", exc.refusal)]
            raise

    def record(
        self, config: TaskPushNotificationConfig, tenant: str, task_id: str, call: CallContext
    ) -> tuple[TaskPushNotificationConfig, PushConfigRecord]:
        """``config`` (checked) as it is stored for the task, and its record (not stored yet)."""
        stored = msgspec.structs.replace(config, id=config.id or new_id(), task_id=task_id)
        # the protocol the config was set in: 0.3, 1.0, or 1.1 (1.0 with the generations extension)
        shape = codec_version(call.protocol_version, call.extensions)
        issuer = call.base_url.rstrip("/") or self.issuer
        self.deliverer.know_host((tenant, task_id, stored.id), stored.url)
        return stored, PushConfigRecord(tenant, task_id, stored.id, _encode(stored), shape, issuer)

    async def put(
        self, config: TaskPushNotificationConfig, tenant: str, task_id: str, call: CallContext
    ) -> tuple[TaskPushNotificationConfig, str]:
        """Store ``config`` (checked) for the task; it as stored, and its delivery shape."""
        stored, record = self.record(config, tenant, task_id, call)
        shape = record.shape
        limit = self.settings.max_configs_per_task
        if not await self.store.put_push_config(record, limit):
            raise InvalidParamsError(
                f"Task {task_id} has {limit} push notification configs, the most a task may have: delete"
                " one first",
                field_violations=[("params.id", f"the task already has {limit} configs")],
                metadata={"taskId": task_id, "maxConfigs": limit},
            )
        lane = (tenant, task_id, stored.id)
        self.deliverer.forget_config(lane)
        self.deliverer.know_host(lane, stored.url)
        return stored, shape

    async def get(
        self, request: GetTaskPushNotificationConfigRequest, tenant: str, *, v03: bool = False
    ) -> TaskPushNotificationConfig:
        """The config; ``v03``: as v0.3 servers answered (the a2a-sdk 0.3 among them), a config id the task
        does not have reads the task's config when it has exactly one."""
        record = await self.store.get_push_config(tenant, request.task_id, request.id)
        if record is None and v03:
            only = await self.store.list_push_configs(tenant, request.task_id, limit=2)
            record = only[0] if len(only) == 1 else None
        if record is None:
            raise TaskNotFoundError(
                f"Task {request.task_id} has no push notification config {request.id!r}",
                metadata={"taskId": request.task_id, "configId": request.id},
            )
        return _decode_config(record.body)

    async def list_configs(
        self, request: ListTaskPushNotificationConfigsRequest, tenant: str
    ) -> ListTaskPushNotificationConfigsResponse:
        size = request.page_size
        if size < 0 or size > MAX_PAGE_SIZE:
            raise InvalidParamsError(
                f"params.pageSize must be in 1-{MAX_PAGE_SIZE} (0 or absent: {DEFAULT_PAGE_SIZE})",
                field_violations=[("params.pageSize", f"must be in 1-{MAX_PAGE_SIZE}")],
            )
        size = size or DEFAULT_PAGE_SIZE
        after = decode_config_cursor(request.page_token) if request.page_token else ""
        records = await self.store.list_push_configs(tenant, request.task_id, after=after, limit=size + 1)
        page = records[:size]
        token = config_cursor(page[-1].id) if len(records) > size else ""
        return ListTaskPushNotificationConfigsResponse(
            configs=[_decode_config(r.body) for r in page], next_page_token=token
        )

    async def delete(self, request: DeleteTaskPushNotificationConfigRequest, tenant: str) -> None:
        await self.store.delete_push_config(tenant, request.task_id, request.id)
        self.deliverer.forget_config((tenant, request.task_id, request.id))

    async def targets(self, tenant: str, task_id: str) -> Targets:
        """The configs of a task, as a run delivers to them."""
        records = await self.store.list_push_configs(
            tenant, task_id, limit=self.settings.max_configs_per_task
        )
        return {r.id: r.shape for r in records}

    # -- deliveries -------------------------------------------------------------------------------------

    def outgoing(self, events: list[StreamResponse], targets: Targets) -> tuple[Outgoing, ...]:
        """The deliveries of ``events`` to each target, in order, each in its target's shape, with the
        current trace context when telemetry is on."""
        telemetry = self.deliverer.telemetry
        trace = _trace(telemetry.carrier()) if telemetry is not None else ""
        bodies: dict[str, list[bytes]] = {}
        out: list[Outgoing] = []
        for config_id, shape in targets.items():
            encoded = bodies.get(shape)
            if encoded is None:
                encoded = bodies[shape] = [_body(event, shape) for event in events]
            out.extend(Outgoing(config_id, body, trace) for body in encoded)
        return tuple(out)

    def ready(self, tenant: str, task_id: str, targets: Targets, count: int) -> None:
        """``count`` deliveries to ``targets`` of this task were committed."""
        lanes: list[Lane] = [(tenant, task_id, config_id) for config_id in targets]
        self.deliverer.ready(lanes, count, tenant)

    async def admit(self, owner: str) -> None:
        """Refuse a new config of ``owner`` (the store partition of its task: tenant and caller) with
        ServerBusyError while its deliveries wait past its share of ``max_pending`` (a quarter), or while
        ``max_pending`` deliveries wait in all and it holds at least an equal part of them: the backlog of a
        webhook that cannot keep up is bounded by the tasks already configured, and one owner's backlog
        refuses that owner's configs, not everyone's."""
        limit = self.settings.max_pending
        share = max(1, limit // 4)
        deliverer = self.deliverer
        if not self._over(owner, limit, share):
            return
        loop = asyncio.get_running_loop()
        if loop.time() >= self._recounted + 1.0:  # the counts drift (a deleted config's deliveries): recount
            self._recounted = loop.time()
            await deliverer.recount()
            if not self._over(owner, limit, share):
                return
        mine = deliverer.pending_by_owner[owner]
        raise ServerBusyError(
            f"{mine} push deliveries of this caller's tasks are waiting ({deliverer.pending} in all, this"
            f" server's limit {limit}): no new push configs are taken from it until they are made; try again"
            " shortly",
            retry_after=5,
            metadata={"budget": "push.max_pending", "limit": limit, "waiting": mine},
        )

    def _over(self, owner: str, limit: int, share: int) -> bool:
        """Whether ``owner`` may set no new config now (see :meth:`admit`)."""
        deliverer = self.deliverer
        mine = deliverer.pending_by_owner[owner]
        if mine >= share:
            return True
        owners = len(deliverer.pending_by_owner)
        return deliverer.pending >= limit and mine > 0 and mine >= limit // max(1, owners)


#: Characters of trace context a delivery keeps at most: past it (a large ``baggage``), only the W3C headers.
_MAX_TRACE = 4096
_W3C = ("traceparent", "tracestate")


def _trace(carrier: dict[str, str]) -> str:
    """The trace context headers ``carrier`` as a delivery keeps them (see :mod:`skillwire.stores.push`)."""
    if not carrier:
        return ""
    trace = _encode(carrier).decode()
    if len(trace) > _MAX_TRACE:  # every delivery of every event keeps a copy: bound it
        trace = _encode({k: v for k, v in carrier.items() if k in _W3C}).decode()
    return trace if len(trace) <= _MAX_TRACE else ""


def _body(event: StreamResponse, shape: str) -> bytes:
    if shape == "0.3":
        from skillwire.wire.v03.server import encode_stream_event, is_final

        return encode_stream_event(event, final=is_final(event))
    return _encode(event if shape == "1.1" else without_generations(event))


_TCHAR = frozenset("!#$%&'*+-.^_`|~0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")


def _is_token(value: str) -> bool:
    """Whether ``value`` is an RFC 9110 token (what an auth-scheme name is)."""
    return bool(value) and all(c in _TCHAR for c in value)
