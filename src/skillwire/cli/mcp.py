"""``skillwire mcp TARGET``: an agent's skills as MCP tools over stdio, for MCP hosts that launch a command.

TARGET is what ``skillwire serve`` takes (a folder of skills, ``agent.py``, a ``.py`` file,
``module:attribute``): its skills run in this process, their tasks kept in ``--store`` (default: the
agent's own SQLite file, as for ``serve``). TARGET may also be the URL of a running A2A agent (v1.0 or
v0.3; ``host:port`` and ``:port`` mean ``http://``): its skills are then called with :class:`skillwire.Client`,
with the credentials of ``--credential`` and ``--header``, as ``skillwire send`` takes them.

Standard output carries MCP's messages only; logs (``--log-level``, default warning) go to standard error.
"""

from __future__ import annotations

import argparse
from typing import Any

from skillwire.errors import SkillwireError, install_command

__all__ = ["COMMANDS", "add_parsers", "run"]

COMMANDS = frozenset({"mcp"})


def add_parsers(sub: Any) -> None:
    from skillwire.cli.calls import add_connection_options

    mcp = sub.add_parser(
        "mcp",
        help="serve an agent's skills as MCP tools over stdio (a folder, or a running agent's URL)",
        description="Serve an agent's skills as MCP tools over stdio (standard output carries MCP only):"
        " a folder of skills, agent.py, a .py file or module:attribute runs here; a URL is a running A2A"
        " agent, called with skillwire.Client and the credentials given (docs/mcp.md).",
    )
    mcp.add_argument("target", help="a folder of skills, agent.py, a .py file, module:attribute, or a URL")
    mcp.add_argument("--store", default=None, help="the task store of a local agent (default: its own file)")
    mcp.add_argument(
        "--read-only",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="serve only the skills marked readOnly",
    )
    mcp.add_argument("--plugins", action="store_true", help="add the skills installed packages offer")
    add_connection_options(mcp)  # how to reach a remote agent, as `skillwire send` takes it
    mcp.add_argument(
        "--http",
        default=None,
        metavar="[HOST:]PORT",
        help="serve a remote agent's skills over Streamable HTTP at http://HOST:PORT/mcp instead of stdio"
        " (HOST default 127.0.0.1; whoever reaches it calls the agent with your credentials)",
    )
    mcp.add_argument(
        "--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"]
    )


def run(args: argparse.Namespace) -> int:
    from skillwire.cli.targets import is_agent_url

    try:
        import mcp  # noqa: F401
    except ImportError:
        raise SkillwireError(f"skillwire mcp needs the mcp package: {install_command('mcp')}") from None
    import asyncio

    if is_agent_url(args.target):
        from skillwire.cli.calls import agent_url

        if args.read_only or args.plugins or args.store:
            raise SkillwireError(
                "--read-only, --plugins and --store apply to an agent served here: a remote agent's own"
                " settings apply to it"
            )

        asyncio.run(_serve_remote(args, agent_url(args.target)))
    elif args.http:
        raise SkillwireError(
            f"--http serves a remote agent's skills; to serve {args.target}'s over HTTP, beside A2A:"
            f" skillwire serve {args.target} --mcp"
        )
    else:
        asyncio.run(_serve_local(args))
    return 0


async def _serve_local(args: argparse.Namespace) -> None:
    from skillwire.agent import default_store
    from skillwire.cli.targets import load_agent
    from skillwire.mcp.local import local_server
    from skillwire.mcp.stdio import serve_stdio
    from skillwire.stores.schemes import open_store

    agent = load_agent(args.target, read_only=args.read_only, plugins=args.plugins)
    store = open_store(args.store or default_store(agent.name), setting="--store")
    app = agent.asgi(store=store, push=False)
    await app.startup()
    try:
        server = local_server(
            agent.name, agent.version, agent.served_skills(), app.dispatcher, instructions=agent.description
        )
        await serve_stdio(server)
    finally:
        await app.shutdown()


async def _serve_remote(args: argparse.Namespace, url: str) -> None:
    from skillwire.client import Client
    from skillwire.mcp.remote import remote_server
    from skillwire.mcp.stdio import serve_stdio

    client = await Client.connect(
        url,
        bindings=(args.binding,) if args.binding else None,
        headers=dict(args.header),
        credentials=dict(args.credential) or None,
        allowed_origins=args.allow_origin,
        card_keys=args.card_keys,
        **({} if args.timeout is None else {"timeout": args.timeout}),
    )
    async with client:
        server = remote_server(client, url)
        if args.http:
            await _serve_http(server, args.http, f"the skills of {url}")
        else:
            await serve_stdio(server)


async def _serve_http(server: Any, where: str, what: str) -> None:
    """Serve ``server`` over Streamable HTTP at ``where`` (``[HOST:]PORT``) until interrupted."""
    import sys

    import uvicorn

    from skillwire.mcp.http import McpMount, McpOnly
    from skillwire.server.bindings.hosts import served_hosts

    host, _, port = where.rpartition(":")
    host = host.strip("[]") or "127.0.0.1"
    if not port.isdigit() or not 0 < int(port) < 65536:
        raise SkillwireError(f"--http {where}: expected [HOST:]PORT")
    app = McpOnly(McpMount(server), allowed_hosts=served_hosts(host, None))
    uvicorn_server = uvicorn.Server(
        uvicorn.Config(app, host=host, port=int(port), log_level="warning", lifespan="on", access_log=False)
    )
    started = uvicorn_server.startup

    async def startup(sockets: Any = None) -> None:
        await started(sockets)
        shown = f"[{host}]" if ":" in host else host
        print(
            f"skillwire: serving {what} as MCP tools at http://{shown}:{port}/mcp",
            file=sys.stderr,
            flush=True,
        )

    uvicorn_server.startup = startup  # type: ignore[method-assign]
    await uvicorn_server.serve()
