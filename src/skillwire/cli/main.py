"""The ``skillwire`` command.

* ``skillwire serve TARGET``: serve an agent. TARGET is a folder of skills (sub-folders with SKILL.md and
  skill.py, optional agent.yaml), a folder holding an ``agent.py`` that defines ``agent``, a ``.py`` file,
  or ``module:attribute``.
* ``skillwire skills check DIR``: validate every manifest in a folder of skills, without running any code;
  exit 0 if all are valid, 1 if not.
* ``skillwire card|send|tasks ...``: call a running agent (see :mod:`skillwire.cli.calls`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from skillwire.agent import DEFAULT_STORE, Agent
from skillwire.cli import calls, scaffold
from skillwire.errors import A2AError, SkillwireError
from skillwire.protocol.limits import Limits, parse_limit
from skillwire.stores.base import open_store

__all__ = ["load_agent", "main"]


def load_agent(target: str, *, read_only: bool = False, plugins: bool = False) -> Agent:
    """The Agent named by ``target``: a folder of skills, a folder with ``agent.py``, a ``.py`` file, or
    ``module:attribute``."""
    from skillwire.skills.loader import is_skills_folder

    path = Path(target)
    if path.is_dir() and not (path / "agent.py").is_file() and is_skills_folder(path):
        return Agent.from_folder(path, read_only=read_only, plugins=plugins)
    agent = _load_code_agent(target)
    agent.read_only = agent.read_only or read_only
    if plugins:
        from skillwire.skills.loader import plugin_skills

        for skill in plugin_skills():
            agent.add_skill(skill)
    return agent


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
        module_name, _, attribute = target.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:
            raise SkillwireError(f"{target}: cannot import {module_name}: {exc}") from exc
    else:
        raise SkillwireError(f"{target}: not a folder, a .py file or module:attribute")
    agent = getattr(module, attribute, None)
    if not isinstance(agent, Agent):
        raise SkillwireError(
            f"{target}: `{attribute}` must be a skillwire.Agent, found {type(agent).__name__}"
        )
    return agent


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skillwire", description="Build, serve and call A2A agents.")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve an agent over A2A")
    serve.add_argument("target", help="a folder with agent.py, or module:attribute")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument(
        "--store",
        default=os.environ.get("SKILLWIRE_STORE", DEFAULT_STORE),
        help=f"memory:// or sqlite:///PATH (default {DEFAULT_STORE})",
    )
    serve.add_argument("--public-url", default=None, help="the base URL clients reach the agent at")
    serve.add_argument("--log-level", default="warning", choices=["debug", "info", "warning", "error"])
    serve.add_argument(
        "--grpc-port",
        type=int,
        default=None,
        help="also serve the gRPC binding on this port (needs `pip install 'skillwire[grpc]'`)",
    )
    serve.add_argument(
        "--grpc-statuses",
        choices=["v1.0.1", "v1.0.0"],
        default="v1.0.1",
        help="gRPC status table: the spec's v1.0.1 (default) or v1.0.0, which the TCK 1.0-dev still expects",
    )
    serve.add_argument(
        "--v03-card",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="also write the v0.3 fields on the agent card for v0.3 clients (default: the agent's choice, on)",
    )
    serve.add_argument(
        "--read-only", action="store_true", help="serve only skills marked readOnly (others are refused)"
    )
    serve.add_argument(
        "--plugins", action="store_true", help="add the skills installed packages offer (entry points)"
    )
    serve.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set one budget (repeatable), e.g. --limit max_connections=5000 --limit task_timeout=none;"
        " docs/limits.md lists them all",
    )
    skills = sub.add_parser("skills", help="work with skill folders")
    skills_sub = skills.add_subparsers(dest="skills_command", required=True)
    check = skills_sub.add_parser(
        "check", help="validate every SKILL.md (and agent.yaml) in a folder of skills, without running code"
    )
    check.add_argument("folder")
    check.add_argument(
        "--strict", action="store_true", help="fail (exit 1) on warnings too, such as exponential schemas"
    )
    calls.add_parsers(sub)
    scaffold.add_parsers(sub)
    return parser


def _serve(args: argparse.Namespace) -> int:
    from skillwire.server.serve import serve

    agent = load_agent(args.target, read_only=args.read_only, plugins=args.plugins)
    if args.v03_card is not None:
        agent.card_v03_fields = args.v03_card
    status_overrides: Mapping[type[A2AError], str] = {}
    if args.grpc_port is not None:
        try:
            from skillwire.server.grpc import GRPC_STATUSES_V1_0_0
        except ImportError as exc:
            raise SkillwireError(str(exc)) from None
        if args.grpc_statuses == "v1.0.0":
            status_overrides = GRPC_STATUSES_V1_0_0
    limits = Limits()
    for text in args.limit:
        try:
            limits = parse_limit(text, limits)
        except ValueError as exc:
            raise SkillwireError(str(exc)) from None
    store = open_store(args.store, limits=limits)
    app = agent.asgi(
        store=store,
        public_url=args.public_url,
        grpc_port=args.grpc_port,
        grpc_host=args.host,
        grpc_status_overrides=status_overrides,
        limits=limits,
    )
    shown_host = "127.0.0.1" if args.host in ("0.0.0.0", "") else args.host
    base = args.public_url.rstrip("/") if args.public_url else f"http://{shown_host}:{args.port}"

    def ready() -> None:
        print(f"skillwire: serving {agent.name!r} at {base}/", flush=True)
        print(f"  agent card: {base}/.well-known/agent-card.json", flush=True)
        if app.grpc_address:
            print(f"  gRPC: {app.grpc_address}", flush=True)
        print(f"  task store: {store.url}", flush=True)

    try:
        serve(app, host=args.host, port=args.port, log_level=args.log_level, on_ready=ready)
    except SystemExit:  # uvicorn's way of saying start-up failed
        if app.startup_error is None:
            raise
    if app.startup_error is not None:
        raise SkillwireError(f"cannot start: {app.startup_error}")
    return 0


def _check(folder: str, *, strict: bool = False) -> int:
    """Exit 1 on problems (or on warnings too when ``strict``), else 0; warnings and notes go to stderr."""
    from skillwire.skills.loader import check_skills_folder

    found = check_skills_folder(folder)
    for line in (*found.problems, *found.warnings, *found.notes):
        print(line, file=sys.stderr)
    if found.count == 0:
        print(f"{folder}: no skills found (expected sub-folders holding SKILL.md)", file=sys.stderr)
        return 1
    warned = f", {len(found.warnings)} warning(s)" if found.warnings else ""
    if found.problems or (strict and found.warnings):
        problems = f"{len(found.problems)} problem(s){warned}"
        print(f"{problems} in {found.count} skill(s){' (--strict)' if strict else ''}", file=sys.stderr)
        return 1
    print(f"{found.count} skill(s) valid{warned}")
    return 0


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


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    level = getattr(args, "log_level", "warning").upper()
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "serve":
            return _serve(args)
        if args.command == "skills":
            return _check(args.folder, strict=args.strict)
        if args.command in calls.COMMANDS:
            return calls.run(args)
        if args.command in scaffold.COMMANDS:
            return scaffold.run(args)
    except SkillwireError as exc:
        print(f"skillwire: {exc}", file=sys.stderr)
        return 2
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
