"""``skillwire console URL``: the web console for any A2A agent, through a relay on this machine (the relay,
its rules and budgets: :mod:`skillwire.cli.console_relay`, loaded only when the command runs)."""

from __future__ import annotations

import argparse
from typing import Any

from skillwire.errors import SkillwireError

__all__ = ["COMMANDS", "add_parsers", "run"]

COMMANDS = frozenset({"console"})


def _agent_url(text: str) -> str:
    from skillwire.client.origins import agent_url  # here: the relay's start does not need the client

    return agent_url(text)


def add_parsers(sub: Any) -> None:
    """Add ``console`` to the ``skillwire`` subparsers ``sub``."""
    console = sub.add_parser(
        "console",
        help="open the web console on any A2A agent (v1.0 or v0.3), through a relay on this machine",
        description="Serve the web console on a loopback port and forward its calls to the agent at URL.",
    )
    console.add_argument(
        "url", type=_agent_url, help="the agent's URL, or its agent card's; host:port and :port mean http://"
    )
    console.add_argument(
        "--host", default="127.0.0.1", help="the loopback address to listen on (default 127.0.0.1)"
    )
    console.add_argument("--port", type=int, default=0, help="the port to listen on (default: a free one)")
    console.add_argument(
        "--open",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="open the console in a browser (default on)",
    )
    console.add_argument("--ca", metavar="PEM", help="trust this CA certificate (PEM) for an https:// agent")


def run(args: argparse.Namespace) -> int:
    import socket
    import ssl
    import webbrowser

    import uvicorn

    from skillwire.cli.console_relay import Relay
    from skillwire.cli.output import say
    from skillwire.console import CONSOLE_PATH
    from skillwire.server.bindings.hosts import is_loopback

    if not is_loopback(args.host):
        raise SkillwireError(
            f"--host {args.host}: the relay listens on a loopback address only (it would let anyone who reaches"
            " it call the agent as you)"
        )
    verify: ssl.SSLContext | bool = True
    if args.ca:
        try:
            verify = ssl.create_default_context(cafile=args.ca)
        except (OSError, ssl.SSLError) as exc:
            raise SkillwireError(f"--ca {args.ca}: {exc}") from None
    relay = Relay(args.url, verify=verify, bind=args.host.strip("[]"))
    host = args.host.strip("[]")
    try:
        sock = socket.create_server(
            (host, args.port), family=socket.AF_INET6 if ":" in host else socket.AF_INET
        )
    except OSError as exc:
        raise SkillwireError(f"cannot listen on {args.host}:{args.port}: {exc.strerror or exc}") from None
    port = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}{CONSOLE_PATH}/"
    config = uvicorn.Config(
        relay, log_level="warning", lifespan="on", access_log=False, server_header=False, ws="none"
    )
    server = uvicorn.Server(config)
    say(f"skillwire: console for {relay.origin} at {url}")
    say(f"  agent card: {relay.card_url}")
    say("  (Ctrl-C stops it)")
    if args.open:
        webbrowser.open(url)
    server.run(sockets=[sock])
    return 0
