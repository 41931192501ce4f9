"""The application ``skillwire serve`` builds from its options: the agent its TARGET names, served with the
store, bus, budgets, TLS, hosts, push, console, telemetry and metrics the options (and ``SKILLWIRE_*``) say."""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from skillwire.cli.serve_options import LOG_LEVELS, env, env_list
from skillwire.cli.targets import load_agent
from skillwire.errors import A2AError, SkillwireError
from skillwire.protocol.limits import Limits, parse_limit

if TYPE_CHECKING:
    from skillwire.agent import Agent
    from skillwire.server.app import A2AApplication
    from skillwire.server.notifications.outbound import WebhookPolicy
    from skillwire.server.notifications.push import PushSettings
    from skillwire.server.observability.metrics import Metrics
    from skillwire.server.observability.telemetry import Telemetry
    from skillwire.server.options import Grpc, Network, Serving
    from skillwire.wire.card_signing import CardSigner

__all__ = ["application", "limits_from", "serving_from"]


def application(args: argparse.Namespace) -> tuple[Agent, A2AApplication]:
    """The agent ``args`` name and the application serving it as ``args`` say."""
    from skillwire.server.buses.schemes import open_bus
    from skillwire.stores.base import default_store
    from skillwire.stores.schemes import open_store

    if not args.target:
        raise SkillwireError("serve needs a TARGET (or SKILLWIRE_TARGET)")
    if args.log_level not in LOG_LEVELS:
        raise SkillwireError(f"log level {args.log_level!r}: expected one of {', '.join(LOG_LEVELS)}")
    agent = load_agent(args.target, read_only=args.read_only, plugins=args.plugins)
    options = serving_from(args, agent)
    store = open_store(
        args.store or default_store(agent.name), limits=options.limits, setting="--store (SKILLWIRE_STORE)"
    )
    bus = open_bus(args.bus, options.limits) if args.bus else None
    return agent, agent.asgi(store=store, bus=bus, options=options)


def serving_from(args: argparse.Namespace, agent: Agent) -> Serving:
    """The serving options of ``skillwire serve``, built once from its flags (each of which defaults to its
    ``SKILLWIRE_*`` variable); what they leave unsaid is the agent's (its push settings, its card's v0.3
    fields, its card signers, its task retention)."""
    from skillwire.agent import with_retention
    from skillwire.server.options import CardOptions, Observability, PushOptions, Serving

    if args.task_retention:
        try:
            with_retention(Limits(), args.task_retention)  # a bad duration is said now, naming the option
        except SkillwireError as exc:
            raise SkillwireError(f"--task-retention: {exc}") from None
    grpc = _grpc(args)
    limits = limits_from(args)
    network = _network(args)
    signers = (_card_signer(args.card_signing_key, args.card_signing_kid),) if args.card_signing_key else None
    return Serving(
        limits=limits,
        network=network,
        grpc=grpc,
        observability=Observability(
            telemetry=_telemetry(args, agent.name),
            metrics=_metrics(args, agent.name),
            json_logs=args.log_format == "json",
        ),
        push=PushOptions(settings=_push_settings(agent, args), webhook_policy=_webhook_policy(args)),
        card=CardOptions(v03_fields=args.v03_card, signers=signers),
        task_retention=args.task_retention or "default",
        mcp=args.mcp,
    )


def _grpc(args: argparse.Namespace) -> Grpc:
    """``--grpc-port`` (None: no gRPC), on ``--host``, with the status table ``--grpc-statuses`` names."""
    from skillwire.server.options import Grpc

    status_overrides: Mapping[type[A2AError], str] = {}
    if args.grpc_port is not None:
        try:
            from skillwire.server.bindings.grpc import GRPC_STATUSES_V1_0_0
        except ImportError as exc:
            raise SkillwireError(str(exc)) from None
        if args.grpc_statuses == "v1.0.0":
            status_overrides = GRPC_STATUSES_V1_0_0
    return Grpc(port=args.grpc_port, host=args.host, status_overrides=status_overrides)


def _network(args: argparse.Namespace) -> Network:
    """TLS, the public URL, the Hosts and origins served, and the console, as the flags say."""
    from skillwire.server.bindings.hosts import is_loopback, served_hosts
    from skillwire.server.bindings.tls import tls_from
    from skillwire.server.options import Network

    tls = tls_from(
        args.tls_cert,
        args.tls_key,
        args.tls_client_ca,
        args.tls_client_cert,
        min_version=args.tls_min_version,
    )
    if tls is not None and tls.min_version != "1.2" and args.grpc_port is not None:
        tls.grpc_credentials()  # says why gRPC cannot serve it, before anything starts
    try:
        hosts = served_hosts(
            args.host, args.allowed_host, env=env("ALLOWED_HOSTS"), public_url=args.public_url
        )
    except ValueError as exc:
        raise SkillwireError(f"--allowed-host: {exc}") from None
    return Network(
        public_url=args.public_url,
        allowed_hosts=tuple(hosts) if hosts else None,
        cors_origins=tuple(_cors_origins(args)),
        tls=tls,
        console=is_loopback(args.host) if args.console is None else args.console,
    )


def _webhook_policy(args: argparse.Namespace) -> WebhookPolicy:
    """``--webhook-allow`` (else SKILLWIRE_WEBHOOK_ALLOW) and ``--webhook-allow-http`` as a WebhookPolicy."""
    allow = args.webhook_allow
    if allow is None:
        allow = env_list("WEBHOOK_ALLOW")
    try:
        from skillwire.server.notifications.outbound import WebhookPolicy

        return WebhookPolicy(allow=allow, allow_http=args.webhook_allow_http)
    except ValueError as exc:
        raise SkillwireError(f"--webhook-allow: {exc}") from None


def _cors_origins(args: argparse.Namespace) -> list[str]:
    """``--cors-origin`` (else SKILLWIRE_CORS_ORIGINS), each checked to be an origin."""
    from skillwire.server.bindings.browser import parse_origin

    given = args.cors_origin
    if given is None:
        given = env_list("CORS_ORIGINS")
    try:
        return [parse_origin(origin) for origin in given]
    except ValueError as exc:
        raise SkillwireError(f"--cors-origin: {exc}") from None


def _metrics(args: argparse.Namespace, name: str) -> Metrics | None:
    """``--metrics`` (Prometheus at /metrics) and/or, with ``--otel``, OpenTelemetry metrics."""
    meter_provider: Any = None
    if _otel_wanted(args):
        from skillwire.server.observability.telemetry import meter_provider_from_env

        try:
            meter_provider = meter_provider_from_env(name)
        except (ImportError, ValueError) as exc:
            raise SkillwireError(f"--otel: {exc}") from None
    if not args.metrics and meter_provider is None:
        return None
    from skillwire.server.observability.metrics import Metrics

    try:
        return Metrics(prometheus=bool(args.metrics), meter_provider=meter_provider)
    except ImportError as exc:
        raise SkillwireError(f"--metrics: {exc}") from None


def _otel_wanted(args: argparse.Namespace) -> bool:
    """``--otel``, else on when the standard OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_ENDPOINT is set."""
    if args.otel is not None:
        return bool(args.otel)
    exporter = (os.environ.get("OTEL_TRACES_EXPORTER") or "").strip().lower()
    return bool(exporter and exporter != "none") or bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT"))


def _telemetry(args: argparse.Namespace, name: str) -> Telemetry | None:
    """``--otel``: spans of requests and runs (and of store and bus calls with ``--otel-store-spans``)."""
    if not _otel_wanted(args):
        return None
    from skillwire.server.observability.telemetry import Telemetry, tracer_provider_from_env

    try:
        return Telemetry(tracer_provider_from_env(name), store_spans=bool(args.otel_store_spans))
    except (ImportError, ValueError) as exc:
        raise SkillwireError(f"--otel: {exc}") from None


def _push_settings(agent: Agent, args: argparse.Namespace) -> PushSettings:
    """The agent's push settings with ``--push/--no-push`` and ``--push-signing-key`` applied."""
    settings = agent.push
    if args.push is not None:
        settings = dataclasses.replace(settings, enabled=args.push)
    keys = args.push_signing_key
    if keys is None:
        keys = [text for text in (env("PUSH_SIGNING_KEY", "") or "").split(",") if text]
    if keys:
        settings = dataclasses.replace(settings, signing_key=keys[0] if len(keys) == 1 else keys)
    return settings


def _card_signer(path: str, kid: str | None) -> CardSigner:
    from skillwire.wire.card_signing import CardSigner

    try:
        return CardSigner.from_file(path, kid=kid or None)
    except OSError as exc:
        raise SkillwireError(f"--card-signing-key {path}: {exc.strerror or exc}") from None
    except (ValueError, TypeError) as exc:
        raise SkillwireError(f"--card-signing-key {path}: {exc}") from None


def limits_from(args: argparse.Namespace) -> Limits:
    limits = Limits()
    for text in args.limit:
        try:
            limits = parse_limit(text, limits)
        except ValueError as exc:
            raise SkillwireError(str(exc)) from None
    return limits
