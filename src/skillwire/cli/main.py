"""The ``skillwire`` command.

* ``skillwire serve TARGET``: serve an agent. TARGET is a folder of skills (sub-folders with SKILL.md and
  skill.py, optional agent.yaml), a folder holding an ``agent.py`` that defines ``agent``, a ``.py`` file,
  or ``module:attribute``.
* ``skillwire skills check TARGET``: validate every manifest in a folder of skills, without running any
  code, and the code skills of its ``agent.py`` (or of a ``.py`` file, or ``module:attribute``), which it
  imports first (the model adapters it registers count); exit 0 if all are valid, 1 if not.
* ``skillwire skills list TARGET``: each skill of an agent (a folder, a ``.py`` file, ``module:attribute``,
  or the URL of a running agent: ``http(s)://...``, ``host:port``, ``:port``) with its input and output
  schemas, as the card publishes them.

A target of the wrong kind (a URL given to ``serve`` or ``skills check``, a path that is nothing) is one
line on stderr and exit 2; an agent that cannot be reached, exit 3.
* ``skillwire card|send|tasks ...``: call a running agent (see :mod:`skillwire.cli.calls`).
* ``skillwire mcp TARGET|URL``: an agent's skills as MCP tools over stdio (see :mod:`skillwire.cli.mcp`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import logging
import os
import re
import sys
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillwire.cli import calls, console, db, mcp, scaffold
from skillwire.cli.output import json_text, say, say_error
from skillwire.errors import A2AError, SkillwireError, install_command
from skillwire.protocol.limits import Limits, parse_limit
from skillwire.protocol.models import AgentCard

if TYPE_CHECKING:
    from skillwire.agent import Agent
    from skillwire.server.app import A2AApplication, NotLoadedApplication
    from skillwire.server.notifications.outbound import WebhookPolicy
    from skillwire.server.notifications.push import PushSettings
    from skillwire.server.observability.metrics import Metrics
    from skillwire.server.observability.telemetry import Telemetry
    from skillwire.stores.push import Delivery
    from skillwire.wire.card_signing import CardSigner

__all__ = ["RELOAD_INCLUDES", "app_from_env", "load_agent", "main"]


def is_agent_url(target: str) -> bool:
    """Whether ``target`` names a running agent: ``http(s)://...``, ``host:port`` or ``:port``."""
    from skillwire.client.origins import is_short_url

    return target.startswith(("http://", "https://")) or is_short_url(target)


def load_agent(target: str, *, read_only: bool = False, plugins: bool = False) -> Agent:
    """The Agent named by ``target``: a folder of skills, a folder with ``agent.py``, a ``.py`` file, or
    ``module:attribute``. What stops it from loading is a SkillwireError of one line: a manifest's key and
    line, or where the agent's own code failed (file, line, exception)."""
    try:
        return _load_agent(target, read_only=read_only, plugins=plugins)
    except SkillwireError:
        raise
    except Exception as exc:  # the agent's own code failed as it was imported
        raise SkillwireError(f"{target}: cannot load the agent: {_where_it_failed(exc)}") from exc


def _where_it_failed(exc: Exception) -> str:
    """``exc`` in one line, at the line of the user's code that raised it (not skillwire's or importlib's)."""
    if isinstance(exc, SyntaxError) and exc.filename:
        return f"{exc.filename}:{exc.lineno}: SyntaxError: {exc.msg}"
    ours = str(Path(__file__).resolve().parent.parent)
    frames = [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if not frame.filename.startswith((ours, "<frozen")) and "importlib" not in frame.filename
    ]
    where = f"{frames[-1].filename}:{frames[-1].lineno}: " if frames else ""
    return f"{where}{type(exc).__name__}: {exc}"


def _load_agent(target: str, *, read_only: bool, plugins: bool) -> Agent:
    from skillwire.skills.loader import is_skills_folder

    if is_agent_url(target):
        raise SkillwireError(
            f"{target} is the address of a running agent; this takes a folder, a .py file or"
            f" module:attribute (to call it: `skillwire send {target} TEXT`)"
        )
    path = Path(target)
    if path.is_dir() and not (path / "agent.py").is_file() and (is_skills_folder(path) or _names_mcp(path)):
        from skillwire.agent import Agent

        return Agent.from_folder(path, read_only=read_only, plugins=plugins)
    agent = _load_code_agent(target)
    agent.read_only = agent.read_only or read_only
    if plugins:
        from skillwire.skills.loader import plugin_skills

        for skill in plugin_skills():
            agent.add_skill(skill)
    return agent


def _names_mcp(folder: Path) -> bool:
    """Whether ``folder`` has an agent.yaml naming MCP servers (its skills may all be their tools)."""
    from skillwire.skills.loader import load_agent_config

    return (folder / "agent.yaml").is_file() and bool(load_agent_config(folder).mcp_servers)


def _load_code_agent(target: str) -> Agent:
    path = Path(target)
    attribute = "agent"
    if path.is_dir() or path.suffix == ".py":
        file = path / "agent.py" if path.is_dir() else path
        if not file.is_file():
            raise SkillwireError(f"{target}: no agent.py and no skill folders found (expected {file})")
        folder = str(file.parent.resolve())
        if folder not in sys.path:
            sys.path.insert(0, folder)
        from skillwire.skills.loader import import_file

        module = import_file(file, f"skillwire_target_{file.parent.resolve().name}")
    elif ":" in target:
        module_name, attribute = _module_attribute(target)
        if os.getcwd() not in sys.path and "" not in sys.path:  # as uvicorn does: ./agent.py is `agent`
            sys.path.insert(0, os.getcwd())
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise SkillwireError(f"{target}: cannot import {module_name}: {exc}") from exc
    else:
        raise SkillwireError(f"{target}: not a folder, a .py file or module:attribute")
    agent = getattr(module, attribute, None)
    from skillwire.agent import Agent

    if not isinstance(agent, Agent):
        raise SkillwireError(
            f"{target}: `{attribute}` must be a skillwire.Agent, found {type(agent).__name__}"
        )
    return agent


def _module_attribute(target: str) -> tuple[str, str]:
    """``module:attribute`` split, each a dotted Python name (SkillwireError otherwise)."""
    module, _, attribute = target.partition(":")
    names = [*module.split("."), *attribute.split(".")]
    if not all(name.isidentifier() for name in names):
        raise SkillwireError(f"{target}: not a folder, a .py file or module:attribute")
    return module, attribute


def _env(name: str, default: str | None = None) -> str | None:
    """The value of ``SKILLWIRE_<NAME>``: every serve option's default (a flag wins)."""
    return os.environ.get(f"SKILLWIRE_{name}", default)


def _env_flag(name: str) -> bool | None:
    value = _env(name)
    if value is None or value.strip() == "":
        return None
    word = value.strip().lower()
    if word in _TRUE or word in _FALSE:
        return word in _TRUE
    raise SkillwireError(f"SKILLWIRE_{name}={value!r}: expected 1 or 0 (true/false, yes/no, on/off)")


_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})
_LOG_LEVELS = ("debug", "info", "warning", "error")

#: ``skillwire serve --reload`` restarts the server when one of these changes under the served folder.
RELOAD_INCLUDES = ("*.py", "SKILL.md", "agent.yaml")


def _add_serve(sub: Any) -> None:
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
        default=_env("TARGET"),
        help="a folder of skills, a folder with agent.py, a .py file, or module:attribute",
    )
    serve.add_argument("--host", default=_env("HOST", "127.0.0.1"))
    serve.add_argument("--port", type=int, default=_env("PORT", "8000"))
    serve.add_argument(
        "--store",
        default=_env("STORE"),
        help=f"memory:// or sqlite:///PATH (default {DEFAULT_STORE}: a file named after the agent)",
    )
    serve.add_argument(
        "--bus",
        default=_env("BUS"),
        help="the event bus: memory:// (default: this process only) or redis://HOST[:PORT][/DB] (rediss:// for"
        " TLS), shared by the processes that serve one store (needs `" + install_command("redis") + "`)",
    )
    serve.add_argument(
        "--public-url", default=_env("PUBLIC_URL"), help="the base URL clients reach the agent at"
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
        default=_env("CARD_SIGNING_KEY"),
        metavar="PATH",
        help="sign the agent card with this private key (a PEM, or a JWK in JSON; EC, RSA or Ed25519); its"
        " public key is served at /.well-known/jwks.json",
    )
    serve.add_argument(
        "--card-signing-kid",
        default=_env("CARD_SIGNING_KID"),
        metavar="KID",
        help="the key id of the signatures (default: the JWK's kid, else its RFC 7638 thumbprint)",
    )
    serve.add_argument(
        "--log-level",
        default=_env("LOG_LEVEL", "info"),
        choices=_LOG_LEVELS,
        help="info (default) logs one line per request (skillwire.access); warning hides them",
    )
    serve.add_argument(
        "--log-format",
        default=_env("LOG_FORMAT", "text"),
        choices=("text", "json"),
        help="text (default): one readable line per record; json: one JSON object per line with the"
        " request, task, context and trace ids (docs/observability.md)",
    )
    serve.add_argument(
        "--reload",
        action=argparse.BooleanOptionalAction,
        default=_env_flag("RELOAD") or False,
        help="restart when a .py, SKILL.md or agent.yaml under the served folder changes (for development;"
        " needs `" + install_command("reload") + "`)",
    )
    serve.add_argument(
        "--workers",
        type=int,
        default=int(_env("WORKERS", "1") or "1"),
        metavar="N",
        help="serve N processes on the port (default 1); they share their tasks and events through the store"
        " and the bus, so N > 1 needs --store postgresql://... and a shared --bus (docs/deploy.md)",
    )
    serve.add_argument(
        "--grpc-port",
        type=int,
        default=_env("GRPC_PORT"),
        help="also serve the gRPC binding on this port (needs `" + install_command("grpc") + "`)",
    )
    serve.add_argument(
        "--grpc-statuses",
        choices=["v1.0.1", "v1.0.0"],
        default=_env("GRPC_STATUSES", "v1.0.1"),
        help="gRPC status table: the spec's v1.0.1 (default) or v1.0.0, which the TCK 1.0-dev still expects",
    )
    serve.add_argument(
        "--v03-card",
        action=argparse.BooleanOptionalAction,
        default=_env_flag("V03_CARD"),
        help="also write the v0.3 fields on the agent card for v0.3 clients (default: the agent's choice, on)",
    )
    serve.add_argument(
        "--read-only",
        action=argparse.BooleanOptionalAction,
        default=_env_flag("READ_ONLY") or False,
        help="serve only skills marked readOnly (others are refused)",
    )
    serve.add_argument(
        "--mcp",
        action=argparse.BooleanOptionalAction,
        default=_env_flag("MCP") or False,
        help="also serve the skills as MCP tools, Streamable HTTP at /mcp, behind the same security schemes"
        " (needs `" + install_command("mcp") + "`; docs/mcp.md)",
    )
    serve.add_argument(
        "--plugins",
        action=argparse.BooleanOptionalAction,
        default=_env_flag("PLUGINS") or False,
        help="add the skills installed packages offer (entry points)",
    )
    _add_tls(serve)
    _add_webhooks(serve)
    serve.add_argument(
        "--limit",
        action="append",
        default=[text for text in re.split(r"[,\s]+", _env("LIMIT", "") or "") if text],
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
        default=_env_flag("WEBHOOK_ALLOW_HTTP") or False,
        help="also call plain http:// webhook URLs (default https only); used by push notifications",
    )
    serve.add_argument(
        "--push",
        action=argparse.BooleanOptionalAction,
        default=_env_flag("PUSH"),
        help="offer push notifications (default on; --no-push turns them off)",
    )
    serve.add_argument(
        "--console",
        action=argparse.BooleanOptionalAction,
        default=_env_flag("CONSOLE"),
        help="serve the web console at /console/ (default: on when --host is a loopback address, off"
        " otherwise; docs/console.md)",
    )
    serve.add_argument(
        "--task-retention",
        default=_env("TASK_RETENTION"),
        metavar="DURATION",
        help="how long finished tasks are kept before they are pruned, e.g. 45s, 12h, 7d, or none (forever);"
        " default 1 day, or the agent's task_retention (docs/retention.md)",
    )
    serve.add_argument(
        "--metrics",
        action=argparse.BooleanOptionalAction,
        default=_env_flag("METRICS"),
        help="serve Prometheus metrics at /metrics, behind the security schemes (default off; needs"
        " prometheus-client, in skillwire[otel]; docs/observability.md)",
    )
    serve.add_argument(
        "--otel",
        action=argparse.BooleanOptionalAction,
        default=_env_flag("OTEL"),
        help="trace requests and task runs with OpenTelemetry (needs skillwire[otel]); the spans go to the"
        " tracer provider the process has, else OTLP over HTTP as the standard OTEL_* variables say"
        " (default: on when OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_ENDPOINT is set; docs/observability.md)",
    )
    serve.add_argument(
        "--otel-store-spans",
        action=argparse.BooleanOptionalAction,
        default=_env_flag("OTEL_STORE_SPANS"),
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


def _webhook_policy(args: argparse.Namespace) -> WebhookPolicy:
    """``--webhook-allow`` (else SKILLWIRE_WEBHOOK_ALLOW) and ``--webhook-allow-http`` as a WebhookPolicy."""
    allow = args.webhook_allow
    if allow is None:
        allow = [text for text in re.split(r"[,\s]+", _env("WEBHOOK_ALLOW", "") or "") if text]
    try:
        from skillwire.server.notifications.outbound import WebhookPolicy

        return WebhookPolicy(allow=allow, allow_http=args.webhook_allow_http)
    except ValueError as exc:
        raise SkillwireError(f"--webhook-allow: {exc}") from None


def _add_tls(serve: Any) -> None:
    """HTTPS, and gRPC over TLS, with the certificate skillwire presents and the client certificates it asks
    for (see :mod:`skillwire.server.bindings.tls`)."""
    serve.add_argument(
        "--tls-cert",
        default=_env("TLS_CERT"),
        metavar="PEM",
        help="serve HTTPS (and gRPC over TLS) with this certificate chain",
    )
    serve.add_argument(
        "--tls-key", default=_env("TLS_KEY"), metavar="PEM", help="the private key of --tls-cert"
    )
    serve.add_argument(
        "--tls-client-ca",
        default=_env("TLS_CLIENT_CA"),
        metavar="PEM",
        help="mutual TLS: ask for client certificates signed by this CA (needs `"
        + install_command("tls")
        + "`)",
    )
    serve.add_argument(
        "--tls-client-cert",
        choices=["required", "optional"],
        default=_env("TLS_CLIENT_CERT"),
        help="with --tls-client-ca: whether a client certificate is required (default) or optional",
    )
    serve.add_argument(
        "--tls-min-version",
        choices=["1.2", "1.3"],
        default=_env("TLS_MIN_VERSION"),
        help="the oldest TLS version served (default 1.2); 1.3 refuses TLS 1.2 clients (HTTPS only: grpcio"
        " cannot be held to it, so --grpc-port is refused with it; docs/tls.md)",
    )


class _Version(argparse.Action):
    """``--version``: the installed distribution's version, looked up only when asked for."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings, argparse.SUPPRESS, nargs=0, default=argparse.SUPPRESS, help="print the version"
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from importlib.metadata import version

        print(f"skillwire {version('skillwire')}")
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skillwire", description="Build, serve and call A2A agents.")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    _add_serve(sub)
    skills = sub.add_parser("skills", help="work with skill folders")
    skills_sub = skills.add_subparsers(dest="skills_command", required=True)
    check = skills_sub.add_parser(
        "check",
        help="validate every SKILL.md (and agent.yaml) in a folder of skills without running code, and the"
        " code skills of its agent.py (or of a .py file), which it imports",
    )
    check.add_argument(
        "folder", help="a folder of skills, a folder with agent.py, a .py file, or module:attribute"
    )
    check.add_argument(
        "--strict", action="store_true", help="fail (exit 1) on warnings too, such as exponential schemas"
    )
    listing = skills_sub.add_parser(
        "list", help="list an agent's skills with their input and output schemas (a folder, or an agent URL)"
    )
    listing.add_argument(
        "target", help="a folder (skills or agent.py), a .py file, module:attribute, or a URL"
    )
    listing.add_argument("--json", action="store_true", help="print the skills and their schemas as JSON")
    listing.add_argument(
        "--allow-origin", action="append", default=[], metavar="ORIGIN", help=calls.ALLOW_ORIGIN_HELP
    )
    deliveries = sub.add_parser(
        "deliveries",
        help="list the push deliveries that failed for good, from a SQLite or PostgreSQL store (read-only:"
        " works while a server or a cluster owns it)",
    )
    deliveries.add_argument(
        "store",
        help="the store: sqlite:///PATH (or the file's path), or postgresql://HOST/DATABASE[?schema=NAME]",
    )
    deliveries.add_argument(
        "--after", type=_seq, default=0, metavar="SEQ", help="only those after this one (its seq)"
    )
    deliveries.add_argument(
        "--limit", type=_count, default=100, metavar="N", help="at most this many (default 100)"
    )
    deliveries.add_argument("--json", action="store_true", help="one JSON object per line")
    db.add_parsers(sub)
    calls.add_parsers(sub)
    scaffold.add_parsers(sub)
    console.add_parsers(sub)
    mcp.add_parsers(sub)
    return parser


#: The largest seq a store holds (PostgreSQL's BIGINT, SQLite's INTEGER).
_MAX_SEQ = 2**63 - 1


def _seq(value: str) -> int:
    if not (value.isascii() and value.isdigit()) or int(value) > _MAX_SEQ:
        raise argparse.ArgumentTypeError(f"expected a delivery's seq (0 or more), got {value!r}")
    return int(value)


def _count(value: str) -> int:
    if not (value.isascii() and value.isdigit()) or not 0 < int(value) <= _MAX_SEQ:
        raise argparse.ArgumentTypeError(f"expected a number above 0, got {value!r}")
    return int(value)


def _deliveries(args: argparse.Namespace) -> int:
    """``skillwire deliveries STORE``: the failed push deliveries, oldest first."""
    found = _failed_deliveries(args.store, args.after, args.limit)
    for d in found:
        say(_delivery_json(d) if args.json else _delivery_text(d))
    if not found and not args.json:
        say("no failed deliveries")
    return 0


def _failed_deliveries(store: str, after: int, limit: int) -> list[Delivery]:
    """The failed deliveries of the SQLite or PostgreSQL store ``store``, read without opening it."""
    if store.startswith(("postgresql://", "postgres://")):
        import asyncio

        from skillwire.stores.postgres import read_failed_deliveries as read_postgres

        return asyncio.run(read_postgres(store, after, limit))  # without asyncpg: says how to install it
    from skillwire.stores.base import sqlite_path
    from skillwire.stores.sqlite import read_failed_deliveries

    if store.startswith("sqlite://"):
        store, _ = sqlite_path(store)
    elif "://" in store:
        raise SkillwireError(
            f"{store!r}: deliveries are read from a SQLite store (sqlite:///PATH) or a PostgreSQL one"
            " (postgresql://...)"
        )
    return read_failed_deliveries(store, after, limit)


def _delivery_json(d: Delivery) -> str:
    import json

    from skillwire.server.context import split_partition

    tenant, owner = split_partition(d.tenant)
    entry = {
        "seq": d.seq,
        "tenant": tenant,
        "owner": owner,
        "taskId": d.task_id,
        "configId": d.config_id,
        "attempts": d.attempts,
        "error": d.error,
        "created": _delivery_time(d).replace("+00:00", "Z"),
    }
    return json_text(json.dumps(entry))


def _delivery_text(d: Delivery) -> str:
    from skillwire.server.context import split_partition

    tenant, owner = split_partition(d.tenant)
    who = f" tenant {tenant!r}" if tenant else ""
    who += f" owner {owner}" if owner else ""
    when = _delivery_time(d)
    return f"{d.seq}  task {d.task_id}  config {d.config_id}{who}  {d.attempts} attempt(s)  {when}\n    {d.error}"


def _delivery_time(d: Delivery) -> str:
    from datetime import UTC, datetime

    return datetime.fromtimestamp(d.created_us / 1_000_000, UTC).isoformat(timespec="seconds")


def _serve(args: argparse.Namespace) -> int:
    from skillwire.server.serving.serve import print_banner, serve

    if args.reload:
        return _serve_reloading(args)
    agent, app = _application(args)
    if args.workers != 1:
        return _serve_workers(args, agent.name, app)

    def ready() -> None:
        print_banner(app, agent.name, host=args.host, port=args.port, public_url=args.public_url)

    try:
        serve(app, host=args.host, port=args.port, log_level=args.log_level, on_ready=ready)
    except SystemExit:  # uvicorn's way of saying start-up failed
        if app.startup_error is None:
            raise
    if app.startup_error is not None:
        raise SkillwireError(f"cannot start: {app.startup_error}")
    return 0


def _serve_workers(args: argparse.Namespace, name: str, app: A2AApplication) -> int:
    from skillwire.server.serving.serve import print_banner, serve_workers
    from skillwire.stores.shared import SharedStore

    if args.workers < 1:
        raise SkillwireError(f"--workers {args.workers}: expected 1 or more")
    if args.grpc_port is not None:
        raise SkillwireError(
            "--workers with --grpc-port: run one gRPC server per process instead (docs/deploy.md)"
        )
    runtime = app.runtime
    if not isinstance(app.store, SharedStore) or runtime is None or not runtime.bus.shared:
        raise SkillwireError(
            f"--workers {args.workers} needs a store and a bus the processes share: --store postgresql://..."
            " and --bus redis://... (or --bus postgresql://...); with this store each process would keep"
            " tasks of its own (docs/deploy.md)"
        )

    _reach(app)

    def ready() -> None:
        print_banner(app, name, host=args.host, port=args.port, public_url=args.public_url)
        print(f"  workers: {args.workers}", file=sys.stderr, flush=True)

    return serve_workers(
        lambda: _application(args)[1],
        args.workers,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        on_ready=ready,
    )


def _reach(app: A2AApplication) -> None:
    """Open ``app``'s store and reach its bus once, in this process, before any worker is forked: a database
    or a Redis that cannot be reached is one line now, not workers failing one after another."""
    import asyncio

    async def reach() -> None:
        store, bus = app.store, app.runtime.bus if app.runtime is not None else None
        opened = False
        try:
            if store is not None:
                await store.open()
                opened = True
            start = getattr(bus, "start", None)
            if start is not None:
                await start()
        finally:
            if opened and store is not None:
                await store.close()
            closing = getattr(bus, "aclose", None)
            if closing is not None:
                await closing()

    try:
        asyncio.run(reach())
    except SkillwireError as exc:
        raise SkillwireError(f"cannot start: {exc}") from None


def _application(args: argparse.Namespace) -> tuple[Agent, A2AApplication]:
    """The agent ``args`` name and the application serving it as ``args`` say."""
    from skillwire.server.bindings.hosts import is_loopback, served_hosts
    from skillwire.server.bindings.tls import tls_from
    from skillwire.server.buses.schemes import open_bus
    from skillwire.stores.base import default_store
    from skillwire.stores.schemes import open_store

    if not args.target:
        raise SkillwireError("serve needs a TARGET (or SKILLWIRE_TARGET)")
    if args.log_level not in _LOG_LEVELS:
        raise SkillwireError(f"log level {args.log_level!r}: expected one of {', '.join(_LOG_LEVELS)}")
    agent = load_agent(args.target, read_only=args.read_only, plugins=args.plugins)
    if args.v03_card is not None:
        agent.card_v03_fields = args.v03_card
    if args.task_retention:
        agent.task_retention = args.task_retention
        try:
            agent.limits_for()  # a bad duration is said now, naming the option
        except SkillwireError as exc:
            raise SkillwireError(f"--task-retention: {exc}") from None
    status_overrides: Mapping[type[A2AError], str] = {}
    if args.grpc_port is not None:
        try:
            from skillwire.server.bindings.grpc import GRPC_STATUSES_V1_0_0
        except ImportError as exc:
            raise SkillwireError(str(exc)) from None
        if args.grpc_statuses == "v1.0.0":
            status_overrides = GRPC_STATUSES_V1_0_0
    limits = _limits(args)
    tls = tls_from(
        args.tls_cert,
        args.tls_key,
        args.tls_client_ca,
        args.tls_client_cert,
        min_version=args.tls_min_version,
    )
    if tls is not None and tls.min_version != "1.2" and args.grpc_port is not None:
        tls.grpc_credentials()  # says why gRPC cannot serve it, before anything starts
    if args.card_signing_key:
        agent.card_signer = _card_signer(args.card_signing_key, args.card_signing_kid)
    try:
        hosts = served_hosts(
            args.host, args.allowed_host, env=_env("ALLOWED_HOSTS"), public_url=args.public_url
        )
    except ValueError as exc:
        raise SkillwireError(f"--allowed-host: {exc}") from None
    origins = _cors_origins(args)
    store = open_store(
        args.store or default_store(agent.name), limits=limits, setting="--store (SKILLWIRE_STORE)"
    )
    app = agent.asgi(
        store=store,
        bus=open_bus(args.bus, limits) if args.bus else None,
        allowed_hosts=hosts,
        public_url=args.public_url,
        grpc_port=args.grpc_port,
        grpc_host=args.host,
        grpc_status_overrides=status_overrides,
        limits=limits,
        tls=tls,
        webhook_policy=_webhook_policy(args),
        push=_push_settings(agent, args),
        console=is_loopback(args.host) if args.console is None else args.console,
        telemetry=_telemetry(args, agent.name),
        metrics=_metrics(args, agent.name),
        cors_origins=origins,
        mcp=args.mcp,
    )
    return agent, app


def _cors_origins(args: argparse.Namespace) -> list[str]:
    """``--cors-origin`` (else SKILLWIRE_CORS_ORIGINS), each checked to be an origin."""
    from skillwire.server.bindings.browser import parse_origin

    given = args.cors_origin
    if given is None:
        given = [text for text in re.split(r"[,\s]+", _env("CORS_ORIGINS", "") or "") if text]
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
        keys = [text for text in (_env("PUSH_SIGNING_KEY", "") or "").split(",") if text]
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


def _limits(args: argparse.Namespace) -> Limits:
    limits = Limits()
    for text in args.limit:
        try:
            limits = parse_limit(text, limits)
        except ValueError as exc:
            raise SkillwireError(str(exc)) from None
    return limits


def app_from_env() -> A2AApplication | NotLoadedApplication:
    """The application ``skillwire serve`` would build from the ``SKILLWIRE_*`` environment variables alone:
    the factory ``skillwire serve --reload`` hands to uvicorn, which calls it in each fresh process::

        SKILLWIRE_TARGET=examples/greeter uvicorn --factory skillwire.cli.main:app_from_env

    An agent that cannot be loaded (an edit broke its SKILL.md or agent.py) is one line in the log, and the
    app answers every request 503 with that line until the next change (:class:`NotLoadedApplication`).
    """
    from skillwire.server.app import NotLoadedApplication
    from skillwire.server.serving.serve import configure_logging

    args = _parse(["serve"])
    configure_logging(args.log_level, args.log_format)  # this process is uvicorn's child: set up here
    try:
        _, app = _application(args)
    except SkillwireError as exc:
        # an edit broke a SKILL.md or agent.py: one line, and a 503 saying why to every request meanwhile
        logging.getLogger("skillwire.reload").error(
            "%s (requests are answered 503 until the next change)", exc
        )
        return NotLoadedApplication(f"The agent cannot be loaded: {exc}")
    return app


def _serve_reloading(args: argparse.Namespace) -> int:
    from skillwire.server.serving.serve import serve_reloading

    _, app = _application(args)  # the same errors, up front, as without --reload
    target = Path(args.target)
    folder = target if target.is_dir() else target.parent if target.suffix == ".py" else Path.cwd()
    os.environ.update(_as_env(args))
    serve_reloading(
        "skillwire.cli.main:app_from_env",
        folder=str(folder.resolve()),
        includes=RELOAD_INCLUDES,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        public_url=args.public_url,
        limits=_limits(args),
        grpc=args.grpc_port is not None,
        tls=app.tls,
    )
    return 0


def _as_env(args: argparse.Namespace) -> dict[str, str]:
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


def _check(folder: str, *, strict: bool = False) -> int:
    """Exit 1 on problems (or on warnings too when ``strict``), else 0; warnings and notes go to stderr.
    ``folder`` is a folder (of skills, or with an agent.py), a .py file or ``module:attribute``."""
    from skillwire.skills.loader import check_code_agent, check_code_module, check_skills_folder

    if is_agent_url(folder):
        raise SkillwireError(
            f"{folder} is the address of a running agent; skills check reads an agent's source (a folder, a"
            f" .py file or module:attribute): to see a running agent's skills, `skillwire skills list {folder}`"
        )
    path = Path(folder)
    if path.suffix == ".py" and path.is_file():
        found = check_code_agent(path)
    elif ":" in folder and not path.exists():
        found = check_code_module(*_module_attribute(folder))
    elif path.is_dir():
        found = check_skills_folder(path)
    else:
        raise SkillwireError(f"{folder}: not a folder, a .py file or module:attribute")
    for line in (*found.problems, *found.warnings, *found.notes):
        print(line, file=sys.stderr)
    if found.count == 0:
        print(
            f"{folder}: no skills found (expected sub-folders holding SKILL.md, or an agent.py)",
            file=sys.stderr,
        )
        return 1
    warned = f", {len(found.warnings)} warning(s)" if found.warnings else ""
    if found.problems or (strict and found.warnings):
        problems = f"{len(found.problems)} problem(s){warned}"
        print(f"{problems} in {found.count} skill(s){' (--strict)' if strict else ''}", file=sys.stderr)
        return 1
    print(f"{found.count} skill(s) valid{warned}")
    return 0


def _list(target: str, *, as_json: bool = False, allowed_origins: Sequence[str] = ()) -> int:
    """Print each skill of ``target`` with its schemas, as the card publishes them (skill-schemas extension)."""
    import asyncio
    import json

    from skillwire.skills.schema_card import read_skill_schemas

    if is_agent_url(target):
        card = asyncio.run(_remote_card(calls.agent_url(target), allowed_origins))
    else:
        agent = load_agent(target)
        agent.load_mcp_tools()  # the tools of its MCP servers are skills too (servers down: none, logged)
        card = agent.card()
    schemas = read_skill_schemas(card)
    # A remote agent's card says what it likes: printed through output.say, which strips control sequences.
    if as_json:
        rows = [{"id": s.id, "name": s.name, **schemas.get(s.id, {})} for s in card.skills]
        say(json_text(json.dumps(rows, indent=2)))
        return 0
    for skill in card.skills:
        entry = schemas.get(skill.id, {})
        say(f"{skill.id}: {skill.description} [{', '.join(skill.tags)}]")
        for key in ("input", "output"):
            shown = json.dumps(entry[key], separators=(",", ":")) if key in entry else None
            reason = entry.get("omitted", {}).get(key)
            say(f"  {key}: {shown or (f'(not published: {reason})' if reason else '(no schema)')}")
    if not card.skills:
        print(f"{target}: no skills", file=sys.stderr)
    return 0


async def _remote_card(url: str, allowed_origins: Sequence[str]) -> AgentCard:
    from skillwire.client import Client, UntrustedOriginError

    try:
        async with await Client.connect(url, retries=0, allowed_origins=allowed_origins) as client:
            return client.card
    except UntrustedOriginError as exc:
        raise SkillwireError(f"{exc.explanation}. If you trust it: --allow-origin {exc.origin}") from None
    except Exception as exc:  # connection refused, not a card, ...: one line, no traceback
        raise _Unreachable(f"cannot read the agent card at {url}: {exc}") from None


class _Unreachable(SkillwireError):
    """A running agent the command could not read (exit 3, as for the client commands)."""


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _parser()
    args, extra = parser.parse_known_args(argv)
    # argparse gives an optional positional its value only before the first option, so in
    # `skillwire send URL --skill greet Ada` the TEXT would be "unrecognized": take it as TEXT.
    lone = extra[0] if len(extra) == 1 else None
    if getattr(args, "command", None) == "send" and args.text is None and lone and not lone.startswith("-"):
        args.text, extra = lone, []
    if extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    return args


#: The exit code of a command whose output was closed early (``skillwire tasks list URL | head -1``): the
#: shell's code for a process ended by SIGPIPE, as ``cat`` or ``grep`` would end.
EXIT_CLOSED_PIPE = 128 + 13


def main(argv: Sequence[str] | None = None) -> int:
    from skillwire.server.observability.logs import configure_logging

    try:
        args = _parse(argv)
        configure_logging(getattr(args, "log_level", None) or "warning", getattr(args, "log_format", "text"))
        if args.command == "serve":
            return _serve(args)
        if args.command == "skills" and args.skills_command == "list":
            return _list(args.target, as_json=args.json, allowed_origins=args.allow_origin)
        if args.command == "skills":
            return _check(args.folder, strict=args.strict)
        if args.command == "deliveries":
            return _deliveries(args)
        if args.command == "db":
            return db.run(args)
        if args.command in calls.COMMANDS:
            return calls.run(args)
        if args.command in scaffold.COMMANDS:
            return scaffold.run(args)
        if args.command in console.COMMANDS:
            return console.run(args)
        if args.command in mcp.COMMANDS:
            return mcp.run(args)
    except SkillwireError as exc:
        say_error(str(exc))  # may quote a remote agent (skills list URL)
        return calls.EXIT_ERROR if isinstance(exc, _Unreachable) else calls.EXIT_USAGE
    except BrokenPipeError:
        # Whoever read the output has gone: stop quietly. Later writes (the interpreter flushes stdout at
        # exit) go nowhere rather than raising again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_CLOSED_PIPE
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
