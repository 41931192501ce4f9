"""The options of ``skillwire serve``: its parser, where every option's default comes from
(``SKILLWIRE_<OPTION>``), and the way back, options as the variables that give them (for ``--reload``)."""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path
from typing import Any

from skillwire.errors import SkillwireError, install_command

__all__ = ["LOG_LEVELS", "add_parser", "as_env", "env", "env_flag", "env_list"]


def env(name: str, default: str | None = None) -> str | None:
    """The value of ``SKILLWIRE_<NAME>``: every serve option's default (a flag wins)."""
    return os.environ.get(f"SKILLWIRE_{name}", default)


def env_flag(name: str) -> bool | None:
    value = env(name)
    if value is None or value.strip() == "":
        return None
    word = value.strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise SkillwireError(f"SKILLWIRE_{name}={value!r}: expected 1 or 0 (true/false, yes/no, on/off)")


def env_list(name: str) -> list[str]:
    """``SKILLWIRE_<NAME>`` as a list: its items separated by commas or spaces (none when unset)."""
    return [text for text in re.split(r"[,\s]+", env(name, "") or "") if text]


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
LOG_LEVELS = ("debug", "info", "warning", "error")


def add_parser(sub: Any) -> None:
    """``skillwire serve``: each option's default comes from ``SKILLWIRE_<OPTION>`` when it is set."""
    from skillwire.stores.base import DEFAULT_STORE

    serve = sub.add_parser(
        "serve",
        help="serve an agent over A2A",
        epilog="Every option (and TARGET) may be set by an environment variable, SKILLWIRE_ and the option's"
        " name: SKILLWIRE_PORT=9000, SKILLWIRE_LIMIT=max_connections=5000,task_timeout=none,"
        " SKILLWIRE_READ_ONLY=1; a flag wins over its variable.",
    )
    serve.add_argument(
        "target",
        nargs="?",
        default=env("TARGET"),
        help="a folder of skills, a folder with agent.py, a .py file, or module:attribute",
    )
    serve.add_argument("--host", default=env("HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=env("PORT", "8000"))
    serve.add_argument(
        "--store",
        default=env("STORE"),
        help=f"memory:// or sqlite:///PATH (default {DEFAULT_STORE}: a file named after the agent)",
    )
    serve.add_argument(
        "--bus",
        default=env("BUS"),
        help="the event bus: memory:// (default: this process only) or redis://HOST[:PORT][/DB] (rediss:// for"
        " TLS), shared by the processes that serve one store (needs `" + install_command("redis") + "`)",
    )
    serve.add_argument(
        "--public-url", default=env("PUBLIC_URL"), help="the base URL clients reach the agent at"
    )
    serve.add_argument(
        "--allowed-host",
        action="append",
        default=None,
        metavar="HOST[:PORT]",
        help="a Host header to serve (repeatable; others are refused, 400); SKILLWIRE_ALLOWED_HOSTS takes"
        " them comma-separated. Default: on a loopback --host, 127.0.0.1, localhost and [::1] (any port);"
        " elsewhere none (the card names the address each connection reached)",
    )
    serve.add_argument(
        "--cors-origin",
        action="append",
        default=None,
        metavar="ORIGIN",
        help="an origin (https://app.example) whose web pages may call the agent, with CORS (repeatable;"
        " SKILLWIRE_CORS_ORIGINS takes them comma-separated). Default none: a request a browser marks as"
        " coming from another site is refused (docs/security.md)",
    )
    serve.add_argument(
        "--card-signing-key",
        default=env("CARD_SIGNING_KEY"),
        metavar="PATH",
        help="sign the agent card with this private key (a PEM, or a JWK in JSON; EC, RSA or Ed25519); its"
        " public key is served at /.well-known/jwks.json",
    )
    serve.add_argument(
        "--card-signing-kid",
        default=env("CARD_SIGNING_KID"),
        metavar="KID",
        help="the key id of the signatures (default: the JWK's kid, else its RFC 7638 thumbprint)",
    )
    serve.add_argument(
        "--log-level",
        default=env("LOG_LEVEL", "info"),
        choices=LOG_LEVELS,
        help="info (default) logs one line per request (skillwire.access); warning hides them",
    )
    serve.add_argument(
        "--log-format",
        default=env("LOG_FORMAT", "text"),
        choices=("text", "json"),
        help="text (default): one readable line per record; json: one JSON object per line with the"
        " request, task, context and trace ids (docs/observability.md)",
    )
    serve.add_argument(
        "--reload",
        action=argparse.BooleanOptionalAction,
        default=env_flag("RELOAD") or False,
        help="restart when a .py, SKILL.md or agent.yaml under the served folder changes (for development;"
        " needs `" + install_command("reload") + "`)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=int(env("WORKERS", "1") or "1"),
        metavar="N",
        help="serve N processes on the port (default 1); they share their tasks and events through the store"
        " and the bus, so N > 1 needs --store postgresql://... and a shared --bus (docs/deploy.md)",
    )
    serve.add_argument(
        "--grpc-port",
        type=int,
        default=env("GRPC_PORT"),
        help="also serve the gRPC binding on this port (needs `" + install_command("grpc") + "`)",
    )
    serve.add_argument(
        "--grpc-statuses",
        choices=["v1.0.1", "v1.0.0"],
        default=env("GRPC_STATUSES", "v1.0.1"),
        help="gRPC status table: the spec's v1.0.1 (default) or v1.0.0, which the TCK 1.0-dev still expects",
    )
    serve.add_argument(
        "--v03-card",
        action=argparse.BooleanOptionalAction,
        default=env_flag("V03_CARD"),
        help="also write the v0.3 fields on the agent card for v0.3 clients (default: the agent's choice, on)",
    )
    serve.add_argument(
        "--read-only",
        action=argparse.BooleanOptionalAction,
        default=env_flag("READ_ONLY") or False,
        help="serve only skills marked readOnly (others are refused)",
    )
    serve.add_argument(
        "--mcp",
        action=argparse.BooleanOptionalAction,
        default=env_flag("MCP") or False,
        help="also serve the skills as MCP tools, Streamable HTTP at /mcp, behind the same security schemes"
        " (needs `" + install_command("mcp") + "`; docs/mcp.md)",
    )
    serve.add_argument(
        "--plugins",
        action=argparse.BooleanOptionalAction,
        default=env_flag("PLUGINS") or False,
        help="add the skills installed packages offer (entry points)",
    )
    _add_tls(serve)
    _add_webhooks(serve)
    serve.add_argument(
        "--limit",
        action="append",
        default=env_list("LIMIT"),
        metavar="NAME=VALUE",
        help="set one budget (repeatable), e.g. --limit max_connections=5000 --limit task_timeout=none;"
        " docs/limits.md lists them all",
    )


def _add_webhooks(serve: Any) -> None:
    """The SSRF guard of the webhook URLs callers name (see :mod:`skillwire.server.notifications.outbound`)."""
    serve.add_argument(
        "--webhook-allow",
        action="append",
        default=None,
        metavar="HOST_OR_CIDR",
        help="a webhook host or network the server may call although it is loopback, private, link-local..."
        " (repeatable; SKILLWIRE_WEBHOOK_ALLOW takes them comma-separated), e.g. 10.0.0.0/8,"
        " hooks.internal.example, [::1]; used by push notifications",
    )
    serve.add_argument(
        "--webhook-allow-http",
        action=argparse.BooleanOptionalAction,
        default=env_flag("WEBHOOK_ALLOW_HTTP") or False,
        help="also call plain http:// webhook URLs (default https only); used by push notifications",
    )
    serve.add_argument(
        "--push",
        action=argparse.BooleanOptionalAction,
        default=env_flag("PUSH"),
        help="offer push notifications (default on; --no-push turns them off)",
    )
    serve.add_argument(
        "--console",
        action=argparse.BooleanOptionalAction,
        default=env_flag("CONSOLE"),
        help="serve the web console at /console/ (default: on when --host is a loopback address, off"
        " otherwise; docs/console.md)",
    )
    serve.add_argument(
        "--task-retention",
        default=env("TASK_RETENTION"),
        metavar="DURATION",
        help="how long finished tasks are kept before they are pruned, e.g. 45s, 12h, 7d, or none (forever);"
        " default 1 day, or the agent's task_retention (docs/retention.md)",
    )
    serve.add_argument(
        "--metrics",
        action=argparse.BooleanOptionalAction,
        default=env_flag("METRICS"),
        help="serve Prometheus metrics at /metrics, behind the security schemes (default off; needs"
        " prometheus-client, in skillwire[otel]; docs/observability.md)",
    )
    serve.add_argument(
        "--otel",
        action=argparse.BooleanOptionalAction,
        default=env_flag("OTEL"),
        help="trace requests and task runs with OpenTelemetry (needs skillwire[otel]); the spans go to the"
        " tracer provider the process has, else OTLP over HTTP as the standard OTEL_* variables say"
        " (default: on when OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_ENDPOINT is set; docs/observability.md)",
    )
    serve.add_argument(
        "--otel-store-spans",
        action=argparse.BooleanOptionalAction,
        default=env_flag("OTEL_STORE_SPANS"),
        help="with --otel: the task store's and the event bus's calls as child spans too (default off)",
    )
    serve.add_argument(
        "--push-signing-key",
        action="append",
        default=None,
        metavar="PATH",
        help="the private key (PEM or JWK) push deliveries are signed with, made there if missing"
        " (default: NAME.webhook-key.pem beside the SQLite store); given again, the later keys are the ones"
        " used before, kept in the JWKS for an hour (rotation); SKILLWIRE_PUSH_SIGNING_KEY takes them"
        " comma-separated",
    )


def _add_tls(serve: Any) -> None:
    """HTTPS, and gRPC over TLS, with the certificate skillwire presents and the client certificates it asks
    for (see :mod:`skillwire.server.bindings.tls`)."""
    serve.add_argument(
        "--tls-cert",
        default=env("TLS_CERT"),
        metavar="PEM",
        help="serve HTTPS (and gRPC over TLS) with this certificate chain",
    )
    serve.add_argument(
        "--tls-key", default=env("TLS_KEY"), metavar="PEM", help="the private key of --tls-cert"
    )
    serve.add_argument(
        "--tls-client-ca",
        default=env("TLS_CLIENT_CA"),
        metavar="PEM",
        help="mutual TLS: ask for client certificates signed by this CA (needs `"
        + install_command("tls")
        + "`)",
    )
    serve.add_argument(
        "--tls-client-cert",
        choices=["required", "optional"],
        default=env("TLS_CLIENT_CERT"),
        help="with --tls-client-ca: whether a client certificate is required (default) or optional",
    )
    serve.add_argument(
        "--tls-min-version",
        choices=["1.2", "1.3"],
        default=env("TLS_MIN_VERSION"),
        help="the oldest TLS version served (default 1.2); 1.3 refuses TLS 1.2 clients (HTTPS only: grpcio"
        " cannot be held to it, so --grpc-port is refused with it; docs/tls.md)",
    )


def as_env(args: argparse.Namespace) -> dict[str, str]:
    """``args`` as the ``SKILLWIRE_*`` variables that give them back (for the processes ``--reload`` starts)."""
    flags = {
        "V03_CARD": args.v03_card,
        "READ_ONLY": args.read_only,
        "PLUGINS": args.plugins,
        "MCP": args.mcp,
        "WEBHOOK_ALLOW_HTTP": args.webhook_allow_http,
        "PUSH": args.push,
        "CONSOLE": args.console,
        "OTEL": args.otel,
        "METRICS": args.metrics,
        "OTEL_STORE_SPANS": args.otel_store_spans,
    }
    values = {
        "TARGET": str(Path(args.target).resolve()) if ":" not in args.target else args.target,
        "HOST": args.host,
        "PORT": str(args.port),
        "STORE": args.store,
        "BUS": args.bus,
        "PUBLIC_URL": args.public_url,
        "ALLOWED_HOSTS": ",".join(args.allowed_host) if args.allowed_host else None,
        "CORS_ORIGINS": ",".join(args.cors_origin) if args.cors_origin else None,
        "WEBHOOK_ALLOW": ",".join(args.webhook_allow) if args.webhook_allow else None,
        "CARD_SIGNING_KEY": str(Path(args.card_signing_key).resolve()) if args.card_signing_key else None,
        "CARD_SIGNING_KID": args.card_signing_kid,
        "PUSH_SIGNING_KEY": ",".join(str(Path(k).resolve()) for k in args.push_signing_key)
        if args.push_signing_key
        else None,
        "LOG_LEVEL": args.log_level,
        "LOG_FORMAT": args.log_format,
        "GRPC_PORT": None if args.grpc_port is None else str(args.grpc_port),
        "GRPC_STATUSES": args.grpc_statuses,
        "LIMIT": ",".join(args.limit),
        "TASK_RETENTION": args.task_retention,
        **{
            f"TLS_{name.upper()}": getattr(args, f"tls_{name}")
            for name in ("cert", "key", "client_ca", "client_cert", "min_version")
        },
        "RELOAD": "0",
        **{name: None if flag is None else ("1" if flag else "0") for name, flag in flags.items()},
    }
    return {f"SKILLWIRE_{name}": value for name, value in values.items() if value is not None}
