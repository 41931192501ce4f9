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

This module only dispatches: each command family is a module of this package that adds its commands to the
parser and runs them (:data:`FAMILIES`).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Collection, Sequence
from typing import Any, Protocol

from skillwire.cli import calls, console, db, deliveries, mcp, scaffold, serve, skills
from skillwire.cli.output import say_error
from skillwire.cli.serve import app_from_env  # documented: uvicorn --factory skillwire.cli.main:app_from_env
from skillwire.cli.targets import Unreachable
from skillwire.errors import SkillwireError

__all__ = ["FAMILIES", "Family", "app_from_env", "main"]


class Family(Protocol):
    """A command family: a module that adds its commands to ``skillwire``'s parser and runs them. Heavy
    imports stay inside its functions: ``skillwire --version`` builds every family's parser."""

    @property
    def COMMANDS(self) -> Collection[str]:
        """The commands (``args.command``) the family adds."""
        ...

    def add_parsers(self, sub: Any) -> None:
        """Add the family's commands to ``sub`` (the top-level subparsers)."""

    def run(self, args: argparse.Namespace) -> int:
        """Run the command ``args`` names; the process's exit code."""
        ...


#: Every command family, in the order ``skillwire --help`` lists their commands. A new family is a module
#: with ``COMMANDS``, ``add_parsers`` and ``run``, and one line here.
FAMILIES: tuple[Family, ...] = (serve, skills, deliveries, db, calls, scaffold, console, mcp)


class _Version(argparse.Action):
    """``--version``: the package's version, from :mod:`skillwire._version`, the one place it is written (the
    distribution's metadata is built from it; reading that back would cost the command 15 ms)."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(
            option_strings, argparse.SUPPRESS, nargs=0, default=argparse.SUPPRESS, help="print the version"
        )

    def __call__(self, parser: argparse.ArgumentParser, *args: Any, **kwargs: Any) -> None:
        from skillwire._version import version_line

        print(version_line())
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="skillwire", description="Build, serve and call A2A agents.")
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", required=True)
    for family in FAMILIES:
        family.add_parsers(sub)
    return parser


def _family(command: str) -> Family:
    return next(family for family in FAMILIES if command in family.COMMANDS)


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
        return _family(args.command).run(args)
    except SkillwireError as exc:
        say_error(str(exc))  # may quote a remote agent (skills list URL)
        return calls.EXIT_ERROR if isinstance(exc, Unreachable) else calls.EXIT_USAGE
    except BrokenPipeError:
        # Whoever read the output has gone: stop quietly. Later writes (the interpreter flushes stdout at
        # exit) go nowhere rather than raising again.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_CLOSED_PIPE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
