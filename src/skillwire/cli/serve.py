"""``skillwire serve TARGET``: serve an agent, in this process, in ``--workers`` processes, or restarted on
every change (``--reload``, whose processes build it with :func:`app_from_env`). Its options are in
:mod:`skillwire.cli.serve_options`, the application they build in :mod:`skillwire.cli.assembly`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skillwire.cli.assembly import application
from skillwire.cli.serve_options import add_parser, as_env
from skillwire.errors import SkillwireError

if TYPE_CHECKING:
    from skillwire.server.app import A2AApplication, NotLoadedApplication

__all__ = ["COMMANDS", "RELOAD_INCLUDES", "add_parsers", "app_from_env", "run"]

COMMANDS = frozenset({"serve"})

#: ``skillwire serve --reload`` restarts the server when one of these changes under the served folder.
RELOAD_INCLUDES = ("*.py", "SKILL.md", "agent.yaml")


def add_parsers(sub: Any) -> None:
    add_parser(sub)


def _serve_options_from_env() -> argparse.Namespace:
    """``skillwire serve`` given no flag: every option from its ``SKILLWIRE_*`` variable, or its default."""
    parser = argparse.ArgumentParser(prog="skillwire")
    add_parsers(parser.add_subparsers(dest="command", required=True))
    return parser.parse_args(["serve"])


def run(args: argparse.Namespace) -> int:
    from skillwire.server.serving.serve import print_banner, serve

    if args.reload:
        return _serve_reloading(args)
    agent, app = application(args)
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
        lambda: application(args)[1],
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


def app_from_env() -> A2AApplication | NotLoadedApplication:
    """The application ``skillwire serve`` would build from the ``SKILLWIRE_*`` environment variables alone:
    the factory ``skillwire serve --reload`` hands to uvicorn, which calls it in each fresh process::

        SKILLWIRE_TARGET=examples/greeter uvicorn --factory skillwire.cli.main:app_from_env

    An agent that cannot be loaded (an edit broke its SKILL.md or agent.py) is one line in the log, and the
    app answers every request 503 with that line until the next change (:class:`NotLoadedApplication`).
    """
    from skillwire.server.app import NotLoadedApplication
    from skillwire.server.serving.serve import configure_logging

    args = _serve_options_from_env()
    configure_logging(args.log_level, args.log_format)  # this process is uvicorn's child: set up here
    try:
        _, app = application(args)
    except SkillwireError as exc:
        # an edit broke a SKILL.md or agent.py: one line, and a 503 saying why to every request meanwhile
        logging.getLogger("skillwire.reload").error(
            "%s (requests are answered 503 until the next change)", exc
        )
        return NotLoadedApplication(f"The agent cannot be loaded: {exc}")
    return app


def _serve_reloading(args: argparse.Namespace) -> int:
    from skillwire.server.serving.serve import serve_reloading

    _, app = application(args)  # the same errors, up front, as without --reload
    target = Path(args.target)
    folder = target if target.is_dir() else target.parent if target.suffix == ".py" else Path.cwd()
    os.environ.update(as_env(args))
    serve_reloading(
        "skillwire.cli.main:app_from_env",
        folder=str(folder.resolve()),
        includes=RELOAD_INCLUDES,
        host=args.host,
        port=args.port,
        log_level=args.log_level,
        options=app.options,
    )
    return 0
