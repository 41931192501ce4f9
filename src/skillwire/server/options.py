"""The serving options: a few frozen objects, one per concern (the way httpx has ``Limits`` and ``Timeout``),
built once and passed to what uses them.

- :class:`Network`: where and to whom the agent is exposed (public URL, JSON-RPC path, Hosts, CORS
  origins, TLS, the web console);
- :class:`Grpc`: the gRPC binding (port, None: not served; host; status table);
- :class:`Timing`: the SSE keep-alive period and the shutdown grace period;
- :class:`Observability`: OpenTelemetry spans, metrics, and whether log records carry JSON fields (defined in
  :mod:`skillwire.server.observability.observe`, beside the bindings and the runtime that take it);
- :class:`PushOptions`: the push settings for this app and the SSRF guard of webhook URLs;
- :class:`CardOptions`: the v0.3 fields of the card, and the card's signers;
- :class:`Serving`: all of the above, with the budgets (:class:`~skillwire.protocol.limits.Limits`), the task
  retention and the MCP endpoint.

They are built in three places, each once: :meth:`skillwire.Agent.asgi` from its keyword arguments
(:class:`ServingKeywords`, turned into a :class:`Serving` by :func:`serving`), :meth:`skillwire.Agent.run` from its
arguments and the ``SKILLWIRE_*`` variables, and ``skillwire serve`` from its flags (whose defaults are the
same variables). :class:`~skillwire.server.app.A2AApplication` takes the :class:`Serving` object and hands each
part to the endpoint that needs it::

    app = agent.asgi(options=Serving(network=Network(public_url="https://agent.example"), limits=Limits()))
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from types import MappingProxyType
from typing import TYPE_CHECKING, TypedDict, TypeVar

from skillwire.protocol.limits import Limits
from skillwire.server.observability.observe import Observability

if TYPE_CHECKING:
    from skillwire.errors import A2AError
    from skillwire.server.bindings.tls import TLSConfig
    from skillwire.server.notifications.outbound import WebhookPolicy
    from skillwire.server.notifications.push import PushSettings
    from skillwire.server.observability.metrics import Metrics
    from skillwire.server.observability.telemetry import Telemetry
    from skillwire.wire.card_signing import CardSigner

__all__ = [
    "CardOptions",
    "Grpc",
    "Network",
    "Observability",
    "PushOptions",
    "Serving",
    "ServingKeywords",
    "Timing",
    "serving",
]

#: How long finished tasks are kept: seconds, a timedelta, ``"7d"``, None (forever), or ``"default"``.
Retention = float | timedelta | str | None
T = TypeVar("T")


@dataclass(frozen=True, kw_only=True)
class Network:
    """Where and to whom the agent is exposed."""

    #: The base URL clients reach the agent at, written on the card (None: the address each request reached).
    public_url: str | None = None
    #: The path JSON-RPC is served at, below the root path.
    rpc_path: str = "/"
    #: The Host headers served, others refused with 400 (None: any; see :mod:`skillwire.server.bindings.hosts`).
    allowed_hosts: tuple[str, ...] | None = None
    #: The origins (``https://app.example``) whose web pages may call the agent, with CORS; a request a browser
    #: marks as coming from any other site is refused (:mod:`skillwire.server.bindings.browser`).
    cors_origins: tuple[str, ...] = ()
    #: The certificate gRPC and skillwire's own HTTP server serve with, mutual TLS included (None: plain).
    tls: TLSConfig | None = None
    #: Serve the web console (:mod:`skillwire.console`) at ``/console/`` below the root path.
    console: bool = False


@dataclass(frozen=True, kw_only=True)
class Grpc:
    """The gRPC binding (extra ``skillwire[grpc]``), served beside the HTTP ones when ``port`` is set."""

    #: The port (0: a free one); None: gRPC is not served.
    port: int | None = None
    #: The address it binds to.
    host: str = "127.0.0.1"
    #: Status codes replacing the spec's for some errors (``GRPC_STATUSES_V1_0_0`` of
    #: :mod:`skillwire.server.bindings.grpc`); read-only.
    status_overrides: Mapping[type[A2AError], str] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "status_overrides", MappingProxyType(dict(self.status_overrides)))


@dataclass(frozen=True, kw_only=True)
class Timing:
    """The server's clocks."""

    #: Seconds between SSE keep-alive comments on an idle stream.
    keepalive: float = 15.0
    #: Seconds running tasks may take to finish at shutdown before they are failed.
    shutdown_grace: float = 5.0


@dataclass(frozen=True, kw_only=True)
class PushOptions:
    """Push notifications as this app offers them (docs/push.md)."""

    #: The agent's push settings for this app: a PushSettings, a bool (on or off), or None: the agent's own.
    settings: PushSettings | bool | None = None
    #: The SSRF guard of the webhook URLs callers name (None: public https hosts only).
    webhook_policy: WebhookPolicy | None = None


@dataclass(frozen=True, kw_only=True)
class CardOptions:
    """How the card is served."""

    #: Also write the v0.3 fields (url, protocolVersion, ...) for v0.3 clients (None: the agent's choice).
    v03_fields: bool | None = None
    #: The signers of the public and extended cards (several: key rotation); None: the agent's own.
    signers: tuple[CardSigner, ...] | None = None


@dataclass(frozen=True, kw_only=True)
class Serving:
    """Every serving option, by concern."""

    limits: Limits = field(default_factory=Limits)
    network: Network = field(default_factory=Network)
    grpc: Grpc = field(default_factory=Grpc)
    timing: Timing = field(default_factory=Timing)
    observability: Observability = field(default_factory=Observability)
    push: PushOptions = field(default_factory=PushOptions)
    card: CardOptions = field(default_factory=CardOptions)
    #: How long finished tasks are kept (see :class:`Retention`); ``"default"``: as the agent says.
    task_retention: Retention = "default"
    #: Also serve the skills as MCP tools at ``/mcp`` (extra ``skillwire[mcp]``; docs/mcp.md).
    mcp: bool = False


class ServingKeywords(TypedDict, total=False):
    """The keyword options of :meth:`skillwire.Agent.asgi`, each documented there; :func:`serving` turns them
    into a :class:`Serving`."""

    public_url: str | None
    keepalive: float
    shutdown_grace: float
    limits: Limits | None
    grpc_port: int | None
    grpc_host: str
    grpc_status_overrides: Mapping[type[A2AError], str]
    tls: TLSConfig | None
    allowed_hosts: Sequence[str] | None
    cors_origins: Sequence[str]
    console: bool
    webhook_policy: WebhookPolicy | None
    push: PushSettings | bool | None
    telemetry: Telemetry | bool | None
    metrics: Metrics | bool | None
    json_logs: bool
    card_v03_fields: bool | None
    card_signer: CardSigner | Sequence[CardSigner] | None
    task_retention: Retention
    mcp: bool


def serving(options: Serving | None = None, keywords: ServingKeywords | None = None) -> Serving:
    """``options`` (default: all defaults) with the keyword options given applied over it::

    serving(None, {"allowed_hosts": ["agent.example"], "telemetry": True})
    """
    options = options or Serving()
    given = keywords or {}
    unknown = sorted(given.keys() - ServingKeywords.__optional_keys__)
    if unknown:  # what a signature of named parameters would refuse
        raise TypeError(f"asgi() got an unexpected keyword argument {unknown[0]!r}")
    if not given:
        return options
    replace = dataclasses.replace
    return replace(
        options,
        limits=given.get("limits") or options.limits,
        network=_changed(options.network, _network_fields(given)),
        grpc=_changed(options.grpc, _grpc_fields(given)),
        timing=_changed(options.timing, _renamed(given, _TIMING)),
        observability=_changed(options.observability, _observability_fields(given)),
        push=_changed(options.push, _renamed(given, _PUSH)),
        card=_changed(options.card, _card_fields(given)),
        task_retention=given.get("task_retention", options.task_retention),
        mcp=given.get("mcp", options.mcp),
    )


_TIMING = {"keepalive": "keepalive", "shutdown_grace": "shutdown_grace"}
_PUSH = {"push": "settings", "webhook_policy": "webhook_policy"}


def _changed(part: T, fields: Mapping[str, object]) -> T:
    """``part`` (a frozen dataclass) with ``fields`` replaced, or ``part`` itself when there are none."""
    return dataclasses.replace(part, **fields) if fields else part  # type: ignore[type-var]


def _renamed(given: ServingKeywords, names: Mapping[str, str]) -> dict[str, object]:
    """The keywords among ``names`` that were given, under the field names they map to."""
    values: Mapping[str, object] = given
    return {field_name: values[key] for key, field_name in names.items() if key in values}


def _network_fields(given: ServingKeywords) -> dict[str, object]:
    fields = _renamed(given, {"public_url": "public_url", "tls": "tls", "console": "console"})
    if "allowed_hosts" in given:
        hosts = given["allowed_hosts"]
        fields["allowed_hosts"] = tuple(hosts) if hosts else None
    if "cors_origins" in given:
        fields["cors_origins"] = tuple(given["cors_origins"])
    return fields


def _grpc_fields(given: ServingKeywords) -> dict[str, object]:
    names = {"grpc_port": "port", "grpc_host": "host", "grpc_status_overrides": "status_overrides"}
    return _renamed(given, names)


def _observability_fields(given: ServingKeywords) -> dict[str, object]:
    fields = _renamed(given, {"json_logs": "json_logs"})
    if "telemetry" in given:
        fields["telemetry"] = _made(given["telemetry"], _telemetry)
    if "metrics" in given:
        fields["metrics"] = _made(given["metrics"], _metrics)
    return fields


def _card_fields(given: ServingKeywords) -> dict[str, object]:
    fields = _renamed(given, {"card_v03_fields": "v03_fields"})
    if "card_signer" in given:
        fields["signers"] = signers_of(given["card_signer"])
    return fields


def signers_of(signer: CardSigner | Sequence[CardSigner] | None) -> tuple[CardSigner, ...]:
    """One CardSigner or several, as a tuple."""
    # (CardSigner is not imported to ask isinstance: signing loads joserfc only once it signs)
    if isinstance(signer, Sequence):
        return tuple(signer)
    return (signer,) if signer else ()


def _made(given: T | bool | None, make: Callable[[], T]) -> T | None:
    """True: a default one made now; False or None: none; else the one given."""
    if isinstance(given, bool):
        return make() if given else None
    return given


def _telemetry() -> Telemetry:
    from skillwire.server.observability.telemetry import Telemetry

    return Telemetry()


def _metrics() -> Metrics:
    from skillwire.server.observability.metrics import Metrics

    return Metrics()
